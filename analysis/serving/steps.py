"""The replay sample: data/serving/steps.parquet, the simulated steps `serving simulate` draws and `serving
replay` times as real batched forwards. One schema, and the one reader that checks a run folder's file before
any model is built (a run folder is data: a damaged or hand-made table is a named error)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.errors import ParamsError
from analysis.layout import REPLAY_STEPS
from analysis.pipeline.io import read_parquet

STEPS = REPLAY_STEPS
STEP_COLUMNS = {"step_id": pl.String, "method": pl.String, "concurrency": pl.Int64, "max_num_batched_tokens": pl.Int64,
                "stratum": pl.String, "batch": pl.Int64, "qs": pl.List(pl.Int64), "contexts": pl.List(pl.Int64),
                "kinds": pl.List(pl.String), "predicted_s": pl.Float64}
WRITER = "copydecode serving simulate"


def read_steps(path: Path = STEPS) -> pl.DataFrame:
    """The sampled steps, checked: the schema, unique step ids, and per step one q >= 1 and one context >= 0 for
    each of its sequences (at least one)."""
    frame = read_parquet(path, WRITER, ParamsError)
    wrong = {c: str(frame.schema.get(c)) for c, dtype in STEP_COLUMNS.items() if frame.schema.get(c) != dtype}
    if wrong:
        raise ParamsError(f"{path}: not the replay sample's schema (column: dtype found {wrong}; expected "
                          f"{ {c: str(d) for c, d in STEP_COLUMNS.items()} }); rerun `{WRITER}`"[:400])
    if frame["step_id"].null_count() or frame["step_id"].n_unique() != frame.height:
        raise ParamsError(f"{path}: step ids must be present and unique; rerun `{WRITER}`")
    bad = frame.filter(pl.col("qs").list.len().fill_null(0).eq(0) | (pl.col("qs").list.len() != pl.col("contexts").list.len())
                       | (pl.col("qs").list.min() < 1) | (pl.col("contexts").list.min() < 0))
    if bad.height:
        raise ParamsError(f"{path}: step {bad['step_id'][0]!r} needs one q >= 1 and one context >= 0 per sequence; "
                          f"rerun `{WRITER}`")
    return frame
