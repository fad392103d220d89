"""The rivals report's views: the rivals stage's tables read back and cut for the page (no HTML here)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.decision import FASTER, SLOWER, Band, decide
from analysis.layout import METRICS, TABLES
from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED, star
from analysis.results.numbers import fmt_x
from analysis.results.outputs import metrics, table
from analysis.results.published import PublishedFigure, published_figures
from analysis.rivals.methods import parse_method
from analysis.rivals.table import chart_methods  # noqa: F401 (the rivals page's chart order: charts.rivals_chart)

JUDGED = "judged"


def rivals_table(tables: Path = TABLES) -> pl.DataFrame:
    return table("rivals", tables)


def facts(metrics_dir: Path = METRICS) -> dict:
    return metrics("rivals", metrics_dir)


def chosen_source(source: str, metrics_dir: Path = METRICS) -> str:
    """The page's kernel source: `judged` is the stage's judged source (params rivals.judged_source)."""
    return facts(metrics_dir)["judged_source"] if source in (None, JUDGED) else source


def where(corpus: str, pool: str) -> str:
    if corpus != POOLED:
        return star(corpus)
    return {PAPER_POOL: "pooled (paper's three)", ALL_POOL: "pooled (every corpus)"}[pool]


def method_order(names) -> list[str]:
    """Copy-as-Decode first, then the rivals in table order (prompt lookup by policy and k), AR last."""
    def rank(name: str) -> tuple:
        m = parse_method(name)
        return (m.role == "baseline", m.role not in ("copy", "hybrid", "bound"), m.table_key())
    return sorted(set(names), key=rank)


def by_corpus(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """One row per method, one column per corpus and pool: the speedup over AR with its CI (text)."""
    rows = frame.filter(pl.col("kernel_source") == source).with_columns(
        where=pl.struct("corpus", "pool").map_elements(lambda r: where(r["corpus"], r["pool"]), return_dtype=pl.String),
        cell=pl.format("{} [{}, {}]", pl.col("speedup").round(2), pl.col("ci_low").round(2), pl.col("ci_high").round(2)))
    wide = rows.pivot(on="where", index=["method", "label", "role"], values="cell")
    order = {m: i for i, m in enumerate(method_order(wide["method"]))}
    return wide.with_columns(order=pl.col("method").replace_strict(order)).sort("order").drop("order", "method")


def verdict(row: dict) -> str:
    """The head-to-head's verdict word of one rivals_fastest row (analysis.claims.decision), `-` without a pair."""
    if row.get("copy_over_rival") is None:
        return "-"
    band = Band.of(row, "copy_over_rival")
    word = decide((row["copy_over_rival_ci_low"], row["copy_over_rival_ci_high"]),
                  *((band.pair, band.intervals) if band else ()))
    return {FASTER: "Copy-as-Decode faster", SLOWER: "the rival faster"}.get(word, word)


def fastest_rows(fast: pl.DataFrame, source: str) -> pl.DataFrame:
    """The fastest-method table of one source, readable: where, the fastest and its margin, the best of each side,
    the share of the best rival's speedup Copy-as-Decode's best reaches, its band and the verdict."""
    rows = fast.filter(pl.col("kernel_source") == source)
    return pl.DataFrame([{
        "where": where(r["corpus"], r["pool"]), "cases": r["n_cases"],
        "fastest": f"{parse_method(r['fastest']).label} {fmt_x(r['fastest_speedup'])}",
        "margin over the next family's best": (f"{r['margin_over_runner_up']:.2f}x over {parse_method(r['runner_up']).label}"
                                      if r["runner_up"] else "-"),
        "best rival": f"{parse_method(r['best_rival']).label} {fmt_x(r['best_rival_speedup'])}" if r["best_rival"] else "-",
        "Copy-as-Decode (deployable)": (f"{parse_method(r['best_copy']).label} {fmt_x(r['best_copy_speedup'])}"
                                        if r["best_copy"] else "-"),
        "Copy-as-Decode's share of the best rival's speedup [paired 95% CI]": (
            f"{r['copy_over_rival']:.0%} [{r['copy_over_rival_ci_low']:.0%}, {r['copy_over_rival_ci_high']:.0%}]"
            if r["copy_over_rival"] is not None else "-"),
        "over the prefill rules past the profiled N": (
            f"{r['copy_over_rival_band_low']:.0%}-{r['copy_over_rival_band_high']:.0%}"
            if r.get("copy_over_rival_band_low") is not None else "-"),
        "verdict": verdict(r),
    } for r in rows.iter_rows(named=True)])


def with_published(wide: pl.DataFrame, figures: tuple[PublishedFigure, ...] | None = None) -> pl.DataFrame:
    """`by_corpus`'s table with a row per published figure on one of its corpora, in that corpus's column only
    (`up to 10.38x`), labelled with its conditions and "not comparable": beside this run's rows, never among them."""
    figures = published_figures() if figures is None else figures
    rows = [{"label": f"{f.method}, published ({f.summary}): not comparable", "role": "published",
             star(f.corpus): f.figure()} for f in figures if star(f.corpus) in wide.columns]
    if not rows:
        return wide
    text = {c: pl.String for c in wide.columns}
    extra = pl.DataFrame([{c: r.get(c) for c in wide.columns} for r in rows], schema=text)
    return pl.concat([wide.cast(text), extra])


def published_rows(fast: pl.DataFrame, source: str, figures: tuple[PublishedFigure, ...] | None = None) -> pl.DataFrame:
    """Each published figure on a corpus of this run, with its conditions, beside that corpus's rows under `source`:
    the fastest method a deployment can run and Copy-as-Decode's best deployable variant; always not comparable."""
    figures = published_figures() if figures is None else figures
    rows = []
    for f in figures:
        mine = fast.filter((pl.col("kernel_source") == source) & (pl.col("corpus") == f.corpus))
        if mine.height == 0:
            continue
        r = mine.row(0, named=True)
        rows.append({
            "corpus": star(f.corpus), "cases": r["n_cases"], "published": f"{f.method}: {f.figure()} over {f.against}",
            "its conditions": f.conditions(), "source": f"{f.source} {f.url}",
            f"this run under {source}: fastest": f"{parse_method(r['fastest']).label} {fmt_x(r['fastest_speedup'])}",
            "Copy-as-Decode (deployable)": (f"{parse_method(r['best_copy']).label} {fmt_x(r['best_copy_speedup'])}"
                                            if r["best_copy"] else "-"),
            "verdict": "not comparable: another model, device and measurement"})
    return pl.DataFrame(rows)


def across_sources(frame: pl.DataFrame, pool: str = ALL_POOL, methods: tuple[str, ...] | None = None) -> pl.DataFrame:
    """One row per method, one column per kernel source: the pooled speedup over AR (`pool`)."""
    rows = frame.filter((pl.col("corpus") == POOLED) & (pl.col("pool") == pool))
    if methods is not None:
        rows = rows.filter(pl.col("method").is_in(list(methods)))
    wide = rows.pivot(on="kernel_source", index=["method", "label"], values="speedup")
    order = {m: i for i, m in enumerate(method_order(wide["method"]))}
    return wide.with_columns(order=pl.col("method").replace_strict(order)).sort("order").drop("order", "method")


def headline_cards(frame: pl.DataFrame, fast: pl.DataFrame, source: str) -> list[tuple[str, str]]:
    """The page's figures: over every corpus under `source`, Copy-as-Decode with directives decoded (what a
    deployment pays) and jump-forwarded, the fastest rival, and the ideal program as the bound."""
    pooled = frame.filter((pl.col("kernel_source") == source) & (pl.col("corpus") == POOLED) & (pl.col("pool") == ALL_POOL))
    value = {r["method"]: r["speedup"] for r in pooled.iter_rows(named=True)}
    cases = pooled["n_cases"].max() if pooled.height else 0
    best = fast.filter((pl.col("kernel_source") == source) & (pl.col("corpus") == POOLED) & (pl.col("pool") == ALL_POOL))
    cards = [(f"Copy-as-Decode line, directives decoded ({cases} cases)", fmt_x(value.get("copy-line-decoded"))),
             ("Copy-as-Decode line, forced tokens jump-forwarded", fmt_x(value.get("copy-line-jump")))]
    if best.height and best["best_rival"][0]:
        cards.append((f"best rival: {parse_method(best['best_rival'][0]).label}", fmt_x(best["best_rival_speedup"][0])))
    cards.append(("Copy-as-Decode line, directives free (upper bound)", fmt_x(value.get("copy-line-ideal"))))
    return cards


def kernels_frame(metrics_dir: Path = METRICS) -> pl.DataFrame:
    notes = facts(metrics_dir)["kernels"]
    return pl.DataFrame({"kernel source": list(notes), "how it was built": list(notes.values())})


def crossover_rows(flips: pl.DataFrame, source: str) -> pl.DataFrame:
    """The crossover table of one source, readable: per corpus or pool and rival family with a draft budget, the
    largest k Copy-as-Decode's best still beats, the smallest k that beats it, and whether unbounded drafts do."""
    if flips.is_empty():
        return pl.DataFrame()
    rows = flips.filter(pl.col("kernel_source") == source)
    k = lambda v: "-" if v is None else str(v)  # noqa: E731
    return pl.DataFrame([{
        "where": where(r["corpus"], r["pool"]), "rival": r["rival_group"], "draft budgets simulated": r["ks"],
        "Copy-as-Decode's best": f"{parse_method(r['best_copy']).label} {fmt_x(r['best_copy_speedup'])}",
        "Copy-as-Decode faster up to k": k(r["copy_wins_up_to"]), "the rival faster from k": k(r["rival_wins_from"]),
        "unbounded drafts (a bound) pass it": "-" if r["unbounded_passes"] is None else
        ("yes" if r["unbounded_passes"] else "no"),
    } for r in rows.iter_rows(named=True)])
