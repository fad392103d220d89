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

All terms >= 0, T* >= 1; least squares on relative error. With T* given, the form is linear in the other
terms, so the fit is a bounded linear least squares with one solution (scipy's `lsq_linear`, BVLS): no starting
point, the same terms on every machine. With T* free, every candidate knee (1 and each distinct token count of
the points) is solved that way and the best one refined between its neighbours, again without a starting
point; a knee at or past the largest measured step is not identified by the points and the diagnostics say so
(`t_star_identified`). A term can be fixed instead of fitted (`fixed`): what cannot be identified from the
points (c_seq at batch 1; c_kv and c_a with one context; T* from batch-1 points, whose steps stop near or
below the ridge) is fixed and named in `assumptions`.

Past the fitted step tokens the form's continuation is bounded by the suite's one prefill rule, as the
batch-1 latency model is: a step is priced no cheaper than the last profiled segment's marginal cost per
token (`marginal_s`, from the points: the two largest step sizes at each context, the median over contexts,
never negative) and, on a device with a datasheet roof, never below the compute floor (`StepFloor`: the
weights read once, or the step's FLOPs at peak). `past_range` picks the price past the fitted tokens:
`model` (the headline: the form's continuation, raised to the limits where it falls below them) or `marginal`
(the lowest defensible price: the limits alone), the two ends of the extrapolation band.

Evaluation outside the fitted range (batch, step tokens, context) is allowed and counted by cause
(`StepCostModel.outside_causes`): a simulation reports the share of its steps priced by extrapolation.

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
LINEAR_TERMS = ("c0", "c_seq", "c_w", "c_kv", "c_a")  # the form is linear in these once T* is given
SCHEMA = "copydecode.step_cost/1"
MEASURED, EXTRAPOLATED = "measured batched steps", "extrapolated from batch 1"
POINT_COLUMNS = ("batch", "tokens", "sum_context", "attention_keys", "seconds")
# the largest term a priced step may use: an hour per step (or per token, or per ridge), a billion-token ridge;
# past these a document is not a measured engine (1e300 drove the simulation's rates to 0)
MAX_TERM = {"c0": 3600.0, "c_seq": 3600.0, "c_w": 3600.0, "t_star": 1e9, "c_kv": 3600.0, "c_a": 3600.0}
MODEL_RULE, MARGINAL_RULE = "model", "marginal"   # the price past the fitted step tokens: headline, lowest defensible
PAST_RANGE_RULES = (MODEL_RULE, MARGINAL_RULE)


@dataclass(frozen=True)
class StepRange:
    """The fitted points' range: a step beyond it is priced by extrapolation."""

    batch: int
    tokens: int
    context: int

    def to_record(self) -> dict:
        return {"batch": self.batch, "tokens": self.tokens, "context": self.context}


@dataclass(frozen=True)
class StepFloor:
    """The fastest one step can be on a device (its datasheet roof): every weight read once at HBM bandwidth, or
    the step's FLOPs at peak, whichever is slower. FLOPs: 2 per layer weight per new token, the LM head once per
    sequence (its kept logit), 4 per attention-width unit per (query, key) pair."""

    read_s: float
    token_s: float
    key_s: float
    seq_s: float
    source: str

    def seconds(self, batch: float, tokens: float, attention_keys: float) -> float:
        return max(self.read_s, self.token_s * tokens + self.key_s * attention_keys + self.seq_s * batch)

    def to_record(self) -> dict:
        return {"read_s": self.read_s, "token_s": self.token_s, "key_s": self.key_s, "seq_s": self.seq_s,
                "source": self.source}


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
    marginal_s: float | None = None          # the last profiled segment's cost per token: the floor past the range
    floor: StepFloor | None = None           # the datasheet floor (None: no roof for this device)
    past_range: str = MODEL_RULE             # PAST_RANGE_RULES

    def form(self, batch: float, tokens: float, sum_context: float, attention_keys: float) -> float:
        """The fitted form alone, without the limits."""
        return (self.c0 + self.c_seq * batch + self.c_w * max(1.0, tokens / self.t_star)
                + self.c_kv * sum_context + self.c_a * attention_keys)

    def priced(self, batch: float, tokens: float, sum_context: float, attention_keys: float) -> tuple[float, float, bool]:
        """The step's cost, the part of it that grows with the tokens it forwards, and whether a limit (the
        marginal cost past the range, the compute floor) set it; plain floats, so a simulation prices millions of
        steps without numpy overhead.

        The part that grows with the tokens is the cost less the step's launch, per-sequence, one weight read and
        KV read terms (c0 + c_seq*B + c_w + c_kv*sum(c)); a step priced at the floor's FLOPs is wholly that part, one
        priced at its weight read has none."""
        t = form = self.form(batch, tokens, sum_context, attention_keys)
        top = self.fitted_range.tokens
        if self.marginal_s is not None and tokens > top:
            lower = (form - self.c_w * max(1.0, tokens / self.t_star) + self.c_w * max(1.0, top / self.t_star)
                     + self.marginal_s * (tokens - top))
            t = lower if self.past_range == MARGINAL_RULE else max(form, lower)
        per_token = t - (self.c0 + self.c_seq * batch + self.c_w + self.c_kv * sum_context)
        if self.floor is not None:
            floor = self.floor.seconds(batch, tokens, attention_keys)
            if floor > t:
                t, per_token = floor, (floor if floor > self.floor.read_s else 0.0)
        return t, per_token, t != form

    def seconds(self, batch: float, tokens: float, sum_context: float, attention_keys: float) -> float:
        return self.priced(batch, tokens, sum_context, attention_keys)[0]

    def predict(self, frame: pl.DataFrame) -> np.ndarray:
        """Over a frame with the POINT_COLUMNS shape columns."""
        b, t, sc, sqc = (frame[c].to_numpy().astype(float) for c in POINT_COLUMNS[:4])
        return np.asarray([self.seconds(*row) for row in zip(b, t, sc, sqc)], dtype=float)

    def outside_causes(self, batch: int, tokens: int, context_max: int) -> tuple[bool, bool, bool]:
        """Why a step is priced outside the fitted range: (batch past it, step tokens past it, context past it)."""
        r = self.fitted_range
        return batch > r.batch, tokens > r.tokens, context_max > r.context

    def outside(self, batch: int, tokens: int, context_max: int) -> bool:
        return any(self.outside_causes(batch, tokens, context_max))

    def with_rule(self, rule: str) -> StepCostModel:
        if rule not in PAST_RANGE_RULES:
            raise ParamsError(f"step cost: unknown price rule past the fitted range {rule!r}; rules: {PAST_RANGE_RULES}")
        return replace(self, past_range=rule)

    @property
    def extrapolated(self) -> bool:
        return self.basis == EXTRAPOLATED

    def terms(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in TERMS}

    def to_record(self) -> dict:
        return {"source": self.source, "formula": FORMULA, "terms": self.terms(), "basis": self.basis,
                "fitted_range": self.fitted_range.to_record(), "assumptions": list(self.assumptions),
                "fixed": list(self.fixed), "marginal_s_per_token": self.marginal_s,
                "floor": self.floor.to_record() if self.floor else None, "diagnostics": self.diagnostics}

    @classmethod
    def from_record(cls, record: dict) -> StepCostModel:
        name = record.get("source", "?") if isinstance(record, dict) else "?"
        try:
            terms = {k: float(record["terms"][k]) for k in TERMS}
            floor = record.get("floor")
            marginal = record.get("marginal_s_per_token")
            model = cls(source=str(record["source"]), **terms, basis=str(record["basis"]),
                        fitted_range=StepRange(**{k: int(v) for k, v in record["fitted_range"].items()}),
                        assumptions=tuple(record.get("assumptions", ())), fixed=tuple(record.get("fixed", ())),
                        diagnostics=record.get("diagnostics", {}),
                        marginal_s=None if marginal is None else float(marginal),
                        floor=StepFloor(**{k: (str(v) if k == "source" else float(v)) for k, v in floor.items()})
                        if floor else None)
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


@dataclass(frozen=True)
class _Design:
    """The points as arrays, in a fixed row order (sorted by shape), so the solve does not depend on how the
    caller ordered them."""

    columns: dict[str, np.ndarray]
    y: np.ndarray

    @staticmethod
    def of(points: pl.DataFrame) -> _Design:
        ordered = points.sort(list(POINT_COLUMNS))
        b, t, sc, sqc, y = (ordered[c].to_numpy().astype(float) for c in POINT_COLUMNS)
        return _Design({"b": b, "t": t, "sc": sc, "sqc": sqc}, y)

    def column(self, term: str, t_star: float) -> np.ndarray:
        c = self.columns
        return {"c0": np.ones_like(self.y), "c_seq": c["b"], "c_w": np.maximum(1.0, c["t"] / t_star),
                "c_kv": c["sc"], "c_a": c["sqc"]}[term]


def _linear_solve(design: _Design, t_star: float, fixed: dict[str, float]) -> tuple[dict[str, float], float]:
    """The terms at a given T* (bounded linear least squares on relative error: one solution) and the cost."""
    from scipy.optimize import lsq_linear

    free = [k for k in LINEAR_TERMS if k not in fixed]
    known = sum((fixed[k] * design.column(k, t_star) for k in LINEAR_TERMS if k in fixed), np.zeros_like(design.y))
    target = 1.0 - known / design.y
    terms = dict(fixed)
    if free:
        a = np.column_stack([design.column(k, t_star) / design.y for k in free])
        scale = np.abs(a).max(axis=0)
        scale[scale == 0] = 1.0
        fit = lsq_linear(a / scale, target, bounds=(0.0, np.inf), method="bvls")
        terms.update({k: float(v) for k, v in zip(free, fit.x / scale)})
    residual = sum((terms[k] * design.column(k, t_star) for k in LINEAR_TERMS), np.zeros_like(design.y)) / design.y - 1
    return {**terms, "t_star": float(t_star)}, float(0.5 * residual @ residual)


def _solve(points: pl.DataFrame, fixed: dict[str, float]) -> tuple[dict[str, float], bool]:
    """The terms, and whether T* is identified by the points (always, when it is fixed)."""
    from scipy.optimize import minimize_scalar

    design = _Design.of(points)
    if "t_star" in fixed:
        return _linear_solve(design, fixed["t_star"], fixed)[0], True
    knees = sorted({1.0, *np.maximum(design.columns["t"], 1.0).tolist()})
    costs = [_linear_solve(design, knee, fixed)[1] for knee in knees]
    best = int(np.argmin(costs))   # the first (smallest) knee among equal costs
    low, high = knees[max(best - 1, 0)], knees[min(best + 1, len(knees) - 1)]
    chosen, cost = knees[best], costs[best]
    if high > low:
        found = minimize_scalar(lambda k: _linear_solve(design, k, fixed)[1], bounds=(low, high), method="bounded",
                                options={"xatol": 1e-6 * high})
        if found.fun < cost:
            chosen, cost = float(found.x), float(found.fun)
    # a knee at the largest step leaves the weight term flat over every point: if no knee fits better, the
    # points do not place it
    return _linear_solve(design, chosen, fixed)[0], cost < (1 - 1e-6) * costs[-1] - 1e-15


def last_segment_marginal(points: pl.DataFrame) -> float:
    """The marginal cost per token of the last profiled segment: at each context, the two largest step sizes
    (median seconds of each), (t2 - t1) / (T2 - T1); the median over contexts, never below 0."""
    contexts = points["context_max"] if "context_max" in points.columns else points["sum_context"]
    sizes = points.with_columns(ctx=contexts).group_by("ctx", "tokens").agg(pl.col("seconds").median())
    slopes = []
    for _, group in sizes.sort("ctx", "tokens").group_by("ctx", maintain_order=True):
        if group.height >= 2:
            (t1, y1), (t2, y2) = group.select("tokens", "seconds").tail(2).rows()
            slopes.append((y2 - y1) / (t2 - t1))
    return max(0.0, float(np.median(slopes))) if slopes else 0.0


def fit_step_cost(points: pl.DataFrame, source: str, basis: str, fixed: dict[str, float] | None = None,
                  assumptions: Sequence[str] = (), holdout: pl.Expr | None = None,
                  floor: StepFloor | None = None) -> StepCostModel:
    """The model through `points` (POINT_COLUMNS, one row per step shape: seconds its median), with residuals,
    the marginal cost of the last profiled segment, the datasheet floor (`floor`, when the device has a roof)
    and, when `holdout` selects some points, the hold-out error of a refit without them."""
    _check_points(points)
    fixed = dict(fixed or {})
    unknown = set(fixed) - set(TERMS)
    if unknown:
        raise ParamsError(f"step-cost fit: unknown fixed terms {sorted(unknown)}; terms: {', '.join(TERMS)}")
    if points.height <= len(TERMS) - len(fixed):
        raise ParamsError(f"step-cost fit ({source}): {points.height} points for {len(TERMS) - len(fixed)} free terms")
    terms, identified = _solve(points, fixed)
    contexts = points["context_max"] if "context_max" in points.columns else points["sum_context"]
    model = StepCostModel(source=source, **terms, basis=basis,
                          fitted_range=StepRange(int(points["batch"].max()), int(points["tokens"].max()),
                                                 int(contexts.max())),
                          assumptions=tuple(assumptions), fixed=tuple(sorted(fixed)),
                          marginal_s=last_segment_marginal(points), floor=floor)
    return replace(model, diagnostics={**diagnostics(model, points, fixed, holdout), "t_star_identified": identified})


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
            refit = replace(model, **_solve(kept, fixed)[0], diagnostics={})
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
