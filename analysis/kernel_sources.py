"""What each kernel source measured, read for the kernel report and the claims: the ratio at the
paper's N beside the physical ceiling, and where an AR loop slowed part-way through a run.

Pure and torch-free; reads the fit stage's tables (kernel_speedup, kernel_roofline, kernel_ar_steps)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.latency import FIT_SOURCE

REPORT_NS = (8, 64, 512)
SHIFT_RATIO = 1.5  # a run whose later steps take this many times its first steps' time "slowed part-way"


def source_summary(speedups: pl.DataFrame, ns=REPORT_NS) -> pl.DataFrame:
    """One row per (kernel source, context): what it is, and the median paired ratio (with its
    interquartile range) at each N of `ns`."""
    keys = ["kernel_source", "model", "dtype", "device", "baseline", "prefill", "context"]
    keys = [k for k in keys if k in speedups.columns]
    chosen = speedups.filter(pl.col("n").is_in(list(ns)))
    wide = chosen.pivot(on="n", index=keys, values="speedup", aggregate_function="first").rename(
        {str(n): f"speedup_n{n}" for n in ns if str(n) in chosen["n"].cast(pl.String).to_list()})
    repeats = chosen.group_by(keys).agg(repeats=pl.col("repeats").min())
    return wide.join(repeats, on=keys, how="left").sort(keys)


def roofline_summary(roofline: pl.DataFrame, ns=REPORT_NS) -> pl.DataFrame:
    """The roofline table at the report's N: measured ratio, the ceiling when both kernels run at
    their physical floors, and the share of each floor the measurement reached."""
    if roofline.is_empty():
        return roofline
    return roofline.filter(pl.col("n").is_in(list(ns))).select(
        "kernel_source", "roof", "context", "n", "speedup", "ceiling", "ar_step_ms", "step_floor_ms",
        "ar_share_of_floor", "prefill_ms", "prefill_floor_ms", "prefill_share_of_floor",
    ).sort("kernel_source", "context", "n")


@dataclass(frozen=True)
class StepShift:
    """How many AR runs of one loop slowed part-way, and by how much (from kernel_ar_steps)."""

    source: str
    baseline: str
    runs: int
    shifted: int
    ratio_min: float | None
    ratio_max: float | None
    early_until: int
    late_from: int

    def sentence(self) -> str:
        if not self.shifted:
            return (f"{self.source} {self.baseline}: none of {self.runs} AR runs slowed part-way (ms per step after "
                    f"step {self.late_from} within {SHIFT_RATIO}x of steps 1-{self.early_until}).")
        return (f"{self.source} {self.baseline}: {self.shifted} of {self.runs} AR runs took {self.ratio_min:.1f}x-"
                f"{self.ratio_max:.1f}x longer per step after step {self.late_from} than over steps 1-{self.early_until}.")


def step_shifts(steps: pl.DataFrame, early_until: int, late_from: int) -> list[StepShift]:
    """Per (source, AR loop): runs whose later steps took SHIFT_RATIO times their first steps' time."""
    out = []
    for (source, baseline), group in steps.group_by(["source", "baseline"], maintain_order=True):
        shifted = group.filter(pl.col("late_over_early") > SHIFT_RATIO)["late_over_early"]
        out.append(StepShift(source, baseline, group.height, shifted.len(),
                             float(shifted.min()) if shifted.len() else None,
                             float(shifted.max()) if shifted.len() else None, early_until, late_from))
    return out


def measured_sources(speedups: pl.DataFrame) -> list[str]:
    """Kernel sources other than this run's own fit, in table order."""
    return [s for s in speedups["kernel_source"].unique(maintain_order=True).to_list() if s != FIT_SOURCE]


def this_run(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of this run's own profile (tables written before kernel sources had no `source`);
    columns that only other sources fill are dropped."""
    if "source" not in frame.columns:
        return frame
    rows = frame.filter(pl.col("source") == FIT_SOURCE)
    return rows.select([c for c in rows.columns if rows[c].null_count() < rows.height or rows.height == 0])


def of_source(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """The rows of one measured source (e.g. `h200`), columns only other sources fill dropped."""
    rows = frame.filter(pl.col("source") == source) if "source" in frame.columns else frame.clear()
    return rows.select([c for c in rows.columns if rows[c].null_count() < rows.height or rows.height == 0])


def shifted_runs(steps: pl.DataFrame) -> list[str]:
    """'model c=context repeat r (x.xx)' for each AR run that slowed part-way, in table order."""
    rows = steps.filter(pl.col("late_over_early") > SHIFT_RATIO)
    return [f"{r['model']} {r['baseline']} c={r['context']} repeat {r['repeat']} ({r['late_over_early']:.1f}x)"
            for r in rows.iter_rows(named=True)]
