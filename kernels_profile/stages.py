"""The kernel stages of `dvc repro`: `copydecode kernels profile` and `copydecode kernels fit`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import ParamsError
from analysis.io import save_chart, write_json, write_parquet, write_table
from analysis.params import get
from analysis.results import LATENCY_MODEL
from analysis.stages import FIGURES, METRICS, TABLES
from kernels_profile.latency import fit_latency, speedup_table, summarize
from kernels_profile.profiler import ProfileSpec, profile

RAW = Path("data/kernels/raw.parquet")
CHECKPOINTS = Path("data/kernels/checkpoints")
SPEC_FIELDS = set(ProfileSpec.__dataclass_fields__)


def profile_spec(params: dict[str, Any], preset: str | None) -> tuple[ProfileSpec, Path]:
    settings = dict(get(params, "kernels.profile", dict))
    out = RAW
    if preset is not None:
        presets = get(params, "kernels.presets", dict)
        if preset not in presets:
            raise ParamsError(f"unknown preset {preset!r}; known: {', '.join(presets)}")
        settings.update(presets[preset])
        out = Path(settings.pop("out", f"data/kernels/{preset}.parquet"))
    unknown = set(settings) - SPEC_FIELDS
    if unknown:
        raise ParamsError(f"kernels.profile: unknown settings {sorted(unknown)}; known: {sorted(SPEC_FIELDS)}")
    for name in ("models", "contexts", "ns", "baselines"):
        if name in settings:
            settings[name] = tuple(settings[name])
    return ProfileSpec(**settings).validate(), out


def run_profile(params: dict[str, Any], args) -> dict[str, Any]:
    spec, out = profile_spec(params, getattr(args, "preset", None))
    if getattr(args, "out", None):
        out = Path(args.out)
    started = time.perf_counter()
    raw = profile(spec, CHECKPOINTS)
    write_parquet(raw, out)
    return {"rows": raw.height, "out": str(out), "seconds": round(time.perf_counter() - started, 1),
            "spec": spec.__dict__}


# ---------------------------------------------------------------- fit and report

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


def speedup_chart(speedups: pl.DataFrame, note: str):
    import altair as alt

    data = speedups.select("model", "dtype", "device", "context", "n", "baseline", "speedup", "speedup_q25", "speedup_q75")
    ns = sorted(set(data["n"].to_list()))
    ideal = pl.DataFrame({"n": ns, "speedup": [float(n) for n in ns], "baseline": ["ideal (speedup = N)"] * len(ns)})
    base = alt.Chart(data.to_pandas())
    x = alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="N (tokens copied)")
    y = alt.Y("speedup:Q", scale=alt.Scale(type="log"), title="T_ar(N) / T_prefill(N)")
    lines = base.mark_line(point=True).encode(x=x, y=y, color=alt.Color("baseline:N", title="AR baseline"),
                                              strokeDash=alt.StrokeDash("context:N", title="context c"))
    bands = base.mark_errorbar().encode(x=x, y=alt.Y("speedup_q25:Q", title=""), y2="speedup_q75:Q",
                                        color="baseline:N")
    ideal_line = alt.Chart(ideal.to_pandas()).mark_line(strokeDash=[4, 4], color="gray").encode(x=x, y=y)
    title = f"Copy by one prefill vs N decode steps ({note})"
    return (ideal_line + bands + lines).properties(width=460, height=300, title=title)


def run_fit(params: dict[str, Any], args) -> dict[str, Any]:
    raw_path = Path(get(params, "kernels.fit.raw", str))
    if not raw_path.is_file():
        raise ParamsError(f"kernels.fit.raw: {raw_path} not found; run `copydecode kernels profile` first")
    raw = pl.read_parquet(raw_path)
    holdout = [int(n) for n in get(params, "kernels.fit.holdout_ns", list)]
    fits = fit_latency(raw, holdout)
    env_cols = [c for c in ("device_name", "torch_version", "transformers_version", "threads",
                            "attn_implementation", "weights_note", "ar_mode") if c in raw.columns]
    environment = raw.select(env_cols).unique().to_dicts()
    write_json({"source": str(raw_path), "environment": environment, "fits": fits,
                "formulas": {
                    "t_ar": "a*N + b*(N*c + N*(N-1)/2)",
                    "t_prefill": "p0 + p1*N + p2*N*c + p3*N^2",
                    "t_step": "a + b*c"}}, LATENCY_MODEL)
    write_table(summarize(raw), TABLES / "kernel_timings", digits=6)
    speedups = speedup_table(raw)
    write_table(speedups, TABLES / "kernel_speedup")
    write_table(kernel_table(speedups), TABLES / "kernel_table", digits=2)
    notes = sorted({f"{e.get('weights_note', '')}; {e.get('device_name', '')}" for e in environment})
    save_chart(speedup_chart(speedups, "; ".join(notes)), FIGURES / "kernel_speedup")
    plot = speedups.select("model", "dtype", "device", "context", "n", "baseline", "speedup")
    plot.write_csv(TABLES / "kernel_speedup_plot.csv")
    metrics = {
        "source": str(raw_path),
        "speedup_range_eager": [float(speedups.filter(pl.col("baseline") == "eager")["speedup"].min()),
                                float(speedups.filter(pl.col("baseline") == "eager")["speedup"].max())],
        "speedup_range_strongest": [float(speedups.filter(pl.col("is_strongest"))["speedup"].min()),
                                    float(speedups.filter(pl.col("is_strongest"))["speedup"].max())],
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
