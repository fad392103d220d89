"""Beyond the paper: against the alternatives. The rivals stage (analysis.stages.rivals) prices every method's
forwards per case under every kernel source and writes, per source and corpus, the fastest method a deployment
can run (reports/tables/rivals_fastest.csv); this rule reads it back: one scope per kernel source, naming per
corpus the fastest method and its margin over the runner-up (the fastest method of another family), and Copy-as-Decode's best deployable variant
against the best rival (a paired case-bootstrap interval). The judged source (params rivals.judged_source,
in reports/metrics/rivals.json) leads."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.errors import MissingOutputError
from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED, star
from analysis.results.numbers import fmt_x
from analysis.rivals.methods import parse_method

METHOD = ("every method simulated on the gold output's Qwen2.5 tokens (gold acceptance for the speculative ones), "
          "priced per case with the bounds' rules under each kernel source; ratio of summed times over AR, "
          "case-bootstrap CIs [rivals]")
REASON = ("the paper compares with whole-file regeneration only; a deployment's alternatives are speculative "
          "decoding from the prompt (prompt lookup, llama.cpp's n-gram drafters, suffix decoding, TensorRT-LLM's "
          "suffix automaton, the input as the draft) and edit formats; an oracle comparison "
          "(every method assumes the model writes the gold output), not a measurement")


def where(row: dict) -> str:
    if row["corpus"] != POOLED:
        return star(row["corpus"])
    return {PAPER_POOL: "the paper's pool", ALL_POOL: "every corpus"}.get(row["pool"], row["pool"])


def label(name: str | None) -> str:
    return parse_method(name).label if name else "none"


def corpus_text(row: dict) -> str:
    text = f"{where(row)} ({row['n_cases']} cases): {label(row['fastest'])} {fmt_x(row['fastest_speedup'])}"
    if row.get("margin_over_runner_up") is not None:
        text += f", {row['margin_over_runner_up']:.2f}x over {label(row['runner_up'])}"
    if row.get("copy_over_rival") is not None:
        text += (f"; Copy-as-Decode's best ({label(row['best_copy'])}) {fmt_x(row['best_copy_speedup'])} is "
                 f"{row['copy_over_rival']:.2f}x the best rival's time ratio [{row['copy_over_rival_ci_low']:.2f}, "
                 f"{row['copy_over_rival_ci_high']:.2f}]")
    return text


def source_scopes(fast: pl.DataFrame, judged: str) -> tuple[Scope, ...]:
    """One scope per kernel source, the judged one first."""
    order = sorted(fast["kernel_source"].unique().to_list(), key=lambda s: (s != judged, s))
    scopes = []
    for source in order:
        rows = fast.filter(pl.col("kernel_source") == source).sort(pl.col("corpus") == POOLED, "pool", "corpus")
        cases = rows.filter(pl.col("pool") == ALL_POOL)["n_cases"]
        scopes.append(Scope(f"{source}{' (judged)' if source == judged else ''}", "not in the paper",
                            "; ".join(corpus_text(r) for r in rows.iter_rows(named=True)), BEYOND, REASON,
                            cases=int(cases[0]) if cases.len() else None))
    return tuple(scopes)


@register("rivals")
def rivals_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    fast = metric_input(spec, 0, tables, metrics_dir)
    facts = metric_input(spec, 1, tables, metrics_dir)
    judged = facts["judged_source"]
    if fast.height == 0:
        raise MissingOutputError("rivals_fastest.csv has no rows")
    scopes = source_scopes(fast, judged)
    lead = fast.filter((pl.col("kernel_source") == judged) & (pl.col("corpus") != POOLED)).sort("corpus")
    ours = f"under {judged}: " + "; ".join(
        f"{star(r['corpus'])} {label(r['fastest'])} {fmt_x(r['fastest_speedup'])}"
        + (f" ({r['margin_over_runner_up']:.2f}x over {label(r['runner_up'])})" if r["margin_over_runner_up"] else "")
        for r in lead.iter_rows(named=True))
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours, verdict=BEYOND, reason=REASON, method=METHOD,
                 scopes=scopes)
