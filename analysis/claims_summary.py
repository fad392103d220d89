"""reports/metrics/headline.json: the claim verdict counts and about ten flat figures taken from the other stages' outputs and
the claims table, so that `dvc metrics show` prints them as one short row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from analysis.claims import (
    DIFFERS,
    NOT_AT_SCALE,
    NOT_RUN,
    REPRODUCED,
    STALE,
    UNDERDETERMINED,
    claims,
    line_ideal,
    pooled_rows,
)
from analysis.errors import ParamsError
from analysis.kernel_names import FIT_SOURCE, PAPER_SOURCE
from analysis.layout import METRICS, POOLED, RATIO_OF_SUMS, TABLES
from analysis.outputs import bounds_frame, metrics, table


def _round(value: Any, digits: int = 4) -> Any:
    return round(float(value), digits) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def headline(tables: Path = TABLES, metrics_dir: Path = METRICS) -> dict:
    """reports/metrics/headline.json: about ten flat figures, so that `dvc metrics show` prints them as
    one short table row; each is taken from another stage's output, and a figure whose output is
    absent is left out. Pools are body framing, line level, ideal variant, ratio of sums."""
    items = claims(tables, metrics_dir)
    out: dict[str, Any] = {"reproduced": sum(c.verdict == REPRODUCED for c in items),
                           "differ": sum(c.verdict == DIFFERS for c in items),
                           "underdetermined": sum(c.verdict == UNDERDETERMINED for c in items),
                           "not_reproduced_at_scale": sum(c.verdict == NOT_AT_SCALE for c in items),
                           "stale": sum(c.verdict == STALE for c in items),
                           "not_run": sum(c.verdict == NOT_RUN for c in items)}
    try:
        kern = metrics("kernels", metrics_dir)
        env = kern.get("run_environment")
        out["kernel_max"] = _round(kern["speedup_range_strongest"][1], 2)
        out["noisy"] = env.get("noisy") if isinstance(env, dict) else "not recorded"
    except ParamsError:
        pass
    try:
        cov = table("coverage", tables).filter((pl.col("corpus") == POOLED) & (pl.col("framing") == "body")
                                               & (pl.col("level") == "line"))
        if cov.height:
            out["cov_line_pooled"] = _round(cov["coverage"][0])
    except ParamsError:
        pass
    try:
        b = bounds_frame(tables)
        for source, key, baseline in ((PAPER_SOURCE, "bound_paper_pooled", None), (FIT_SOURCE, "bound_fit_pooled", "eager")):
            pooled = pooled_rows(line_ideal(b, source, baseline))
            if RATIO_OF_SUMS in pooled:
                out[key] = _round(pooled[RATIO_OF_SUMS]["bound"], 2)
    except ParamsError:
        pass
    try:
        out["roundtrip_failed"] = metrics("roundtrip", metrics_dir)["failed"]
    except ParamsError:
        pass
    return out

