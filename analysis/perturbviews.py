"""The perturbation report's tables: EM by rate for each perturbation definition (strict, clip,
one_span), the paper-corpora pool that claim 6 judges, and where EM crosses the paper's figure."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims import PERTURBATION_TABLES, paper_pool_crossings, paper_pool_em
from analysis.layout import TABLES
from analysis.outputs import pick, pick_view


def em_wide(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per (level, corpus, framing, kind): EM at each rate, and the no-copy and invalid shares at rate 1."""
    from analysis.pages import pivot_wide

    keys = ["level", "corpus", "framing", "kind"]
    wide = pivot_wide(rows.with_columns(rate=pl.format("EM at {}", pl.col("rate"))), index=keys, on="rate", values="em")
    at_one = rows.filter(pl.col("rate") == 1.0).select(*keys, "no_copy", pl.col("invalid").alias("invalid_at_1"))
    return wide.join(at_one, on=keys, how="left").sort("corpus", "kind")


def definition_tables(level: str, framing: str, corpus: str = "all", tables: Path = TABLES) -> dict[str, pl.DataFrame]:
    """Per perturbation definition whose table the stage wrote: its rows at `level` and `framing`."""
    out = {}
    for definition, name in PERTURBATION_TABLES.items():
        path = Path(tables) / f"{name}.csv"
        if path.is_file():
            rows = pick(pick_view(pl.read_csv(path), framing), level=level)
            out[definition] = rows if corpus == "all" else pick(rows, corpus=corpus)
    return out


def paper_pool_table(level: str = "line", tables: Path = TABLES) -> pl.DataFrame:
    """EM at rate 1 pooled over the paper's three corpora, per definition and kind (claim 6's figure)."""
    parts = []
    for definition, name in PERTURBATION_TABLES.items():
        path = Path(tables) / f"{name}.csv"
        if path.is_file():
            pooled = paper_pool_em(pl.read_csv(path), level).filter(pl.col("rate") == 1.0)
            parts.append(pooled.select(pl.lit(definition).alias("definition"), "kind", "n_cases", "em", "no_copy"))
    return pl.concat(parts) if parts else pl.DataFrame()


def crossings_table(target: float, tables: Path = TABLES) -> pl.DataFrame:
    """Where pooled EM first falls to `target`, per definition and kind: over the paper's three corpora
    (claim 6) beside the stage's own pool of every corpus (perturbation_crossing.csv)."""
    ours = paper_pool_crossings(tables, target).rename({"crossing_rate": "crossing, paper's corpora"})
    path = Path(tables) / "perturbation_crossing.csv"
    if not path.is_file():
        return ours
    stage = (pl.read_csv(path).filter((pl.col("level") == "line") & (pl.col("framing") == "body"))
             .select("definition", "kind", pl.col("crossing_rate").alias("crossing, every corpus")))
    return ours.join(stage, on=["definition", "kind"], how="left")
