"""The perturbation report's tables: EM by rate for each perturbation definition (strict, clip,
one_span), the paper-corpora pool that claim 6 judges, and where EM crosses the paper's figure."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.errors import ParamsError

from analysis.layout import TABLES
from analysis.perturb import paper_pool_rows
from analysis.pooling import ALL_POOL, PAPER_POOL, POOL_LABELS, POOLED, POOLS
from analysis.results.numbers import fmt_int, fmt_pct
from analysis.results.outputs import optional_table, pick, pick_view
from analysis.results.perturbation import PERTURBATION_TABLES, paper_pool_crossings, paper_pool_em
from analysis.present.pages import pivot_wide


def pooled_em(rows: pl.DataFrame, pool: str = PAPER_POOL) -> pl.DataFrame:
    """The pooled rows of a perturbation table slice (one level and framing view): over the paper's three
    corpora (482 cases; the default, the pool set beside the paper's 15.48%) or over every corpus of the
    run, with a `pool` label naming it and its case count."""
    if pool not in POOLS:
        raise ParamsError(f"unknown perturbation pool {pool!r}; known: {', '.join(POOLS)}")
    pooled = paper_pool_rows(rows) if pool == PAPER_POOL else rows.filter(pl.col("corpus") == POOLED)
    return pooled.with_columns(pool=pl.col("n_cases").map_elements(lambda n: pool_label(pool, n), return_dtype=pl.String))


def lead_figures(rows: pl.DataFrame, pool: str = PAPER_POOL, rate: float = 1.0) -> list[tuple[str, str]]:
    """The perturbation page's lead tiles: EM at `rate` per kind (at most four) and the no-copy share, over
    `pool` (the paper's corpora unless another pool is asked for, and then labelled); the corpus rows
    themselves when the slice holds no pooled corpus (one corpus picked)."""
    at_rate = rows.filter(pl.col("rate") == rate)
    pooled = pooled_em(at_rate, pool)
    if pooled.height == 0:
        return ([(f"EM at rate {rate:g}, {r['corpus']}, {r['kind']}", fmt_pct(r["em"], 2))
                 for r in at_rate.sort("kind").iter_rows(named=True)][:4]
                + ([("programs with no copy span", fmt_pct(at_rate["no_copy"][0], 2))] if at_rate.height else []))
    label = pooled["pool"][0]
    by_value: dict[str, list[str]] = {}
    for r in pooled.sort("kind").iter_rows(named=True):  # kinds with the same EM share one tile
        by_value.setdefault(fmt_pct(r["em"], 2), []).append(r["kind"])
    tiles = [(f"EM at rate {rate:g}, {'every kind' if len(kinds) > 1 and len(by_value) == 1 else ', '.join(kinds)}, "
              f"{label}", value) for value, kinds in by_value.items()][:4]
    no_copy = fmt_pct(pooled["no_copy"][0], 2)
    same = len(by_value) == 1 and no_copy in by_value
    return tiles + [(f"programs with no copy span{' (the only ones left exact)' if same else ''}, {label}", no_copy)]


def pool_label(pool: str, n_cases: int) -> str:
    """The one name of a pooled row on every table and tile of the page: which corpora, how many cases."""
    return f"pooled over {POOL_LABELS[pool]} ({fmt_int(n_cases)} cases)"


def named_pools(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with the stage's `pooled` rows (every corpus) named by their pool and the pool over the paper's
    three corpora added beside them, named too: two numbers never share the bare label `pooled`. A slice
    without pooled rows (one corpus picked) is returned as it is."""
    every = rows.filter(pl.col("corpus") == POOLED)
    if not every.height:
        return rows
    paper = paper_pool_rows(rows.filter(pl.col("corpus") != POOLED))
    parts = [rows.filter(pl.col("corpus") != POOLED)]
    for pool, frame in ((PAPER_POOL, paper), (ALL_POOL, every)):
        if frame.height:
            named = frame.with_columns(corpus=pl.col("n_cases").map_elements(lambda n, p=pool: pool_label(p, n),
                                                                             return_dtype=pl.String))
            parts.append(named.select([c for c in parts[0].columns if c in named.columns]))
    return pl.concat(parts, how="diagonal_relaxed")


def em_wide(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per (level, corpus, framing, kind): EM at each rate, and the no-copy and invalid shares at rate 1;
    each pooled row names its pool and case count."""
    rows = named_pools(rows)
    keys = ["level", "corpus", "framing", "kind"]
    wide = pivot_wide(rows.with_columns(rate=pl.format("EM at {}", pl.col("rate"))), index=keys, on="rate", values="em")
    at_one = rows.filter(pl.col("rate") == 1.0).select(*keys, "no_copy", pl.col("invalid").alias("invalid_at_1"))
    return wide.join(at_one, on=keys, how="left").sort("corpus", "kind")


def definition_tables(level: str, framing: str, corpus: str = "all", tables: Path = TABLES) -> dict[str, pl.DataFrame]:
    """Per perturbation definition whose table the stage wrote: its rows at `level` and `framing`."""
    out = {}
    for definition, name in PERTURBATION_TABLES.items():
        frame = optional_table(name, tables)
        if frame is not None:
            rows = pick(pick_view(frame, framing), level=level)
            out[definition] = rows if corpus == "all" else pick(rows, corpus=corpus)
    return out


def paper_pool_table(level: str = "line", tables: Path = TABLES) -> pl.DataFrame:
    """EM at rate 1 pooled over the paper's three corpora, per definition and kind (claim 6's figure)."""
    parts = []
    for definition, name in PERTURBATION_TABLES.items():
        frame = optional_table(name, tables)
        if frame is not None:
            pooled = paper_pool_em(frame, level).filter(pl.col("rate") == 1.0)
            parts.append(pooled.select(pl.lit(definition).alias("definition"), "kind", "n_cases", "em", "no_copy"))
    return pl.concat(parts) if parts else pl.DataFrame()


def crossings_table(target: float, tables: Path = TABLES) -> pl.DataFrame:
    """Where pooled EM first falls to `target`, per definition and kind: over the paper's three corpora
    (claim 6) beside the stage's own pool of every corpus (perturbation_crossing.csv)."""
    ours = paper_pool_crossings(tables, target).rename({"crossing_rate": "crossing, paper's corpora",
                                                         "n_cases": "cases, paper's corpora"})
    stage = optional_table("perturbation_crossing", tables)
    if stage is None:
        return ours
    stage = stage.filter((pl.col("level") == "line") & (pl.col("framing") == "body"))
    if "pool" in stage.columns:  # the stage writes both pools; the paper's is computed above
        stage = stage.filter(pl.col("pool") == ALL_POOL)
    counts = [pl.col("n_cases").alias("cases, every corpus")] if "n_cases" in stage.columns else []
    stage = stage.select("definition", "kind", *counts, pl.col("crossing_rate").alias("crossing, every corpus"))
    return ours.join(stage, on=["definition", "kind"], how="left")
