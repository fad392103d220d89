"""Per-case distributions (the distributions report): how the bound, the coverage and the measured e2e
speedup spread over a corpus's cases, not only their pooled value. "How many edits get more than 5x?"

Every figure is per case: the bound of a case is its own regen / program time (line or token level, ideal
or with directive tokens decoded) under one kernel source, its coverage its copied / gold tokens, both
from the bounds stage's case costs (analysis.results.percase: this run's data/, else the committed copy);
the e2e speedup of a case is its AR seconds over the method's seconds (reports/tables/e2e_cases.csv,
medians over repeats). A pooled figure elsewhere is a ratio of sums, which weights long cases more; the
share of cases above a threshold counts each case once.
"""

from __future__ import annotations

import polars as pl

from analysis.errors import ParamsError
from analysis.pooling import framing_filter
from analysis.rivals.families.ar import AR
from analysis.rivals.methods import canonical

ALL_CASES = "all corpora (each case once)"  # the pooled row: every case of every corpus, counted once
THRESHOLDS = (2.0, 5.0, 10.0)  # "share of cases whose speedup exceeds x" columns
QUANTILES = (0.1, 0.5, 0.9)
VARIANTS = {"ideal": "program_ideal", "directives decoded": "program_overhead"}


def case_bounds(costs: pl.DataFrame, kernel_source: str, framing: str, level: str) -> pl.DataFrame:
    """One row per (case, variant) of `kernel_source` at `framing` (plus the single-framing corpora) and
    `level`: corpus, case_id, coverage and the case's bound."""
    sources = sorted(costs["kernel_source"].unique().to_list())
    if kernel_source not in sources:
        raise ParamsError(f"unknown kernel source {kernel_source!r}; this run's case costs hold {', '.join(sources)}")
    part = costs.filter((pl.col("kernel_source") == kernel_source) & (pl.col("level") == level)
                        & framing_filter(framing))
    if part.height == 0:
        raise ParamsError(f"no {level}-level case costs at framing {framing!r} for {kernel_source!r}")
    if part["baseline"].n_unique() > 1:  # a source with several AR loops: its first, named in the title
        part = part.filter(pl.col("baseline") == sorted(part["baseline"].unique().to_list())[0])
    return pl.concat([part.select("corpus", "case_id", variant=pl.lit(name),
                                  coverage=pl.col("copied_tokens") / pl.col("gold_tokens"),
                                  bound=pl.col("regen") / pl.col(column))
                      for name, column in VARIANTS.items()])


def survival(frame: pl.DataFrame, value: str, by: list[str]) -> pl.DataFrame:
    """`frame`'s rows with `share`: within each `by` group, the share of rows whose `value` is at least this
    row's (1 for the smallest, 1/n for the largest); sorted by group and value. Nulls are left out."""
    ranked = frame.filter(pl.col(value).is_not_null() & pl.col(value).is_finite()).sort([*by, value])
    return ranked.with_columns(
        share=(pl.len().over(by) - pl.int_range(pl.len()).over(by)) / pl.len().over(by))


def spread_table(frame: pl.DataFrame, value: str, by: list[str], thresholds=THRESHOLDS,
                 pooled: bool = True) -> pl.DataFrame:
    """Per group: cases, the 10th / 50th / 90th percentile of `value` and the share of cases above each
    threshold; with `pooled`, a row over every corpus of a group (each case counted once)."""
    def summary(rows: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
        aggs = [pl.len().alias("cases")]
        aggs += [pl.col(value).quantile(q, "linear").alias(f"p{int(q * 100)}") for q in QUANTILES]
        aggs += [(pl.col(value) > t).mean().alias(f"share > {t:g}x") for t in thresholds]
        return rows.group_by(keys).agg(aggs) if keys else rows.select(aggs)

    clean = frame.filter(pl.col(value).is_not_null() & pl.col(value).is_finite())
    out = summary(clean, by).sort(by)
    if pooled and "corpus" in by and clean["corpus"].n_unique() > 1:
        rest = [b for b in by if b != "corpus"]
        pool = summary(clean, rest).with_columns(corpus=pl.lit(ALL_CASES)).select(out.columns)
        out = pl.concat([out, pool.sort(rest) if rest else pool])
    return out


def e2e_case_speedups(cases: pl.DataFrame) -> pl.DataFrame:
    """reports/tables/e2e_cases.csv -> one row per (model, corpus, case, method) other than AR, its speedup."""
    needed = {"model", "corpus", "case_id", "method", "speedup"}
    if not needed <= set(cases.columns):
        raise ParamsError(f"e2e_cases.csv lacks column(s) {sorted(needed - set(cases.columns))}; rerun `copydecode e2e`")
    return canonical(cases).filter(pl.col("method") != AR).select("model", "corpus", "case_id", "method", "speedup")


def headline_share(bounds: pl.DataFrame, threshold: float = 5.0, variant: str = "directives decoded") -> tuple[int, int]:
    """(cases whose bound exceeds `threshold`, cases) over every corpus, for one variant."""
    part = bounds.filter(pl.col("variant") == variant)
    return int((part["bound"] > threshold).sum()), part.height
