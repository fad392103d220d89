"""The perturbation stage's tables read back: EM pooled over the paper's three corpora and where it
crosses a target, per perturbation definition (the stage writes one table per definition). Claim 6 and
the perturbation page both read these."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.layout import TABLES
from analysis.perturb import crossing_rate, paper_pool_rows
from analysis.pooling import POOLED, framing_filter
from analysis.results.outputs import optional_table

# perturbation table per definition (the perturb stage writes one per definition)
PERTURBATION_TABLES = {"strict": "perturbation", "clip": "perturbation_clip", "one_span": "perturbation_one_span"}


def paper_pool_em(per_corpus_rows: pl.DataFrame, level: str = "line") -> pl.DataFrame:
    """EM per (kind, rate) pooled over the paper's three corpora (body framing), case-weighted, with
    the pooled no-copy share and case count (analysis.pooling.paper_pool, the one pooling rule)."""
    pooled = paper_pool_rows(per_corpus_rows.filter(framing_filter("body") & (pl.col("corpus") != POOLED)))
    return pooled.filter(pl.col("level") == level).sort("kind", "rate").select(
        "kind", "rate", "em", "no_copy", "n_cases", pl.col("corpora").cast(pl.Int64))


def definition_tables(tables: Path = TABLES) -> dict[str, pl.DataFrame]:
    """Each perturbation definition's table that the stage wrote, by definition."""
    found = {definition: optional_table(name, tables) for definition, name in PERTURBATION_TABLES.items()}
    return {definition: frame for definition, frame in found.items() if frame is not None}


def paper_pool_crossings(tables: Path, target: float) -> pl.DataFrame:
    """Per perturbation definition present and kind: where EM pooled over the paper's corpora first
    falls to `target` (linear interpolation on the rate grid, analysis.perturb.crossing_rate)."""
    out = []
    for definition, frame in definition_tables(tables).items():
        for (kind,), rows in paper_pool_em(frame).group_by("kind", maintain_order=True):
            out.append({"definition": definition, "kind": kind, "n_cases": int(rows["n_cases"].max()),
                        "crossing_rate": crossing_rate(rows["rate"].to_list(), rows["em"].to_list(), target)})
    return pl.DataFrame(out, schema={"definition": pl.String, "kind": pl.String, "n_cases": pl.Int64,
                                     "crossing_rate": pl.Float64})


def crossing_parts(crossings: pl.DataFrame) -> list[str]:
    """Per definition: the rates at which pooled EM crosses the target (or 'never')."""
    parts = []
    for (definition,), group in crossings.group_by("definition", maintain_order=True):
        rates = group["crossing_rate"].drop_nulls()
        never = group.height - rates.len()
        text = f"{definition} at rate {rates.min():.2f}-{rates.max():.2f}" if rates.len() else f"{definition} never"
        parts.append(text + (f" ({never} kinds never)" if never and rates.len() else ""))
    return parts
