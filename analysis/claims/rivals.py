"""Beyond the paper: against the alternatives. The rivals stage (analysis.stages.rivals) prices every method's
forwards per case under every kernel source and writes, per source and corpus, the fastest method a deployment
can run (reports/tables/rivals_fastest.csv); this rule reads it back: one scope per kernel source, naming per
corpus the fastest method and its margin over the runner-up (the fastest method of another family), and Copy-as-Decode's best deployable variant
against the best rival (a paired case-bootstrap interval). The judged source (params rivals.judged_source,
in reports/metrics/rivals.json) leads. A corpus with a published figure (analysis.results.published: EfficientEdit on
CanItEdit) names it beside its rows, and gets a scope of its own, "not comparable", showing this run's family."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, NOT_COMPARABLE, Claim, Scope, metric_input
from analysis.errors import MissingOutputError
from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED, star
from analysis.results.numbers import fmt_x
from analysis.results.published import PublishedFigure, published_figures
from analysis.rivals.methods import parse_method

METHOD = ("every method simulated on the gold output's Qwen2.5 tokens (gold acceptance for the speculative ones), "
          "priced per case with the bounds' rules under each kernel source; ratio of summed times over AR, "
          "case-bootstrap CIs [rivals]")
REASON = ("the paper compares with whole-file regeneration only; a deployment's alternatives are speculative "
          "decoding from the prompt (prompt lookup, suffix decoding) and edit formats; an oracle comparison "
          "(every method assumes the model writes the gold output), not a measurement")


def where(row: dict) -> str:
    if row["corpus"] != POOLED:
        return star(row["corpus"])
    return {PAPER_POOL: "the paper's pool", ALL_POOL: "every corpus"}.get(row["pool"], row["pool"])


def label(name: str | None) -> str:
    return parse_method(name).label if name else "none"


def corpus_text(row: dict, published: tuple[PublishedFigure, ...] = ()) -> str:
    text = f"{where(row)} ({row['n_cases']} cases): {label(row['fastest'])} {fmt_x(row['fastest_speedup'])}"
    if row.get("margin_over_runner_up") is not None:
        text += f", {row['margin_over_runner_up']:.2f}x over {label(row['runner_up'])}"
    if row.get("copy_over_rival") is not None:
        text += (f"; Copy-as-Decode's best ({label(row['best_copy'])}) {fmt_x(row['best_copy_speedup'])} is "
                 f"{row['copy_over_rival']:.2f}x the best rival's time ratio [{row['copy_over_rival_ci_low']:.2f}, "
                 f"{row['copy_over_rival_ci_high']:.2f}]")
    for figure in published:
        if row["corpus"] == figure.corpus:
            text += f"; beside {figure.beside()}"
    return text


def family_text(rows: pl.DataFrame, judged: str) -> str:
    """One corpus's measured family across the kernel sources: Copy-as-Decode's best and the fastest method,
    each as a range over the sources, and the judged source's pair."""
    def span(column: str) -> str:
        low, high = rows[column].min(), rows[column].max()
        return fmt_x(low) if fmt_x(low) == fmt_x(high) else f"{fmt_x(low)}-{fmt_x(high)}"

    text = (f"this run ({rows['n_cases'][0]} cases, oracle programs on the gold tokens, priced per kernel source): "
            f"Copy-as-Decode's best {span('best_copy_speedup')}, the fastest method {span('fastest_speedup')} over AR "
            f"across {rows.height} kernel sources")
    lead = rows.filter(pl.col("kernel_source") == judged)
    if lead.height:
        r = lead.row(0, named=True)
        text += (f"; under {judged}: Copy-as-Decode's best {fmt_x(r['best_copy_speedup'])}, "
                 f"{label(r['fastest'])} {fmt_x(r['fastest_speedup'])}")
    return text


def published_scopes(fast: pl.DataFrame, judged: str, published: tuple[PublishedFigure, ...]) -> tuple[Scope, ...]:
    """A scope per published figure on a corpus of this run: not comparable, with this run's family shown."""
    scopes = []
    for figure in published:
        rows = fast.filter((pl.col("corpus") == figure.corpus) & pl.col("best_copy_speedup").is_not_null())
        if rows.height == 0:
            continue
        scopes.append(Scope(f"{figure.corpus} beside {figure.method}'s published {figure.figure()}", "not in the paper",
                            family_text(rows, judged), NOT_COMPARABLE, figure.described(),
                            paper_value=None, cases=int(rows["n_cases"][0])))
    return tuple(scopes)


def source_scopes(fast: pl.DataFrame, judged: str, published: tuple[PublishedFigure, ...] = ()) -> tuple[Scope, ...]:
    """One scope per kernel source, the judged one first."""
    order = sorted(fast["kernel_source"].unique().to_list(), key=lambda s: (s != judged, s))
    scopes = []
    for source in order:
        rows = fast.filter(pl.col("kernel_source") == source).sort(pl.col("corpus") == POOLED, "pool", "corpus")
        cases = rows.filter(pl.col("pool") == ALL_POOL)["n_cases"]
        scopes.append(Scope(f"{source}{' (judged)' if source == judged else ''}", "not in the paper",
                            "; ".join(corpus_text(r, published) for r in rows.iter_rows(named=True)), BEYOND, REASON,
                            cases=int(cases[0]) if cases.len() else None))
    return tuple(scopes)


@register("rivals")
def rivals_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    fast = metric_input(spec, 0, tables, metrics_dir)
    facts = metric_input(spec, 1, tables, metrics_dir)
    judged = facts["judged_source"]
    if fast.height == 0:
        raise MissingOutputError("rivals_fastest.csv has no rows")
    published = published_figures()
    scopes = source_scopes(fast, judged, published) + published_scopes(fast, judged, published)
    lead = fast.filter((pl.col("kernel_source") == judged) & (pl.col("corpus") != POOLED)).sort("corpus")
    ours = f"under {judged}: " + "; ".join(
        f"{star(r['corpus'])} {label(r['fastest'])} {fmt_x(r['fastest_speedup'])}"
        + (f" ({r['margin_over_runner_up']:.2f}x over {label(r['runner_up'])})" if r["margin_over_runner_up"] else "")
        + "".join(f", beside {f.beside()}" for f in published if f.corpus == r["corpus"])
        for r in lead.iter_rows(named=True))
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours, verdict=BEYOND, reason=REASON, method=METHOD,
                 scopes=scopes)
