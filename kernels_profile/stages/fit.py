"""`copydecode kernels fit`: the latency model (json), the kernel speedup table and chart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis import charts
from analysis.config import Config
from analysis.errors import ParamsError
from analysis.io import read_parquet, save_chart, write_csv, write_json, write_table
from analysis.latency import (
    FORMS,
    FitOptions,
    fit_latency,
    holdout_table,
    speedup_table,
    summarize,
    to_document,
)
from analysis.layout import FIGURES, LATENCY_MODEL, METRICS, TABLES
from analysis.params import choice, choices, get, number_list
from analysis.stages.common import timed


@dataclass(frozen=True)
class FitSettings:
    raw: Path
    holdout_ns: tuple[int, ...]
    forms: tuple[str, ...]
    one_context: str


def settings(cfg: Config) -> FitSettings:
    p = cfg.params
    return FitSettings(Path(get(p, "kernels.fit.raw", str)),
                       number_list(p, "kernels.fit.holdout_ns", lo=1, integer=True, nonempty=False),
                       choices(p, "kernels.fit.forms", FORMS), choice(p, "kernels.fit.one_context", ("drop", "keep")))

ENVIRONMENT_COLUMNS = ("device_name", "cpu_flags", "torch_version", "transformers_version", "threads",
                       "attn_implementation", "weights_note", "ar_mode")


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


def read_sidecar(raw_path) -> dict | None:
    from kernels_profile.profiler import read_environment

    return read_environment(raw_path)


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("kernels_fit"):
        raw = read_parquet(s.raw, "copydecode kernels profile", ParamsError)
        models = [m for form in s.forms for m in fit_latency(raw, FitOptions(form, s.holdout_ns, s.one_context))]
        environment = raw.select([c for c in ENVIRONMENT_COLUMNS if c in raw.columns]).unique().to_dicts()
        sidecar = read_sidecar(s.raw)
        document = to_document(models, str(s.raw), environment)
        document["run_environment"] = sidecar  # None: not recorded (a raw file from before sidecars)
        write_json(document, LATENCY_MODEL)
        summary = summarize(raw)
        holdout = holdout_table(summary, s.holdout_ns, s.forms, s.one_context)
        write_table(summary, TABLES / "kernel_timings", digits=6)
        write_table(holdout, TABLES / "latency_holdout", digits=4)
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
        "holdout_max_rel_error": {f"{r['model']}/{r['baseline']}/{r['form']}/{r['curve']}": r["holdout_max_rel_error"]
                                  for r in holdout.iter_rows(named=True)} if holdout.height else {},
        "run_environment": {k: (sidecar or {}).get(k) for k in ("noisy", "noisy_pairs", "max_pair_drift", "machine")}
        if sidecar else "not recorded",
    }
    write_json(metrics, METRICS / "kernels.json")
    return metrics
