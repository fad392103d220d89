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


BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2}


def _median(values: list[float]) -> float | None:
    import statistics

    return float(statistics.median(values)) if values else None


def roofline_metrics(sidecar: dict | None, speedups: pl.DataFrame) -> dict | str:
    """This machine's roofline (median over the recorded sessions) and the copy-speedup ceiling it
    implies for the profiled dtype (kernels_profile.machine.copy_speedup_ceiling), beside the ratio
    measured at the largest N. "not recorded" when no session measured a roofline."""
    from kernels_profile.machine import copy_speedup_ceiling

    roofs = [r["roofline"] for r in (sidecar or {}).get("runs", []) if isinstance(r.get("roofline"), dict)]
    if not roofs:
        return "not recorded"
    stream = _median([r["stream_gbps"] for r in roofs])
    gflops = {"float32": _median([r["matmul_f32_gflops"] for r in roofs]),
              "bfloat16": _median([r["matmul_bf16_gflops"] for r in roofs])}
    dtype = min(speedups["dtype"].to_list())  # one dtype per profile; the first by name if several
    if dtype not in BYTES_PER_PARAM:
        raise ParamsError(f"kernels fit: no bytes-per-parameter for dtype {dtype!r}; known: {sorted(BYTES_PER_PARAM)}")
    compute = gflops["float32" if dtype == "float32" else "bfloat16"]
    n_max = int(speedups["n"].max())
    measured = speedups.filter(pl.col("is_strongest") & (pl.col("n") == n_max) & (pl.col("dtype") == dtype))["speedup"]
    return {
        "stream_gbps": stream, "matmul_gflops_float32": gflops["float32"], "matmul_gflops_bfloat16": gflops["bfloat16"],
        "dtype": dtype, "bytes_per_param": BYTES_PER_PARAM[dtype], "ridge_flops_per_byte": compute / stream,
        "n_max": n_max, "ceiling": copy_speedup_ceiling(n_max, stream, compute, BYTES_PER_PARAM[dtype]),
        "measured_at_n_max": float(measured.max()) if measured.len() else None, "runs": len(roofs),
    }


def environment_metrics(sidecar: dict | None) -> dict | str:
    """What a reader needs to judge the timings: machine, threads, load, reference drift, other
    processes' CPU use and the contention verdict, the NOISY mark and its reasons. A sidecar from
    before contention was measured gives None for those (and says so in contention_unmeasured)."""
    if not sidecar:
        return "not recorded"
    runs = [r for r in sidecar.get("runs", []) if "drift" in r]
    machine = sidecar.get("machine") or {}
    unmeasured = sorted({(r.get("contention") or {}).get("unmeasured") or "not recorded" for r in runs
                         if not (r.get("contention") or {}).get("measured")})
    return {
        "noisy": sidecar.get("noisy"), "noisy_drift": sidecar.get("noisy_drift"),
        "noisy_reasons": sidecar.get("noisy_reasons", []), "contended": sidecar.get("contended"),
        "contention_slack": sidecar.get("contention_slack"), "other_busy_cores": sidecar.get("other_busy_cores"),
        "contention_rule": next((r["contention"]["rule"] for r in runs if (r.get("contention") or {}).get("measured")), None),
        "contention_unmeasured": "; ".join(unmeasured) or None,
        "threads": sidecar.get("threads"),
        "noisy_pairs": len(sidecar.get("noisy_pairs") or []), "pairs": sidecar.get("pairs"),
        "max_pair_drift": sidecar.get("max_pair_drift"), "median_pair_drift": sidecar.get("median_pair_drift"),
        "load1": sidecar.get("load1"),
        "reference_start_s": runs[0]["drift"]["reference_start_s"] if runs else None,
        "reference_end_s": runs[-1]["drift"]["reference_end_s"] if runs else None,
        "machine": {k: machine.get(k) for k in ("cpu_model", "cpu_flags", "logical_cores", "usable_cores", "torch_threads")},
    }


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
        "run_environment": environment_metrics(sidecar),
        "roofline": roofline_metrics(sidecar, speedups),
    }
    write_json(metrics, METRICS / "kernels.json")
    return metrics
