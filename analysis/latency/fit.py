"""Fitting latency models (analysis.latency.model) to summarized profiler timings, with hold-out checks.

Each form of `analysis.latency.model.FORMS` is fitted per (model, weights, dtype, device, AR baseline,
prefill kind) from the `summarize` medians (analysis.latency.tables): `interp` through the running-max
medians, the parametric forms by least squares on relative error with parameters >= 0. With a raw
`repeat` column each kernel repeat gets its own curve pair as well (`LatencyModel.repeat_models`).

Hold-out check. For every form, refit without the held-out N values and predict them; the worst
relative error is in the diagnostics (`holdout_max_rel_error`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.latency.tables import summarize
from analysis.latency.model import (
    FORMS,
    GROUP,
    PREFILL_TERMS,
    GridCurve,
    LatencyModel,
    ModelKey,
    QuadraticAR,
    QuadraticPrefill,
    RooflinePrefill,
)

ONE_CONTEXT_RULES = ("drop", "keep")


@dataclass(frozen=True)
class FitOptions:
    form: str = "interp"
    holdout_ns: tuple[int, ...] = ()
    one_context: str = "drop"  # parametric forms with one profiled context: drop the N*c term, or keep it

    def validate(self) -> FitOptions:
        if self.form not in FORMS:
            raise ParamsError(f"latency form must be one of {FORMS}, got {self.form!r}")
        if self.one_context not in ONE_CONTEXT_RULES:
            raise ParamsError(f"latency one_context rule must be one of {ONE_CONTEXT_RULES}, got {self.one_context!r}")
        return self


@dataclass(frozen=True)
class Points:
    """Measured medians of one curve: n, c, seconds (1-D float arrays of one length)."""

    n: np.ndarray
    c: np.ndarray
    y: np.ndarray

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Points:
        return cls(frame["n"].to_numpy().astype(float), frame["context"].to_numpy().astype(float),
                   frame["median"].to_numpy().astype(float))

    def subset(self, keep: np.ndarray) -> Points:
        return Points(self.n[keep], self.c[keep], self.y[keep])


def _lsq(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.optimize import lsq_linear

    weights = 1.0 / y
    return lsq_linear(design * weights[:, None], y * weights, bounds=(0, np.inf)).x


def _fit_quadratic_ar(p: Points, notes: list[str]) -> QuadraticAR:
    design = np.column_stack([p.n, p.n * p.c + p.n * (p.n - 1) / 2])
    return QuadraticAR(*map(float, _lsq(design, p.y)))


def _fit_quadratic_prefill(p: Points, notes: list[str], one_context: str) -> QuadraticPrefill:
    columns = {"p0": np.ones_like(p.n), "p1": p.n, "p2": p.n * p.c, "p3": p.n * p.n}
    if len(set(p.c.tolist())) == 1:
        if one_context == "drop":
            del columns["p2"]
            notes.append("one profiled context: N and N*c are collinear, so the N*c term (p2) is dropped (p2 = 0); "
                         "the model does not depend on c")
        else:
            notes.append("one profiled context: N and N*c are collinear, so p1 and p2 are not separately identified "
                         "(kept as fitted; do not evaluate at another c)")
    coef = dict(zip(columns, map(float, _lsq(np.column_stack(list(columns.values())), p.y))))
    return QuadraticPrefill(**{k: coef.get(k, 0.0) for k in PREFILL_TERMS})


def _fit_roofline_prefill(p: Points, notes: list[str]) -> RooflinePrefill:
    from scipy.optimize import least_squares

    one_context = len(set(p.c.tolist())) == 1
    if one_context:
        notes.append("one profiled context: the N*c term (k2) is dropped (k2 = 0)")

    def unpack(x):
        return (*x, 0.0) if one_context else tuple(x)

    def residual(x):
        return RooflinePrefill(*unpack(x)).evaluate(p.n, p.c) / p.y - 1

    y_min, slope = float(p.y.min()), float((p.y.max() - p.y.min()) / max(p.n.max() - p.n.min(), 1))
    starts = [[0.5 * y_min, 0.5 * y_min, slope], [0.9 * y_min, 0.1 * y_min, slope], [0.1 * y_min, 0.9 * y_min, slope]]
    best = None
    for start in starts:
        x0 = np.asarray(start + ([] if one_context else [slope / max(p.c.max(), 1) * 0.1]))
        fit = least_squares(residual, x0, bounds=(0, np.inf))
        if best is None or fit.cost < best.cost:
            best = fit
    return RooflinePrefill(*map(float, unpack(best.x)))


def _running_max_grid(p: Points, what: str, notes: list[str]) -> GridCurve:
    ns, contexts = sorted(set(p.n.tolist())), sorted(set(p.c.tolist()))
    table = np.full((len(contexts), len(ns)), np.nan)
    for n, c, y in zip(p.n, p.c, p.y):
        table[contexts.index(c), ns.index(n)] = y
    if np.isnan(table).any():
        gaps = [(ns[j], contexts[i]) for i, j in zip(*np.nonzero(np.isnan(table)))]
        raise ParamsError(f"{what}: interpolation needs every (N, c) of the grid; missing (N, c) = {gaps[:5]}")
    if (table <= 0).any():
        raise ParamsError(f"{what}: measured times must be > 0 for log-log interpolation")
    monotone = np.maximum.accumulate(np.maximum.accumulate(table, axis=1), axis=0)
    for i, j in zip(*np.nonzero(monotone > table)):
        notes.append(f"{what}: median at N={ns[j]:g}, c={contexts[i]:g} raised from {table[i, j]:.6g} "
                     f"to {monotone[i, j]:.6g} to keep the curve non-decreasing")
    return GridCurve(tuple(ns), tuple(contexts), tuple(tuple(map(float, row)) for row in monotone))


def fit_curve(p: Points, which: str, options: FitOptions, notes: list[str]):
    """One curve ('ar' or 'prefill') of the chosen form through the points."""
    if len(p.y) == 0:
        raise ParamsError(f"latency fit: no {which} points")
    if options.form == "interp":
        return _running_max_grid(p, f"T_{which}", notes)
    minimum = {"ar": 2, "prefill": 4 if options.form == "quadratic" else 3}[which]
    if len(p.y) < minimum + 1:
        raise ParamsError(f"latency fit ({options.form}, {which}) needs more than {minimum} grid points, got {len(p.y)}")
    if which == "ar":
        return _fit_quadratic_ar(p, notes)
    if options.form == "quadratic":
        return _fit_quadratic_prefill(p, notes, options.one_context)
    return _fit_roofline_prefill(p, notes)


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


def holdout_error(p: Points, which: str, options: FitOptions) -> float | None:
    """Worst relative error at the held-out N values of a curve refitted without them (None when
    nothing is held out or too few points remain). Held-out N beyond the kept range are predicted
    by extension of the end segment (interp)."""
    keep = ~np.isin(p.n, np.asarray(options.holdout_ns, dtype=float))
    if not options.holdout_ns or keep.all() or len(set(p.n[keep].tolist())) < 2:
        return None
    try:
        curve = fit_curve(p.subset(keep), which, options, [])
    except ParamsError:
        return None
    held = p.subset(~keep)
    pred = curve.evaluate(held.n, held.c)
    return float(np.max(np.abs(pred - held.y) / held.y))


def curve_diagnostics(p: Points, curve, which: str, options: FitOptions, notes: list[str]) -> dict:
    pred = np.asarray(curve.evaluate(p.n, p.c), dtype=float)
    rel = (pred - p.y) / p.y
    return {
        "r2": _r2(p.y, pred), "r2_log": _r2(np.log(p.y), np.log(np.maximum(pred, 1e-12))),
        "max_rel_residual": float(np.max(np.abs(rel))),
        "residuals": [{"n": int(a), "context": int(b), "measured": float(m), "predicted": float(q), "rel_error": float(r)}
                      for a, b, m, q, r in zip(p.n, p.c, p.y, pred, rel)],
        "holdout_ns": [int(h) for h in options.holdout_ns],
        "holdout_max_rel_error": holdout_error(p, which, options),
        "notes": notes,
    }


def fit_points(ar_points: pl.DataFrame, prefill_points: pl.DataFrame, key: ModelKey, options: FitOptions,
               repeats: Sequence[tuple[pl.DataFrame, pl.DataFrame]] = ()) -> LatencyModel:
    """A model from summarized points (columns n, context, median) of T_ar and of T_prefill, plus the
    same per kernel repeat (each repeat's own values as `median`)."""
    options = options.validate()
    ar_p, pre_p = Points.of(ar_points), Points.of(prefill_points)
    ar_notes, pre_notes = [], []
    ar, prefill = fit_curve(ar_p, "ar", options, ar_notes), fit_curve(pre_p, "prefill", options, pre_notes)
    per_repeat = tuple((fit_curve(Points.of(a), "ar", options, []), fit_curve(Points.of(b), "prefill", options, []))
                       for a, b in repeats)
    ns = np.concatenate([ar_p.n, pre_p.n])
    contexts = sorted(set(ar_p.c.tolist()) | set(pre_p.c.tolist()))
    return LatencyModel(
        key=key, form=options.form, ar=ar, prefill=prefill, ns=(float(ns.min()), float(ns.max())),
        contexts=tuple(contexts), repeats=per_repeat,
        diagnostics={"ar": curve_diagnostics(ar_p, ar, "ar", options, ar_notes),
                     "prefill": curve_diagnostics(pre_p, prefill, "prefill", options, pre_notes),
                     "one_context_rule": options.one_context},
    )


def _prefill_rows(summary: pl.DataFrame, baseline: str, prefill: str) -> pl.DataFrame:
    """The prefill points of one prefill kind, from the grids paired with AR loop `baseline` (files
    from before pairs share one grid among every loop)."""
    rows = summary.filter((pl.col("method") == "prefill") & (pl.col("baseline") == prefill))
    return rows.filter(pl.col("pair_baseline") == baseline) if "pair_baseline" in summary.columns else rows


def _ar_rows(summary: pl.DataFrame, baseline: str) -> pl.DataFrame:
    return summary.filter((pl.col("method") == "ar") & (pl.col("baseline") == baseline))


def _combinations(group: pl.DataFrame) -> list[tuple[str, str]]:
    """(AR loop, prefill kind) of every latency model a group's timings support."""
    kinds = sorted(set(group.filter(pl.col("method") == "prefill")["baseline"]))
    return [(baseline, kind) for baseline in sorted(set(group.filter(pl.col("method") == "ar")["baseline"]))
            for kind in kinds if _prefill_rows(group, baseline, kind).height]


def _repeat_points(raw: pl.DataFrame, group_filter: pl.Expr, baseline: str, prefill: str
                   ) -> list[tuple[pl.DataFrame, pl.DataFrame]]:
    """Each kernel repeat's own AR and prefill points (repeats that measured both)."""
    if "repeat" not in raw.columns:
        return []
    out = []
    for repeat in sorted(set(raw["repeat"].to_list())):
        summary = summarize(raw.filter(group_filter & (pl.col("repeat") == repeat)))
        ar, pre = _ar_rows(summary, baseline), _prefill_rows(summary, baseline, prefill)
        if ar.height and pre.height:
            out.append((ar, pre))
    return out


def fit_latency(raw: pl.DataFrame, options: FitOptions) -> list[LatencyModel]:
    """One model per (model, weights, dtype, device, AR baseline, prefill kind), each from the prefill
    grids paired with its AR loop."""
    options = options.validate()
    summary = summarize(raw)
    models = []
    for key, group in summary.group_by(GROUP, maintain_order=True):
        in_group = pl.all_horizontal([pl.col(k) == v for k, v in zip(GROUP, key)])
        for baseline, prefill in _combinations(group):
            models.append(fit_points(_ar_rows(group, baseline), _prefill_rows(group, baseline, prefill),
                                     ModelKey(*key, baseline, prefill=prefill), options,
                                     _repeat_points(raw, in_group, baseline, prefill)))
    return models


def holdout_table(summary: pl.DataFrame, holdout_ns: Sequence[int], forms: Sequence[str] = FORMS,
                  one_context: str = "drop") -> pl.DataFrame:
    """Worst hold-out relative error per (key, form, curve), from a `summarize` table."""
    rows = []
    for key, group in summary.group_by(GROUP, maintain_order=True):
        for baseline, prefill_kind in _combinations(group):
            ar, prefill = Points.of(_ar_rows(group, baseline)), Points.of(_prefill_rows(group, baseline, prefill_kind))
            for form in forms:
                options = FitOptions(form, tuple(holdout_ns), one_context)
                for which, p in (("ar", ar), ("prefill", prefill)):
                    rows.append({**dict(zip(GROUP, key)), "baseline": baseline,
                                 **({} if prefill_kind == "eager" else {"prefill": prefill_kind}),
                                 "form": form, "curve": which,
                                 "holdout_ns": ",".join(map(str, holdout_ns)),
                                 "holdout_max_rel_error": holdout_error(p, which, options)})
    return pl.DataFrame(rows, infer_schema_length=None)

