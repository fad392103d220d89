"""The bounds stage's tables read back: the line-level ideal rows of one kernel source, per corpus and
pooled, over both pools (the paper's three corpora: `pool` == paper; every corpus: `pool` == all), and
the coverage figure that caps a bound. Claims 3 and 4, the headline and the bounds page read these."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.latency.names import PAPER_SOURCE
from analysis.layout import TABLES
from analysis.pooling import ALL_POOL, PAPER_POOL, PER_CORPUS, POOLED, POOLINGS, framing_filter
from analysis.results.numbers import fmt_ci, fmt_int, fmt_x
from analysis.results.outputs import optional_table, table


def line_ideal(bounds: pl.DataFrame, kernel_source: str, baseline: str | None = None,
               variant: str = "ideal", level: str = "line") -> pl.DataFrame:
    """Rows of one kernel source (and baseline) at `level` and `variant`, body framing."""
    rows = bounds.filter((pl.col("level") == level) & (pl.col("variant") == variant) & framing_filter("body")
                         & (pl.col("kernel_source") == kernel_source))
    return rows if baseline is None else rows.filter(pl.col("baseline") == baseline)


def per_corpus(rows: pl.DataFrame) -> dict[str, dict]:
    return {r["corpus"]: r for r in rows.filter(pl.col("pooling") == PER_CORPUS).iter_rows(named=True)}


def _pool_is(rows: pl.DataFrame, pool: str) -> pl.Expr:
    if "pool" not in rows.columns:  # a table without the column pools every corpus
        return pl.lit(pool == ALL_POOL)
    return pl.col("pool") == pool if pool == PAPER_POOL else pl.col("pool").is_null() | (pl.col("pool") == pool)


def pooled_rows(rows: pl.DataFrame) -> dict[str, dict]:
    """Pooled rows over every corpus of the run, by pooling rule."""
    pooled = rows.filter((pl.col("corpus") == POOLED) & _pool_is(rows, ALL_POOL))
    return {r["pooling"]: r for r in pooled.iter_rows(named=True)}


def paper_pool_rows(tables: Path, kernel_source: str, baseline: str | None = None,
                    bounds: pl.DataFrame | None = None) -> dict[str, dict]:
    """Pooled line/ideal/body rows over the paper's three corpora, by pooling rule: the bounds table's
    `pool` == paper rows when it has them, else bounds_paper_pool.csv; empty when neither holds any (a
    run of the paper's corpora alone, whose pool of every corpus is the paper's)."""
    if bounds is not None:
        rows = line_ideal(bounds, kernel_source, baseline).filter((pl.col("corpus") == POOLED)
                                                                  & _pool_is(bounds, PAPER_POOL))
        if rows.height:
            return {r["pooling"]: r for r in rows.iter_rows(named=True)}
    frame = optional_table("bounds_paper_pool", tables)
    if frame is None or frame.is_empty():
        return {}
    return {r["pooling"]: r for r in line_ideal(frame, kernel_source, baseline).iter_rows(named=True)}


def other_kernel_sources(bounds: pl.DataFrame) -> list[tuple[str, str]]:
    """(kernel_source, baseline) of every kernel other than the paper's, in table order."""
    pairs = bounds.filter(pl.col("kernel_source") != PAPER_SOURCE).select("kernel_source", "baseline").unique(
        maintain_order=True)
    return [tuple(p) for p in pairs.iter_rows()]


def source_label(source: str, baseline: str, rows: pl.DataFrame) -> str:
    """`fit (eager AR, qwen2.5-0.5b float32 cpu)` or a frozen source's own name."""
    setup = ""
    if rows.height and {"model", "dtype", "device"} <= set(rows.columns):
        r = rows.row(0, named=True)
        setup = f", {r['model']} {r['dtype']} {r['device']}"
    return f"{source} ({baseline} AR{setup})"


def generated_share(tables: Path, corpus: str, level: str = "line") -> float | None:
    """Share of a corpus's gold tokens that no copy produces (1 - coverage), body framing or its own."""
    cov = table("coverage", tables).filter(framing_filter("body") & (pl.col("corpus") != POOLED)
                                           & (pl.col("level") == level) & (pl.col("corpus") == corpus))
    return None if cov.height == 0 else 1.0 - float(cov["coverage"][0])


def bound_text(row: dict) -> str:
    return f"{fmt_x(row['bound'])} {fmt_ci(row['ci_low'], row['ci_high'])}"


def pooled_text(pooled: dict[str, dict]) -> str:
    """'19.0x (ratio of sums) / 23.1x (mean of corpora)'."""
    return " / ".join(f"{fmt_x(pooled[p]['bound'])} ({p.replace('_', ' ')})" for p in POOLINGS if p in pooled)


def cases_text(pooled: dict[str, dict]) -> str:
    """' (482 cases)': the case count(s) of pooled rows, or ''."""
    counts = sorted({int(r["n_cases"]) for r in pooled.values()})
    return f" ({', '.join(fmt_int(n) for n in counts)} cases)" if counts else ""
