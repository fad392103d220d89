"""Summaries of the raw timings, the kernel speedup table, and the fitted latency model.

Speedup(N, c) = T_ar(N) / T_prefill(N), per repeat (repeat r of the AR loop over repeat r of the
prefill), reported as the median and IQR over repeats. "strongest" is the AR baseline with the
lowest median T_ar at that (N, c); its speedup is the honest one, the eager one is the paper-style
ratio, and overhead_share = 1 - T_ar(strongest) / T_ar(eager) is how much of the eager AR time is
per-step overhead that a serving engine removes.

Latency model, linear in its parameters (all constrained >= 0), fitted by least squares on relative
error (each equation divided by its measured value):

    T_ar(N, c)      = a * N + b * (N * c + N * (N - 1) / 2)      per step: a + b * (context so far)
    T_prefill(N, c) = p0 + p1 * N + p2 * N * c + p3 * N^2

t_step(c) = a + b * c is the cost of one decode step at context c, which the closed-form bound uses.
The model is checked by refitting without held-out N values and predicting them (worst relative
error reported), then fitted on every point.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError

GROUP = ["model", "weights", "dtype", "device"]
FORMULAS = {
    "t_ar": "a*N + b*(N*c + N*(N-1)/2)",
    "t_prefill": "p0 + p1*N + p2*N*c + p3*N^2",
    "t_step": "a + b*c",
}
AR_TERMS = ("a", "b")
PREFILL_TERMS = ("p0", "p1", "p2", "p3")


def summarize(raw: pl.DataFrame) -> pl.DataFrame:
    """Median, quartiles and IQR over repeats for every (model, ..., method, baseline, c, N)."""
    keys = GROUP + ["method", "baseline", "context", "n"]
    return (
        raw.group_by(keys)
        .agg(
            median=pl.col("seconds").median(),
            q25=pl.col("seconds").quantile(0.25, interpolation="linear"),
            q75=pl.col("seconds").quantile(0.75, interpolation="linear"),
            repeats=pl.len(),
        )
        .with_columns(iqr=pl.col("q75") - pl.col("q25"))
        .sort(keys)
    )


def speedup_table(raw: pl.DataFrame) -> pl.DataFrame:
    """One row per (model, dtype, device, c, N, AR baseline), plus which baseline is strongest."""
    keys = GROUP + ["context", "n"]
    prefill = raw.filter(pl.col("method") == "prefill").select(keys + ["repeat", pl.col("seconds").alias("t_prefill")])
    ar = raw.filter(pl.col("method") == "ar").select(keys + ["baseline", "repeat", pl.col("seconds").alias("t_ar")])
    paired = ar.join(prefill, on=keys + ["repeat"], how="inner").with_columns(ratio=pl.col("t_ar") / pl.col("t_prefill"))
    table = (
        paired.group_by(keys + ["baseline"])
        .agg(
            t_ar=pl.col("t_ar").median(), t_prefill=pl.col("t_prefill").median(),
            speedup=pl.col("ratio").median(),
            speedup_q25=pl.col("ratio").quantile(0.25, interpolation="linear"),
            speedup_q75=pl.col("ratio").quantile(0.75, interpolation="linear"),
            repeats=pl.len(),
        )
        .sort(keys + ["baseline"])
    )
    eager = table.filter(pl.col("baseline") == "eager").select(keys + [pl.col("t_ar").alias("t_ar_eager")])
    best = table.sort("t_ar").group_by(keys, maintain_order=True).first().select(keys + [pl.col("baseline").alias("strongest")])
    return (
        table.join(best, on=keys, how="left")
        .join(eager, on=keys, how="left")
        .with_columns(
            is_strongest=pl.col("baseline") == pl.col("strongest"),
            overhead_share=1 - pl.col("t_ar") / pl.col("t_ar_eager"),
        )
        .drop("t_ar_eager")
        .sort(keys + ["baseline"])
    )


# ---------------------------------------------------------------- fit

def ar_design(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.column_stack([n, n * c + n * (n - 1) / 2])


def prefill_design(n: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(n), n, n * c, n * n])


def _fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.optimize import lsq_linear

    weights = 1.0 / y
    return lsq_linear(design * weights[:, None], y * weights, bounds=(0, np.inf)).x


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


@dataclass
class CurveFit:
    terms: dict[str, float]
    r2: float
    r2_log: float
    max_rel_residual: float
    residuals: list[dict]
    holdout_ns: list[int]
    holdout_max_rel_error: float | None


def fit_curve(points: pl.DataFrame, design_fn, names: tuple[str, ...], holdout_ns: list[int]) -> CurveFit:
    n = points["n"].to_numpy().astype(float)
    c = points["context"].to_numpy().astype(float)
    y = points["median"].to_numpy().astype(float)
    if len(y) < len(names) + 1:
        raise ParamsError(f"latency fit needs more than {len(names)} grid points, got {len(y)}")
    holdout_error = None
    keep = ~np.isin(n, holdout_ns)
    if holdout_ns and keep.sum() > len(names) and (~keep).any():
        coef = _fit(design_fn(n[keep], c[keep]), y[keep])
        pred = design_fn(n[~keep], c[~keep]) @ coef
        holdout_error = float(np.max(np.abs(pred - y[~keep]) / y[~keep]))
    coef = _fit(design_fn(n, c), y)
    pred = design_fn(n, c) @ coef
    rel = (pred - y) / y
    residuals = [
        {"n": int(a), "context": int(b), "measured": float(m), "predicted": float(p), "rel_error": float(r)}
        for a, b, m, p, r in zip(n, c, y, pred, rel)
    ]
    return CurveFit(
        terms=dict(zip(names, map(float, coef))),
        r2=_r2(y, pred),
        r2_log=_r2(np.log(y), np.log(np.maximum(pred, 1e-12))),
        max_rel_residual=float(np.max(np.abs(rel))),
        residuals=residuals,
        holdout_ns=[int(h) for h in holdout_ns],
        holdout_max_rel_error=holdout_error,
    )


@dataclass(frozen=True)
class LatencyModel:
    """Fitted T_ar, T_prefill and t_step for one (model, weights, dtype, device, AR baseline)."""

    ar: dict[str, float]
    prefill: dict[str, float]

    def t_step(self, c: float) -> float:
        return self.ar["a"] + self.ar["b"] * c

    def t_ar(self, n, c):
        n = np.asarray(n, dtype=float)
        return self.ar["a"] * n + self.ar["b"] * (n * c + n * (n - 1) / 2)

    def t_prefill(self, n, c):
        n = np.asarray(n, dtype=float)
        p = self.prefill
        return p["p0"] + p["p1"] * n + p["p2"] * n * c + p["p3"] * n * n


def fit_latency(raw: pl.DataFrame, holdout_ns: list[int]) -> list[dict]:
    """One fit record per (model, weights, dtype, device, AR baseline); prefill is shared."""
    summary = summarize(raw)
    records = []
    for key, group in summary.group_by(GROUP, maintain_order=True):
        prefill_points = group.filter(pl.col("method") == "prefill")
        prefill = fit_curve(prefill_points, prefill_design, PREFILL_TERMS, holdout_ns)
        for baseline in sorted(set(group.filter(pl.col("method") == "ar")["baseline"])):
            points = group.filter((pl.col("method") == "ar") & (pl.col("baseline") == baseline))
            ar = fit_curve(points, ar_design, AR_TERMS, holdout_ns)
            records.append({
                **dict(zip(GROUP, key)), "baseline": baseline,
                "ar": asdict(ar), "prefill": asdict(prefill),
                "contexts": sorted(set(points["context"].to_list())),
                "ns": sorted(set(points["n"].to_list())),
            })
    return records


def latency_model(record: dict) -> LatencyModel:
    return LatencyModel(ar=record["ar"]["terms"], prefill=record["prefill"]["terms"])
