"""Beyond the paper: against the alternatives, at batch 1. The rivals stage (analysis.stages.rivals) prices every
method's forwards per case under every kernel source and writes, per source and corpus, the fastest method a
deployment can run and Copy-as-Decode's best deployable variant against the best rival with a paired
case-bootstrap interval (reports/tables/rivals_fastest.csv); this rule reads it back as decision scopes
(analysis.claims.decision): under the judged source (params rivals.judged_source, in reports/metrics/rivals.json)
one per corpus and pool, under every other source one for the pool of every corpus. Each scope's `value` is
Copy-as-Decode's speedup over the best rival (rival time over Copy-as-Decode time), `ci` its paired interval,
`decision` faster, slower, tie or "depends on the pricing assumption" (where the table gives an extrapolation band,
`copy_over_rival_band_low/high`), and its detail names the prompt-lookup k at which the ranking flips
(reports/tables/rivals.csv, read when present). A corpus with a published figure (analysis.results.published:
EfficientEdit on CanItEdit) names it beside its rows, and gets a scope of its own, "not comparable", whose value is
this run's Copy-as-Decode speedup over AR there under the judged source, with the family across sources shown."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.decision import BATCH_1, Band, Flip, basis_of, decide, flip, reach
from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, NOT_COMPARABLE, Claim, Scope, metric_input
from analysis.errors import MissingOutputError
from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED, star
from analysis.results.numbers import fmt_x
from analysis.results.published import PublishedFigure, published_figures
from analysis.rivals.methods import parse_method

METHOD = ("every method simulated on the gold output's Qwen2.5 tokens (gold acceptance for the speculative ones, "
          "drafting from the context only), each with its own prompt, priced per case with the bounds' rules under each "
          "kernel source (prefills past the profiled N by params bounds.prefill_past_n, never under the device's compute "
          "floor); ratio of summed times over AR, case-bootstrap CIs; Copy-as-Decode's best deployable variant against "
          "the fastest deployable rival (draft budgets up to rivals.deployable_k_max; unbounded drafts and free "
          "directives are bounds), each chosen per corpus after pricing: the share of the rival's speedup it reaches "
          "(summed rival time over summed Copy-as-Decode time), paired case bootstrap, and its band over the prefill "
          "rules past the profiled N [rivals]")
REASON = ("the paper compares with whole-file regeneration only; a deployment's alternatives are speculative "
          "decoding from the prompt (prompt lookup, llama.cpp's n-gram drafters, suffix decoding, TensorRT-LLM's "
          "suffix automaton, the input as the draft) and edit formats; an oracle comparison "
          "(every method assumes the model writes the gold output), not a measurement")
RATIO = "copy_over_rival"


def where(row: dict) -> str:
    if row["corpus"] != POOLED:
        return star(row["corpus"])
    return {PAPER_POOL: "the paper's pool", ALL_POOL: "every corpus"}.get(row["pool"], row["pool"])


def label(name: str | None) -> str:
    return parse_method(name).label if name else "none"


def flips(speedups: pl.DataFrame, copy_speedup: float) -> list[Flip]:
    """Per prompt-lookup match policy in the rows (one source and corpus or pool of rivals.csv), where its k passes
    Copy-as-Decode's speedup over AR."""
    by_policy: dict[str, dict[int | None, float]] = {}
    for r in speedups.iter_rows(named=True):
        method = parse_method(r["method"])
        if method.family == "pld":
            by_policy.setdefault(str(method.policy), {})[method.k] = float(r["speedup"])
    return [flip(policy, ks, copy_speedup) for policy, ks in sorted(by_policy.items())]


def shares(speedups: pl.DataFrame | None, *methods: str) -> list[float | None]:
    """The extrapolated share of each method's forwards (rivals.csv), None where the table does not say."""
    if speedups is None or "extrapolated_share" not in speedups.columns:
        return [None for _ in methods]
    found = {r["method"]: r["extrapolated_share"] for r in speedups.iter_rows(named=True)}
    return [found.get(m) for m in methods]


def decision_scope(row: dict, judged: str, speedups: pl.DataFrame | None,
                   published: tuple[PublishedFigure, ...] = ()) -> Scope | None:
    """One corpus or pool under one source; None where the table has no pair to decide on."""
    if row.get(RATIO) is None or row.get("best_copy") is None or row.get("best_rival") is None:
        return None
    ci = (float(row[f"{RATIO}_ci_low"]), float(row[f"{RATIO}_ci_high"]))
    band = Band.of(row, RATIO)
    found = flips(speedups, float(row["best_copy_speedup"])) if speedups is not None else []
    source = row["kernel_source"]
    name = f"{source}{' (judged)' if source == judged else ''}, {where(row)}"
    ours = (f"{label(row['best_copy'])} {fmt_x(row['best_copy_speedup'])} against {label(row['best_rival'])} "
            f"{fmt_x(row['best_rival_speedup'])} over AR: Copy-as-Decode's best {reach(float(row[RATIO]), *ci)}")
    if band is not None:
        ours += f"; {band.low:.0%}-{band.high:.0%} over the prefill rules past the profiled N"
    if found:
        ours += "; " + "; ".join(f.sentence() for f in found)
    ours += "".join(f"; beside {f.beside()}" for f in published if f.corpus == row["corpus"])
    detail = {"load": BATCH_1, "kernel_source": source, "judged": source == judged, "corpus": row["corpus"],
              "pool": row["pool"], "where": where(row), "copy": row["best_copy"], "copy_label": label(row["best_copy"]),
              "copy_speedup": float(row["best_copy_speedup"]), "rival": row["best_rival"],
              "rival_label": label(row["best_rival"]), "rival_speedup": float(row["best_rival_speedup"]),
              "band": list(band.pair) if band else None, "flips": [f.plain() for f in found]}
    return Scope(name, "not in the paper", ours, BEYOND, REASON, value=float(row[RATIO]), ci=ci,
                 cases=int(row["n_cases"]), decision=decide(ci, *((band.pair, band.intervals) if band else ())),
                 basis=basis_of(shares(speedups, row["best_copy"], row["best_rival"])), detail=detail,
                 ci_kind="paired case bootstrap, 95%")


def _speedups(table: pl.DataFrame | None, row: dict) -> pl.DataFrame | None:
    if table is None:
        return None
    return table.filter((pl.col("kernel_source") == row["kernel_source"]) & (pl.col("corpus") == row["corpus"])
                        & (pl.col("pool") == row["pool"]))


def decision_scopes(fast: pl.DataFrame, judged: str, table: pl.DataFrame | None = None,
                    published: tuple[PublishedFigure, ...] = ()) -> tuple[Scope, ...]:
    """Under the judged source the pool of every corpus (the headline), the paper's pool, then each corpus; under
    every other source the pool of every corpus; each a decision scope."""
    order = sorted(fast["kernel_source"].unique().to_list(), key=lambda s: (s != judged, s))
    scopes = []
    for source in order:
        rows = fast.filter(pl.col("kernel_source") == source)
        if source != judged:
            rows = rows.filter((pl.col("corpus") == POOLED) & (pl.col("pool") == ALL_POOL))
        rows = rows.sort(pl.col("corpus") != POOLED, pl.col("pool") != ALL_POOL, "corpus")  # the pool of every corpus leads
        for row in rows.iter_rows(named=True):
            scope = decision_scope(row, judged, _speedups(table, row), published)
            if scope is not None:
                scopes.append(scope)
    return tuple(scopes)


def optional_speedups(tables: Path) -> pl.DataFrame | None:
    """reports/tables/rivals.csv (every method's speedup over AR), None where this run has none."""
    path = Path(tables) / "rivals.csv"
    return pl.read_csv(path, infer_schema_length=None) if path.is_file() else None


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


def published_scopes(fast: pl.DataFrame, judged: str, published: tuple[PublishedFigure, ...],
                     table: pl.DataFrame | None = None) -> tuple[Scope, ...]:
    """A scope per published figure on a corpus of this run: not comparable, with this run's family shown; its value
    is Copy-as-Decode's best deployable speedup over AR there under the judged source, with that method's case-bootstrap
    interval (reports/tables/rivals.csv); no scope where the run lacks either."""
    scopes = []
    for figure in published:
        rows = fast.filter((pl.col("corpus") == figure.corpus) & pl.col("best_copy_speedup").is_not_null())
        lead = rows.filter(pl.col("kernel_source") == judged)
        if rows.height == 0 or lead.height == 0 or table is None:
            continue
        r = lead.row(0, named=True)
        ci_rows = table.filter((pl.col("kernel_source") == judged) & (pl.col("corpus") == figure.corpus)
                               & (pl.col("method") == r["best_copy"]))
        if ci_rows.height == 0:
            continue
        ci = (float(ci_rows["ci_low"][0]), float(ci_rows["ci_high"][0]))
        scopes.append(Scope(f"{figure.corpus} beside {figure.method}'s published {figure.figure()}", "not in the paper",
                            family_text(rows, judged), NOT_COMPARABLE, figure.described(), paper_value=None,
                            value=float(r["best_copy_speedup"]), ci=ci, cases=int(r["n_cases"]),
                            ci_kind="case bootstrap, 95%"))
    return tuple(scopes)


@register("rivals")
def rivals_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    fast = metric_input(spec, 0, tables, metrics_dir)
    facts = metric_input(spec, 1, tables, metrics_dir)
    judged = facts["judged_source"]
    if fast.height == 0:
        raise MissingOutputError("rivals_fastest.csv has no rows")
    published = published_figures()
    speedups = optional_speedups(tables)
    scopes = decision_scopes(fast, judged, speedups, published)
    lead = [s for s in scopes if s.detail["judged"]]
    ours = (f"under {judged}, Copy-as-Decode's best deployable variant against the fastest deployable rival, the share "
            "of the rival's speedup it reaches: " + "; ".join(
                f"{s.detail['where']} {s.value:.0%} [{s.ci[0]:.0%}, {s.ci[1]:.0%}] ({s.decision})"
                + "".join(f", beside {f.beside()}" for f in published if f.corpus == s.detail["corpus"]) for s in lead))
    scopes += published_scopes(fast, judged, published, speedups)
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours, verdict=BEYOND, reason=REASON, method=METHOD,
                 scopes=scopes)
