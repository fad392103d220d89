"""`copydecode kernels fit`: the latency model (json), the kernel speedup table and chart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis import charts
from analysis.config import Config
from analysis.errors import ParamsError
from analysis.io import read_parquet, save_chart, write_csv, write_json, write_table
from analysis.layout import FIGURES, LATENCY_MODEL, METRICS, TABLES
from analysis.params import get, number_list
from analysis.stages.common import timed
from kernels_profile.latency import FORMULAS, fit_latency, speedup_table, summarize


@dataclass(frozen=True)
class FitSettings:
    raw: Path
    holdout_ns: tuple[int, ...]


def settings(cfg: Config) -> FitSettings:
    return FitSettings(Path(get(cfg.params, "kernels.fit.raw", str)),
                       number_list(cfg.params, "kernels.fit.holdout_ns", lo=1, integer=True, nonempty=False))

ENVIRONMENT_COLUMNS = ("device_name", "torch_version", "transformers_version", "threads", "attn_implementation",
                       "weights_note", "ar_mode")


def kernel_table(speedups: pl.DataFrame) -> pl.DataFrame:
    """The paper-style table: per N, the AR time of each baseline, T_prefill and both speedups."""
    keys = ["model", "dtype", "device", "context", "n"]
    wide = speedups.pivot(on="baseline", index=keys, values="t_ar").rename(
        lambda c: c if c in keys else f"t_ar_{c}_ms"
    )
    best = speedups.filter(pl.col("is_strongest")).select(
        keys + ["t_prefill", pl.col("baseline").alias("strongest"),
                pl.col("speedup").alias("speedup_strongest"),
                pl.col("overhead_share").alias("overhead_share_strongest")]
    )
    eager = speedups.filter(pl.col("baseline") == "eager").select(
        keys + [pl.col("speedup").alias("speedup_eager"), "speedup_q25", "speedup_q75"]
    )
    table = wide.join(best, on=keys).join(eager, on=keys, how="left")
    ms = [c for c in table.columns if c.endswith("_ms")]
    return table.with_columns(
        [(pl.col(c) * 1000) for c in ms] + [(pl.col("t_prefill") * 1000).alias("t_prefill_ms")]
    ).drop("t_prefill").sort(keys)


def speedup_range(speedups: pl.DataFrame, rows: pl.Expr) -> list[float]:
    chosen = speedups.filter(rows)["speedup"]
    return [float(chosen.min()), float(chosen.max())]


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("kernels_fit"):
        raw = read_parquet(s.raw, "copydecode kernels profile", ParamsError)
        fits = fit_latency(raw, list(s.holdout_ns))
        environment = raw.select([c for c in ENVIRONMENT_COLUMNS if c in raw.columns]).unique().to_dicts()
        write_json({"source": str(s.raw), "environment": environment, "fits": fits, "formulas": FORMULAS},
                   LATENCY_MODEL)
        write_table(summarize(raw), TABLES / "kernel_timings", digits=6)
        speedups = speedup_table(raw)
        write_table(speedups, TABLES / "kernel_speedup")
        write_table(kernel_table(speedups), TABLES / "kernel_table", digits=2)
        notes = sorted({f"{e.get('weights_note', '')}; {e.get('device_name', '')}" for e in environment})
        save_chart(charts.kernel_speedup(speedups, "; ".join(notes)), FIGURES / "kernel_speedup")
        write_csv(speedups.select("model", "dtype", "device", "context", "n", "baseline", "speedup"),
                  TABLES / "kernel_speedup_plot.csv")
    metrics = {
        "source": str(s.raw),
        "speedup_range_eager": speedup_range(speedups, pl.col("baseline") == "eager"),
        "speedup_range_strongest": speedup_range(speedups, pl.col("is_strongest")),
        "fits": {
            f"{f['model']}/{f['dtype']}/{f['device']}/{f['baseline']}": {
                "ar_r2": f["ar"]["r2"], "prefill_r2": f["prefill"]["r2"],
                "ar_holdout_max_rel_error": f["ar"]["holdout_max_rel_error"],
                "prefill_holdout_max_rel_error": f["prefill"]["holdout_max_rel_error"],
            }
            for f in fits
        },
    }
    write_json(metrics, METRICS / "kernels.json")
    return metrics
