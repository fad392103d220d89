"""The step-cost model: what one continuous-batching engine step costs, fitted to timed steps.

One step runs B sequences, sequence i adding q_i new tokens on top of its c_i cached ones. Form (first
order, as the serving simulators Vidur and BLIS use; shared/docs/reviews/anchors-serving.md section A3):

    t = c0 + c_seq * B + c_w * max(1, T / T*) + c_kv * sum_i c_i + c_a * K,   T = sum_i q_i,
    K = sum_i q_i * (c_i + (q_i + 1) / 2)

* c0: launch and host work of a step, whatever its size;
* c_seq: host work per scheduled sequence (this suite's engine dispatches attention once per sequence);
* c_w * max(1, T / T*): the weights are read once per step (c_w) until the step's T tokens of matmul
  work pass the ridge count T*; past it the step is compute-bound, c_w / T* per token;
* c_kv: reading one cached token's keys and values;
* c_a: one (query, key) pair of attention: K counts them, new token j of a chunk attending to the c_i
  cached tokens and to the chunk's tokens up to itself (a prefill chunk's causal attention over its own
  tokens is its q^2 / 2 part, which a decode step does not have).

All terms >= 0, T* >= 1; least squares on relative error (scipy). A term can be fixed instead of fitted
(`fixed`): what cannot be identified from the points (c_seq at batch 1; c_kv and c_a with one context)
is fixed and named in `assumptions`.

Evaluation outside the fitted range (batch, step tokens, context) is allowed and counted
(`StepCostModel.outside`): a simulation reports the share of its steps priced by extrapolation.

Hold-out: refit without the held-out points (grid values of B or q) and predict them; the median and the
largest absolute relative error are in the fit's diagnostics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.pipeline.io import read_json_document
from analysis.stats import quartiles

FORMULA = "t = c0 + c_seq*B + c_w*max(1, T/T*) + c_kv*sum(c_i) + c_a*K, T = sum(q_i), K = sum(q_i*(c_i + (q_i+1)/2))"
TERMS = ("c0", "c_seq", "c_w", "t_star", "c_kv", "c_a")
SCHEMA = "copydecode.step_cost/1"
MEASURED, EXTRAPOLATED = "measured batched steps", "extrapolated from batch 1"
POINT_COLUMNS = ("batch", "tokens", "sum_context", "attention_keys", "seconds")
# the largest term a priced step may use: an hour per step (or per token, or per ridge), a billion-token ridge;
# past these a document is not a measured engine (1e300 drove the simulation's rates to 0)
MAX_TERM = {"c0": 3600.0, "c_seq": 3600.0, "c_w": 3600.0, "t_star": 1e9, "c_kv": 3600.0, "c_a": 3600.0}


@dataclass(frozen=True)
class StepRange:
    """The fitted points' range: a step beyond it is priced by extrapolation."""

    batch: int
    tokens: int
    context: int

    def to_record(self) -> dict:
        return {"batch": self.batch, "tokens": self.tokens, "context": self.context}


@dataclass(frozen=True)
class StepCostModel:
    """One kernel source's step cost (seconds), with how it was built and what it assumes."""

    source: str
    c0: float
    c_seq: float
    c_w: float
    t_star: float
    c_kv: float
    c_a: float
    basis: str                               # MEASURED or EXTRAPOLATED
    fitted_range: StepRange
    assumptions: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()              # terms fixed rather than fitted
    diagnostics: dict = field(default_factory=dict, compare=False)

    def seconds(self, batch: float, tokens: float, sum_context: float, attention_keys: float) -> float:
        """The step's cost; plain floats, so a simulation prices millions of steps without numpy overhead."""
        return (self.c0 + self.c_seq * batch + self.c_w * max(1.0, tokens / self.t_star)
                + self.c_kv * sum_context + self.c_a * attention_keys)

    def predict(self, frame: pl.DataFrame) -> np.ndarray:
        """Vectorised over a frame with the POINT_COLUMNS shape columns."""
        b, t, sc, sqc = (frame[c].to_numpy().astype(float) for c in POINT_COLUMNS[:4])
        return (self.c0 + self.c_seq * b + self.c_w * np.maximum(1.0, t / self.t_star) + self.c_kv * sc
                + self.c_a * sqc)

    def outside(self, batch: int, tokens: int, context_max: int) -> bool:
        r = self.fitted_range
        return batch > r.batch or tokens > r.tokens or context_max > r.context

    @property
    def extrapolated(self) -> bool:
        return self.basis == EXTRAPOLATED

    def terms(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in TERMS}

    def to_record(self) -> dict:
        return {"source": self.source, "formula": FORMULA, "terms": self.terms(), "basis": self.basis,
                "fitted_range": self.fitted_range.to_record(), "assumptions": list(self.assumptions),
                "fixed": list(self.fixed), "diagnostics": self.diagnostics}

    @classmethod
    def from_record(cls, record: dict) -> StepCostModel:
        name = record.get("source", "?") if isinstance(record, dict) else "?"
        try:
            terms = {k: float(record["terms"][k]) for k in TERMS}
            model = cls(source=str(record["source"]), **terms, basis=str(record["basis"]),
                        fitted_range=StepRange(**{k: int(v) for k, v in record["fitted_range"].items()}),
                        assumptions=tuple(record.get("assumptions", ())), fixed=tuple(record.get("fixed", ())),
                        diagnostics=record.get("diagnostics", {}))
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise ParamsError(f"step-cost record {str(name)[:80]!r} is malformed: {exc!r}"[:300]) from None
        return model.checked()

    def checked(self) -> StepCostModel:
        """Terms a step can be priced with, or a ParamsError naming the source and the term: every term finite
        and >= 0 (the fit's bounds), T* >= 1, no term past MAX_TERM, and a one-token step that takes time
        (a zero, negative or non-finite step time made the simulator blame the params, or simpy raise)."""
        for k, v in self.terms().items():
            low = 1.0 if k == "t_star" else 0.0
            if not math.isfinite(v) or v < low or v > MAX_TERM[k]:
                raise ParamsError(f"step-cost source {self.source!r}: term {k} is {v!r}; it must be a finite number "
                                  f"from {low:g} to {MAX_TERM[k]:g} (rerun `copydecode kernels profile --batched`)")
        if self.seconds(1, 1, 0, 1.0) <= 0:
            raise ParamsError(f"step-cost source {self.source!r}: a one-token step would take no time (c0, c_seq and "
                              "c_w are all 0); rerun `copydecode kernels profile --batched`")
        return self


# ---------------------------------------------------------------- fitting


def _check_points(points: pl.DataFrame) -> None:
    missing = [c for c in POINT_COLUMNS if c not in points.columns]
    if missing:
        raise ParamsError(f"step-cost fit: the points lack {missing}")
    if points.height == 0:
        raise ParamsError("step-cost fit: no points")
    if (points["seconds"] <= 0).any() or not points["seconds"].is_finite().all():
        raise ParamsError("step-cost fit: every point's seconds must be finite and > 0")


def _solve(points: pl.DataFrame, fixed: dict[str, float]) -> dict[str, float]:
    from scipy.optimize import least_squares

    free = [k for k in TERMS if k not in fixed]
    b, t, sc, sqc, y = (points[c].to_numpy().astype(float) for c in POINT_COLUMNS)

    def model(x: np.ndarray) -> np.ndarray:
        p = {**fixed, **dict(zip(free, x))}
        return p["c0"] + p["c_seq"] * b + p["c_w"] * np.maximum(1.0, t / p["t_star"]) + p["c_kv"] * sc + p["c_a"] * sqc

    def residual(x: np.ndarray) -> np.ndarray:
        return model(x) / y - 1.0

    lower = [1.0 if k == "t_star" else 0.0 for k in free]
    y_min = float(y.min())
    slope = float(np.polyfit(t, y, 1)[0]) if len(set(t.tolist())) > 1 else 0.0
    best = None
    # T* is where the fit is not convex: start from several knees spread over the grid's token counts
    counts = sorted(set(np.maximum(t, 1.0).tolist()))
    for knee in sorted({1.0, *(counts[len(counts) * k // 4] for k in (1, 2, 3))}):
        start = {"c0": 0.5 * y_min, "c_seq": 0.0, "c_w": 0.5 * y_min, "t_star": max(1.0, knee),
                 "c_kv": 0.0, "c_a": 0.0}
        if slope > 0:
            start["c_w"] = max(0.5 * y_min, slope * start["t_star"]) if knee > 1 else 0.5 * y_min
        x0 = np.asarray([max(start[k], lo + 1e-12) for k, lo in zip(free, lower)])
        fit = least_squares(residual, x0, bounds=(lower, np.inf), x_scale="jac", max_nfev=5000)
        if best is None or fit.cost < best.cost:
            best = fit
    return {**fixed, **{k: float(v) for k, v in zip(free, best.x)}}


def fit_step_cost(points: pl.DataFrame, source: str, basis: str, fixed: dict[str, float] | None = None,
                  assumptions: Sequence[str] = (), holdout: pl.Expr | None = None) -> StepCostModel:
    """The model through `points` (POINT_COLUMNS, one row per step shape: seconds its median), with residuals
    and, when `holdout` selects some points, the hold-out error of a refit without them."""
    _check_points(points)
    fixed = dict(fixed or {})
    unknown = set(fixed) - set(TERMS)
    if unknown:
        raise ParamsError(f"step-cost fit: unknown fixed terms {sorted(unknown)}; terms: {', '.join(TERMS)}")
    if points.height <= len(TERMS) - len(fixed):
        raise ParamsError(f"step-cost fit ({source}): {points.height} points for {len(TERMS) - len(fixed)} free terms")
    terms = _solve(points, fixed)
    contexts = points["context_max"] if "context_max" in points.columns else points["sum_context"]
    model = StepCostModel(source=source, **terms, basis=basis,
                          fitted_range=StepRange(int(points["batch"].max()), int(points["tokens"].max()),
                                                 int(contexts.max())),
                          assumptions=tuple(assumptions), fixed=tuple(sorted(fixed)))
    return replace(model, diagnostics=diagnostics(model, points, fixed, holdout))


def residuals(model: StepCostModel, points: pl.DataFrame) -> pl.DataFrame:
    """Each point's measured and predicted seconds and relative error."""
    predicted = model.predict(points)
    keep = [c for c in ("step_id", "batch", "q", "context", "tokens", "sum_context", "attention_keys") if c in points.columns]
    return points.select(keep, measured_s=pl.col("seconds")).with_columns(
        predicted_s=pl.Series(predicted), rel_error=pl.Series(predicted / points["seconds"].to_numpy() - 1.0))


def diagnostics(model: StepCostModel, points: pl.DataFrame, fixed: dict[str, float],
                holdout: pl.Expr | None) -> dict:
    res = residuals(model, points)
    rel = np.abs(res["rel_error"].to_numpy())
    y = points["seconds"].to_numpy()
    pred = res["predicted_s"].to_numpy()
    ss_tot = float(((np.log(y) - np.log(y).mean()) ** 2).sum())
    out = {"points": points.height, "median_abs_rel_error": float(np.median(rel)), "max_abs_rel_error": float(rel.max()),
           "r2_log": 1 - float(((np.log(y) - np.log(pred)) ** 2).sum()) / ss_tot if ss_tot > 0 else math.nan,
           "residuals": res.to_dicts(), "holdout": None}
    if holdout is not None:
        held = points.filter(holdout)
        kept = points.filter(~holdout)
        if held.height and kept.height > len(TERMS) - len(fixed):
            refit = StepCostModel(source=model.source, **_solve(kept, fixed), basis=model.basis,
                                  fitted_range=model.fitted_range)
            err = np.abs(refit.predict(held) / held["seconds"].to_numpy() - 1.0)
            out["holdout"] = {"points": held.height, "median_abs_rel_error": float(np.median(err)),
                              "max_abs_rel_error": float(err.max())}
    return out


def step_summary(raw: pl.DataFrame) -> pl.DataFrame:
    """Timed steps (kernels_profile.measure.batched_session.STEP_SCHEMA) -> one point per step shape: the
    median seconds over repeats, the IQR, the repeat count and the noisy share."""
    shape = ["step_id", "batch", "tokens", "sum_context", "attention_keys", "q_max", "context_max"]

    return (raw.group_by(shape).agg(*quartiles("seconds", "seconds", "q25", "q75"), repeats=pl.len(),
                                    noisy_share=pl.col("noisy").cast(pl.Float64).mean())
            .with_columns(q=pl.col("q_max"), context=pl.col("context_max")).sort("context", "batch", "q"))


def to_document(models: Sequence[StepCostModel], environment: dict | None = None) -> dict:
    return {"schema": SCHEMA, "formula": FORMULA, "models": [m.to_record() for m in models],
            "environment": environment or {}}


def from_document(document: dict) -> list[StepCostModel]:
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        schema = document.get("schema") if isinstance(document, dict) else None
        raise ParamsError(f"step-cost document: unknown schema {str(schema)[:80]!r}; "
                          f"expected {SCHEMA} (rerun `copydecode kernels profile --batched`)")
    records = document.get("models", [])
    if not isinstance(records, list):
        raise ParamsError("step-cost document: 'models' is not a list (rerun `copydecode kernels profile --batched`)")
    return [StepCostModel.from_record(r) for r in records]


def read_step_cost(path: Path) -> tuple[list[StepCostModel], dict]:
    """The step-cost models of the document at `path` and the document: read through the one guarded reader
    (a run folder's file is data) and every model's terms checked."""
    document = read_json_document(path, "copydecode kernels profile --batched", ParamsError)
    return from_document(document), document
