"""Kernel timing tables: summaries, paired speedups and per-step AR segments of raw profiler timings.

The profiler (kernels_profile.measure.profiler) writes one row per timing (model, weights, dtype, device,
method ar|prefill, baseline, [pair_baseline], context c, N, repeat, seconds). Here, pure and torch-free:

* `summarize`: median, quartiles and IQR over repeats per grid point (what the latency fit reads);
* `speedup_table`: Speedup(N, c) = T_ar / T_prefill per repeat (repeat r of the AR loop over repeat r
  of the prefill paired with it), its median and IQR over repeats, and which AR baseline is strongest;
* `ar_step_segments` / `ar_step_shifts`: milliseconds per decode step between consecutive profiled N
  of each AR run, and whether a run slowed part-way;
* `kernel_table` (the paper-style table of a speedup table) and `source_metrics` (per kernel source, what it
  measured and its ratio at the ends of the paper's N range), the `kernels fit` stage's outputs.
"""

from __future__ import annotations

import polars as pl

from analysis.latency.model import GROUP
from analysis.stats import quartiles

def summarize(raw: pl.DataFrame) -> pl.DataFrame:
    """Median, quartiles and IQR over repeats for every (model, ..., method, baseline, c, N) and, in
    paired raw files, the AR loop a prefill grid was paired with (`pair_baseline`)."""
    keys = GROUP + ["method", "baseline"] + (["pair_baseline"] if "pair_baseline" in raw.columns else []) + ["context", "n"]
    return (
        raw.group_by(keys)
        .agg(
            *quartiles("seconds", "median", "q25", "q75"),
            repeats=pl.len(),
        )
        .with_columns(iqr=pl.col("q75") - pl.col("q25"))
        .sort(keys)
    )


def paired_kernel_ratios(raw: pl.DataFrame) -> pl.DataFrame:
    """One row per AR timing and prefill kind, with the prefill timing of its own pair: t_ar,
    t_prefill, ratio, and `prefill` (the prefill kind: the prefill rows' `baseline`).

    Raw files from before pairs (no pair_baseline column) had one prefill grid per repeat shared by
    every baseline; they pair on the repeat alone, as before."""
    keys = ["model", "weights", "dtype", "device", "context", "n"]
    ar = raw.filter(pl.col("method") == "ar").select(keys + ["baseline", "repeat", pl.col("seconds").alias("t_ar")])
    prefill = raw.filter(pl.col("method") == "prefill")
    if "pair_baseline" in raw.columns:
        prefill = prefill.select(keys + [pl.col("pair_baseline").alias("baseline"), pl.col("baseline").alias("prefill"),
                                         "repeat", pl.col("seconds").alias("t_prefill")])
        on, validate = keys + ["baseline", "repeat"], "1:m"
    else:
        prefill = prefill.select(keys + [pl.col("baseline").alias("prefill"), "repeat", pl.col("seconds").alias("t_prefill")])
        on, validate = keys + ["repeat"], "m:m"
    return ar.join(prefill, on=on, how="inner", validate=validate).with_columns(
        ratio=pl.col("t_ar") / pl.col("t_prefill")).sort(keys + ["baseline", "prefill", "repeat"])


def speedup_table(raw: pl.DataFrame) -> pl.DataFrame:
    """One row per (model, dtype, device, c, N, AR baseline, prefill kind), plus which AR baseline is
    strongest (fastest T_ar) and whether the row pairs it with the fastest prefill kind."""
    keys = GROUP + ["context", "n"]
    paired = paired_kernel_ratios(raw)
    table = (
        paired.group_by(keys + ["baseline", "prefill"])
        .agg(
            pl.col("t_ar").median(), pl.col("t_prefill").median(),
            *quartiles("ratio", "speedup", "speedup_q25", "speedup_q75"),
            pl.len().alias("repeats"),
        )
        .sort(keys + ["baseline", "prefill"])
    )
    eager = (table.filter(pl.col("baseline") == "eager").group_by(keys).agg(pl.col("t_ar").first().alias("t_ar_eager")))
    best = table.sort("t_ar").group_by(keys, maintain_order=True).first().select(keys + [pl.col("baseline").alias("strongest")])
    fastest = (table.sort("t_prefill").group_by(keys + ["baseline"], maintain_order=True).first()
               .select(keys + ["baseline", pl.col("prefill").alias("fastest_prefill")]))
    return (
        table.join(best, on=keys, how="left")
        .join(eager, on=keys, how="left")
        .join(fastest, on=keys + ["baseline"], how="left")
        .with_columns(
            is_strongest=(pl.col("baseline") == pl.col("strongest")) & (pl.col("prefill") == pl.col("fastest_prefill")),
            overhead_share=1 - pl.col("t_ar") / pl.col("t_ar_eager"),
        )
        .drop("t_ar_eager", "fastest_prefill")
        .sort(keys + ["baseline", "prefill"])
    )


def ar_step_segments(raw: pl.DataFrame) -> pl.DataFrame:
    """Mean milliseconds per decode step between consecutive profiled N of each AR run (ar_mode
    prefix: T_ar(N) is the cumulative time of one run), so a run that slows part-way shows where."""
    keys = [c for c in ("source", "model", "dtype", "device", "baseline", "context", "repeat") if c in raw.columns]
    ar = raw.filter(pl.col("method") == "ar").sort(keys + ["n"])
    prev_n = pl.col("n").shift(1, fill_value=0).over(keys)
    prev_s = pl.col("seconds").shift(1, fill_value=0.0).over(keys)
    return ar.select(keys + [prev_n.alias("from_step"), pl.col("n").alias("to_step"),
                             ((pl.col("seconds") - prev_s) / (pl.col("n") - prev_n) * 1000).alias("ms_per_step")])


def ar_step_shifts(segments: pl.DataFrame, early_until: int, late_from: int) -> pl.DataFrame:
    """Per AR run: ms per step over steps 1..early_until and over the steps after late_from, and
    their ratio (a run that slows part-way has ratio well above 1)."""
    keys = [c for c in segments.columns if c not in ("from_step", "to_step", "ms_per_step")]
    steps = pl.col("to_step") - pl.col("from_step")
    weighted = pl.col("ms_per_step") * steps
    early = pl.col("to_step") <= early_until
    late = pl.col("from_step") >= late_from
    return (segments.group_by(keys, maintain_order=True)
            .agg(early_ms=weighted.filter(early).sum() / steps.filter(early).sum(),
                 late_ms=weighted.filter(late).sum() / steps.filter(late).sum())
            .with_columns(late_over_early=pl.col("late_ms") / pl.col("early_ms")))


def unshifted_speedups(raw: pl.DataFrame, shifts: pl.DataFrame, early_until: int, shift_ratio: float) -> pl.DataFrame:
    """Per speedup row (model, ..., context, n, baseline, prefill): `shifted_repeats`, the repeats whose AR
    run slowed part-way (late/early steps above `shift_ratio`, at an N past the first `early_until` steps;
    '' for none), and `speedup_unshifted`, the median paired ratio over the other repeats (null when no
    repeat shifted, or every one did)."""
    keys = GROUP + ["context", "n", "baseline", "prefill"]
    run_keys = [k for k in ("model", "dtype", "device", "baseline", "context", "repeat") if k in shifts.columns]
    paired = paired_kernel_ratios(raw)
    if shifts.is_empty() or "late_over_early" not in shifts.columns:
        flags = paired.with_columns(shifted=pl.lit(False))
    else:
        runs = shifts.select(*run_keys, (pl.col("late_over_early") > shift_ratio).alias("run_shifted")).with_columns(
            pl.col("context").cast(paired.schema["context"]), pl.col("repeat").cast(paired.schema["repeat"]))
        flags = paired.join(runs, on=run_keys, how="left").with_columns(
            shifted=pl.col("run_shifted").fill_null(False) & (pl.col("n") > early_until))
    return flags.group_by(keys).agg(
        shifted_repeats=pl.col("repeat").filter(pl.col("shifted")).sort().cast(pl.String).str.join(", "),
        speedup_unshifted=pl.when(pl.col("shifted").any() & ~pl.col("shifted").all())
        .then(pl.col("ratio").filter(~pl.col("shifted")).median()).otherwise(None))
def speedup_summary(raw: pl.DataFrame) -> pl.DataFrame:
    """The table a profile run ends with (its result, before any fit): per model, AR loop, prefill kind,
    context and N, the median T_ar and T_prefill over the paired repeats in milliseconds, the median
    speedup T_ar / T_prefill with its IQR, and the repeat count."""
    table = speedup_table(raw)
    return table.select(
        "model", "baseline", "prefill", "context", "n",
        t_ar_ms=pl.col("t_ar") * 1e3, t_prefill_ms=pl.col("t_prefill") * 1e3,
        speedup="speedup", speedup_iqr=pl.format("[{}, {}]", pl.col("speedup_q25").round(2), pl.col("speedup_q75").round(2)),
        repeats="repeats")


def kernel_table(speedups: pl.DataFrame) -> pl.DataFrame:
    """The paper-style table: per N, the AR time of each baseline, T_prefill and both speedups."""
    keys = ["source", "model", "dtype", "device", "context", "n"]
    wide = speedups.pivot(on="baseline", index=keys, values="t_ar").rename(
        lambda c: c if c in keys else f"t_ar_{c}_ms"
    )
    flags = [c for c in ("comparison", "ar_shift") if c in speedups.columns]  # tables from before these columns
    best = speedups.filter(pl.col("is_strongest")).select(
        keys + ["t_prefill", pl.col("baseline").alias("strongest"),
                pl.col("speedup").alias("speedup_strongest"),
                pl.col("overhead_share").alias("overhead_share_strongest")]
        + [pl.col(c).alias(f"{c}_strongest") for c in flags]
    )
    eager = speedups.filter(pl.col("baseline") == "eager").select(
        keys + [pl.col("speedup").alias("speedup_eager"), "speedup_q25", "speedup_q75"]
        + [pl.col(c).alias(f"{c}_eager") for c in flags]
    )
    table = wide.join(best, on=keys).join(eager, on=keys, how="left")
    ms = [c for c in table.columns if c.endswith("_ms")]
    return table.with_columns(
        [(pl.col(c) * 1000) for c in ms] + [(pl.col("t_prefill") * 1000).alias("t_prefill_ms")]
    ).drop("t_prefill").sort(keys)


def source_metrics(speedups: pl.DataFrame, names_by_source: dict[str, list[str]], n_lo: int, n_hi: int) -> dict:
    """Per kernel source: what it measured and its ratio at the ends of the paper's N range."""
    out = {}
    for name in speedups["kernel_source"].unique(maintain_order=True).to_list():
        rows = speedups.filter(pl.col("kernel_source") == name)
        first = rows.row(0, named=True)
        inside = rows.filter(pl.col("n").is_between(n_lo, n_hi))
        out[name] = {
            "source": first["source"], "model": first["model"], "dtype": first["dtype"], "device": first["device"],
            "device_name": ", ".join(names_by_source[first["source"]]), "baseline": first["baseline"], "repeats": int(rows["repeats"].min()),
            "range": [float(inside["speedup"].min()), float(inside["speedup"].max())] if inside.height else None,
            "at_n": {f"{r['n']}/c{r['context']}": r["speedup"] for r in rows.filter(pl.col("n").is_in([n_lo, n_hi])).iter_rows(named=True)},
            **({"comparisons": sorted(set(rows["comparison"].to_list())),
                "ar_shift_at": [f"{r['n']}/c{r['context']}/{r['prefill']}" for r in rows.filter(pl.col("ar_shift")).iter_rows(named=True)]}
               if "comparison" in rows.columns else {}),
        }
    return out
