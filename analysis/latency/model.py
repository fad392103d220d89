"""The latency model: T_ar(N, c), T_prefill(N, c) and t_step(c) per kernel, and its JSON document.

This module is the one owner of the latency model (pure, torch-free). The profiler
(kernels_profile.measure.profiler) writes raw timings; the fit stage turns them into models
(analysis.latency.fit) and writes them as one JSON document (`to_document`); the bounds stage and
the end-to-end prediction rebuild the models from it (`from_document`).

Quantities (seconds), for one (model, weights, dtype, device, AR baseline):

    T_ar(N, c)       N decode steps starting from a KV cache of c tokens
    T_prefill(N, c)  one forward of N tokens on a KV cache of c tokens (what a copy costs)
    t_step(c)        one decode step at context c

Forms (`FORMS`):

* `interp` (default): monotone interpolation of the measured medians, piecewise-linear in
  (log N, log(1 + c)) (bilinear on each grid cell; log(1 + c) because c = 0 is a valid context).
  Before interpolating, the medians are made non-decreasing in N and then in c by a running
  maximum (a noisy dip is raised to its predecessor; the raised points are listed in the fit's
  diagnostics). With one profiled context the model is 1-D in N. t_step(c) = T_ar(1, c).
* `quadratic` (v1, today's model), linear in its parameters (all >= 0), least squares on relative
  error:  T_ar = a*N + b*(N*c + N*(N-1)/2),  t_step = a + b*c,
          T_prefill = p0 + p1*N + p2*N*c + p3*N^2.
  With a single profiled context the columns N and N*c are collinear, so p1 and p2 cannot be
  separated; the default rule (`one_context="drop"`) drops the N*c term (p2 = 0) and says so in
  the fit's notes; `one_context="keep"` fits both as before (reproduces the committed fit).
* `roofline` (for GPUs): T_ar and t_step as `quadratic` (decode is memory-bound: weights plus the
  KV cache read each step), T_prefill = p0 + max(w, k1*N + k2*N*c): a fixed launch cost p0, then
  the larger of the weight-streaming time w and the compute time (k1 per token through the
  matmuls, k2 per token and cached token through attention); nonlinear least squares on relative
  error, parameters >= 0; with one context k2 = 0 (same rule).
* `paper`: not a fit. The kernel speedup curve through the paper abstract's two points (6.8x at
  N = 8, 303x at N = 512), a line in log-log:
      speedup(N) = 6.8 * (N / 8) ** (log(303 / 6.8) / log(64)),
  with a unit decode step: t_step = 1, T_ar(N) = N, T_prefill(N) = N / speedup(N). Bounds composed
  with it are dimensionless and comparable with the paper's. It does not depend on c.

Range. Each model knows the profiled N range (and c range, unless it is context-free). Evaluating
outside it raises ParamsError naming the value and the range, unless `extrapolate=True`; then the
result's `extrapolated` array marks those values, and `past_n` those whose N lies outside the profiled N
(the rest of the flagged ones have their context held or extended). `interp` extends the last (or first)
log-log segment; with one context, a c other than the profiled one is held at that context (flagged).
N = 0 (a copy that forwards nothing) costs 0 and is always in range.

Past the profiled N, one rule for every stage that prices (`PAST_N_RULES`, params bounds.prefill_past_n,
passed by every pricing call; docs/bounds-pricing.md): `marginal` (judged) prices T_prefill(N > N_max, c) no
cheaper than the last profiled segment's marginal cost per token, T(N_max, c) + (N - N_max) x (T(N_max, c) -
T(N_prev, c)) / (N_max - N_prev), and no cheaper than the device's compute floor (`floor`: the datasheet
roofline, analysis.latency.roofline.prefill_floor_s, at every extrapolated N or c); `linear` (the band's high
end) no cheaper than the cost per token at N_max either, T(N_max, c) x N / N_max; `loglog` is the curve's own
continuation (the rule before: past N = 512 the H200's device-time prefill fell below its compute floor).
Parametric forms continue their formula (only the floor applies); the paper curve's last segment is its two
points.

Kernel uncertainty. A model fitted from raw timings with a `repeat` column also carries one curve
pair per repeat (`repeat_models()`), so a bootstrap can resample kernel repeats as well as cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from analysis.errors import ParamsError
from analysis.latency.names import FIT_SOURCE, PAPER_CLAIMS, PAPER_SOURCE  # noqa: F401 (PAPER_CLAIMS: read here and by callers)
from analysis.latency.roofline import PrefillFloor
from analysis.stats import portable_exp, portable_log, portable_log1p, portable_power

GROUP = ["model", "weights", "dtype", "device"]
KEY_FIELDS = (*GROUP, "baseline")
FORMS = ("interp", "quadratic", "roofline")
SCHEMA = "copydecode.latency_model/2"
PAPER_FORM = PAPER_SOURCE  # the paper source's model is the one of form `paper`
PREFILL_TERMS = ("p0", "p1", "p2", "p3")
ROOFLINE_TERMS = ("p0", "w", "k1", "k2")
# how a decoded token is priced (params bounds.step_cost; `LatencyModel.prices`)
STEADY, FIRST_STEP = "steady", "first_step"
STEP_COSTS = (STEADY, FIRST_STEP)
# how T_prefill continues past the profiled N (params bounds.prefill_past_n; module docstring)
LOGLOG, MARGINAL, LINEAR = "loglog", "marginal", "linear"
PAST_N_RULES = (MARGINAL, LINEAR, LOGLOG)


def paper_points(spec: dict) -> tuple[tuple[int, float], tuple[int, float]]:
    """The paper's kernel points (N, speedup) at the ends of its N range, from paper_claims.json's
    `kernel_speedup` entry: the one reader of them (the paper kernel below and the claims use it)."""
    points = spec.get("points") if isinstance(spec, dict) else None
    try:
        ends = [(int(n), float(s)) for n, s in points[:1] + points[-1:]]
    except (TypeError, ValueError) as exc:
        raise ParamsError(f"paper_claims.json kernel_speedup.points must be a list of [N, speedup] pairs, "
                          f"got {points!r}") from exc
    if len(points) < 2 or not (0 < ends[0][0] < ends[1][0] and ends[0][1] > 0 and ends[1][1] > 0):
        raise ParamsError(f"paper_claims.json kernel_speedup.points needs two or more [N, speedup] pairs, "
                          f"N rising, speedups > 0; got {points!r}")
    return ends[0], ends[1]


def paper_kernel_points(path: Path = PAPER_CLAIMS) -> tuple[tuple[int, float], tuple[int, float]]:
    """The paper's kernel points read from paper_claims.json (`paper_points`)."""
    import json

    return paper_points(json.loads(Path(path).read_text())["kernel_speedup"])


PAPER_POINTS = paper_kernel_points()
PAPER_NOTE = "speedup through the paper abstract's points (6.8x at N=8, 303x at N=512), log-log line; unit decode step"
FORMULAS = {
    "interp": "T(N, c): bilinear in (log N, log(1 + c)) through the running-max medians; t_step(c) = T_ar(1, c)",
    "quadratic": "T_ar = a*N + b*(N*c + N*(N-1)/2); t_step = a + b*c; T_prefill = p0 + p1*N + p2*N*c + p3*N^2",
    "roofline": "T_ar = a*N + b*(N*c + N*(N-1)/2); t_step = a + b*c; T_prefill = p0 + max(w, k1*N + k2*N*c)",
    PAPER_FORM: "speedup(N) = 6.8*(N/8)^(log(303/6.8)/log(64)); t_step = 1; T_ar = N; T_prefill = N / speedup(N)",
}

# ---------------------------------------------------------------- evaluation results

@dataclass(frozen=True)
class Evaluation:
    """Values of a latency function and, per value, whether it lies outside the profiled range (and whether
    because its N does: `past_n`; the others' context is held or extended)."""

    seconds: np.ndarray
    extrapolated: np.ndarray  # bool, same shape
    past_n: np.ndarray | None = None  # bool, same shape: its N lies outside the profiled N (None: no N, a step)
    held: np.ndarray | None = None    # bool, same shape: its context lies outside the profiled contexts

    @property
    def n_flags(self) -> np.ndarray:
        """Per value, extrapolated because of its N."""
        return np.zeros(self.extrapolated.shape, dtype=bool) if self.past_n is None else self.past_n

    @property
    def context_flags(self) -> np.ndarray:
        """Per value, extrapolated because of its context (held at the one profiled context, or extended)."""
        return self.extrapolated if self.held is None else self.held


@dataclass(frozen=True)
class Prices:
    """A decode run's first-step overhead o(c) and per-token step s(c), and T_prefill(n, c), with
    their extrapolation flags (`LatencyModel.prices`)."""

    overhead: Evaluation
    step: Evaluation
    prefill: Evaluation


@dataclass(frozen=True)
class ModelKey:
    model: str
    weights: str
    dtype: str
    device: str
    baseline: str
    source: str = FIT_SOURCE  # which raw measurement it was fitted from (kernels.fit.raw `source`)
    prefill: str = "eager"    # the prefill kind its T_prefill was measured with (PREFILL_KINDS)

    def label(self) -> str:
        prefix = "" if self.source == FIT_SOURCE else f"{self.source}:"
        suffix = "" if self.prefill == "eager" else f"/{self.prefill}_prefill"
        return f"{prefix}{self.model}/{self.weights}/{self.dtype}/{self.device}/{self.baseline}{suffix}"


PAPER_KEY = ModelKey(*(PAPER_SOURCE,) * 5)


def _broadcast(n, c) -> tuple[np.ndarray, np.ndarray]:
    n, c = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(c, dtype=float))
    return n, c


# ---------------------------------------------------------------- curves (no range checks)

def _segments(x: np.ndarray, knots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segment index i (into knots[i], knots[i+1]) and position t for each x; t < 0 or t > 1 extends
    the first or last segment linearly."""
    i = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, len(knots) - 2)
    t = (x - knots[i]) / (knots[i + 1] - knots[i])
    return i, t


def _lerp_rows(values: np.ndarray, x: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """values: (rows, len(knots)); returns (rows, len(x)), piecewise-linear in x with extension."""
    if len(knots) == 1:
        return np.repeat(values[:, :1], len(x), axis=1)
    i, t = _segments(x, knots)
    return values[:, i] + t * (values[:, i + 1] - values[:, i])


@dataclass(frozen=True)
class GridCurve:
    """Monotone log-log interpolation through measured seconds[context][n] (all > 0)."""

    ns: tuple[float, ...]
    contexts: tuple[float, ...]
    seconds: tuple[tuple[float, ...], ...]  # one row per context, one value per N

    def evaluate(self, n, c) -> np.ndarray:
        n, c = _broadcast(n, c)
        flat_n, flat_c = n.ravel(), c.ravel()
        log_t = portable_log(np.asarray(self.seconds, dtype=float))  # portable_*: the same bits on every CPU
        rows = _lerp_rows(log_t, portable_log(np.maximum(flat_n, 1e-300)), portable_log(np.asarray(self.ns)))
        if len(self.contexts) == 1:
            out = rows[0]
        else:
            i, t = _segments(portable_log1p(flat_c), portable_log1p(np.asarray(self.contexts)))
            cols = np.arange(len(flat_n))
            out = rows[i, cols] + t * (rows[i + 1, cols] - rows[i, cols])
        return portable_exp(out).reshape(n.shape)

    def t_step(self, c) -> np.ndarray:
        return self.evaluate(np.ones_like(np.asarray(c, dtype=float)), c)

    def to_record(self) -> dict:
        return {"kind": "grid", "ns": list(self.ns), "contexts": list(self.contexts),
                "seconds": [list(row) for row in self.seconds]}


@dataclass(frozen=True)
class StepSplit:
    """A decode run's cost split (LatencyModel.step_costs): per profiled context, the first step's
    overhead and the steady step, fitted on the N <= max_n of an interpolated T_ar."""

    contexts: tuple[float, ...]
    overhead: tuple[float, ...]
    steady: tuple[float, ...]
    max_n: float

    def evaluate(self, c) -> tuple[np.ndarray, np.ndarray]:
        c = np.asarray(c, dtype=float)
        flat = c.ravel()
        if len(self.contexts) == 1:
            return np.full(c.shape, self.overhead[0]), np.full(c.shape, self.steady[0])
        # the portable functions (analysis.stats): the same bits on every CPU, as in GridCurve.evaluate
        x, knots = portable_log1p(flat), portable_log1p(np.asarray(self.contexts))
        steady = portable_exp(_lerp_rows(portable_log(np.asarray([self.steady])), x, knots)[0])
        overhead = np.interp(x, knots, np.asarray(self.overhead))  # held at the end values outside
        return overhead.reshape(c.shape), steady.reshape(c.shape)


def fit_step_split(curve: GridCurve, max_n: int) -> StepSplit:
    """T_ar(N, c) = o + N * s at each profiled context, over the curve's N <= max_n (see
    LatencyModel.step_costs)."""
    ns = np.asarray([n for n in curve.ns if n <= max_n], dtype=float)
    if len(ns) < 2:
        raise ParamsError(f"steady decode step: the profile has {len(ns)} N <= {max_n} (profiled N: "
                          f"{[int(n) for n in curve.ns]}); raise bounds.steady_max_n to include at least two")
    fits = [_overhead_and_step(ns.tolist(), curve.evaluate(ns, np.full(ns.shape, c)).tolist()) for c in curve.contexts]
    return StepSplit(tuple(curve.contexts), tuple(f[0] for f in fits), tuple(f[1] for f in fits), float(max_n))


def _overhead_and_step(ns: list[float], ys: list[float]) -> tuple[float, float]:
    """o, s >= 0 minimising sum(((o + n s) - y) / y)^2: the 2x2 normal equations in plain floats with
    math.fsum (no BLAS: the same bits on every CPU, so the bounds tables are byte-identical across
    machines), and the one-term fit when the unconstrained optimum has a negative term."""
    a = [1.0 / y for y in ys]  # d(residual)/do
    b = [n / y for n, y in zip(ns, ys)]  # d(residual)/ds
    saa, sbb = math.fsum(x * x for x in a), math.fsum(x * x for x in b)
    sab = math.fsum(x * z for x, z in zip(a, b))
    sa, sb = math.fsum(a), math.fsum(b)
    det = saa * sbb - sab * sab
    if det > 0:
        o, s = (sa * sbb - sb * sab) / det, (saa * sb - sab * sa) / det
        if o >= 0 and s >= 0:
            return o, s
    step_only, overhead_only = (0.0, sb / sbb), (sa / saa, 0.0)
    loss = lambda o, s: math.fsum((o * x + s * z - 1.0) ** 2 for x, z in zip(a, b))  # noqa: E731
    return min(step_only, overhead_only, key=lambda f: loss(*f))


@dataclass(frozen=True)
class QuadraticAR:
    a: float
    b: float

    def evaluate(self, n, c) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return self.a * n + self.b * (n * c + n * (n - 1) / 2)

    def t_step(self, c):
        return self.a + self.b * c

    def to_record(self) -> dict:
        return {"kind": "quadratic_ar", "terms": {"a": self.a, "b": self.b}}


@dataclass(frozen=True)
class QuadraticPrefill:
    p0: float
    p1: float
    p2: float
    p3: float

    def evaluate(self, n, c) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        # the bounds' committed tables (and tests/golden/bounds_fixed_mode.json) depend on this order of operations
        return self.p0 + self.p1 * n + self.p2 * n * c + self.p3 * n * n

    def to_record(self) -> dict:
        return {"kind": "quadratic_prefill", "terms": {k: getattr(self, k) for k in PREFILL_TERMS}}


@dataclass(frozen=True)
class RooflinePrefill:
    p0: float
    w: float
    k1: float
    k2: float

    def evaluate(self, n, c) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return self.p0 + np.maximum(self.w, self.k1 * n + self.k2 * n * c)

    def to_record(self) -> dict:
        return {"kind": "roofline_prefill", "terms": {k: getattr(self, k) for k in ROOFLINE_TERMS}}


def paper_speedup(n) -> np.ndarray:
    """The abstract's two points joined by a line in log-log (no range check)."""
    (n0, s0), (n1, s1) = PAPER_POINTS
    exponent = math.log(s1 / s0) / math.log(n1 / n0)
    return s0 * portable_power(np.asarray(n, dtype=float) / n0, exponent)


@dataclass(frozen=True)
class PaperAR:
    def evaluate(self, n, c) -> np.ndarray:
        n, _ = _broadcast(n, c)
        return n.copy()

    def t_step(self, c) -> np.ndarray:
        return np.ones_like(np.asarray(c, dtype=float))

    def to_record(self) -> dict:
        return {"kind": "paper_ar"}


@dataclass(frozen=True)
class PaperPrefill:
    def evaluate(self, n, c) -> np.ndarray:
        n, _ = _broadcast(n, c)
        return n / paper_speedup(np.maximum(n, 1e-300))

    def to_record(self) -> dict:
        return {"kind": "paper_prefill", "points": [list(p) for p in PAPER_POINTS]}


def curve_from_record(record: dict):
    kind = record.get("kind")
    if kind == "grid":
        return GridCurve(tuple(record["ns"]), tuple(record["contexts"]), tuple(tuple(r) for r in record["seconds"]))
    if kind == "quadratic_ar":
        return QuadraticAR(**record["terms"])
    if kind == "quadratic_prefill":
        return QuadraticPrefill(**record["terms"])
    if kind == "roofline_prefill":
        return RooflinePrefill(**record["terms"])
    if kind == "paper_ar":
        return PaperAR()
    if kind == "paper_prefill":
        if [tuple(p) for p in record["points"]] != [tuple(p) for p in PAPER_POINTS]:
            raise ParamsError(f"paper kernel record has points {record['points']}, expected {PAPER_POINTS}")
        return PaperPrefill()
    raise ParamsError(f"latency model record: unknown curve kind {kind!r}")


# ---------------------------------------------------------------- the model

@dataclass(frozen=True)
class LatencyModel:
    """T_ar, T_prefill and t_step for one key, with its profiled range and per-repeat curves."""

    key: ModelKey
    form: str
    ar: object
    prefill: object
    ns: tuple[float, float]                     # profiled N range (min, max)
    contexts: tuple[float, ...] | None          # profiled contexts; None: context-free
    repeats: tuple[tuple[object, object], ...] = ()
    diagnostics: dict = field(default_factory=dict, compare=False)
    floor: PrefillFloor | None = None           # the device's prefill floor (a datasheet roof), where known

    # -- range
    def _n_out(self, n: np.ndarray) -> np.ndarray:
        return (n > 0) & ((n < self.ns[0]) | (n > self.ns[1]))

    def _c_out(self, c: np.ndarray) -> np.ndarray:
        if self.contexts is None:
            return np.zeros(c.shape, dtype=bool)
        return (c < min(self.contexts)) | (c > max(self.contexts))

    def _range_text(self) -> str:
        c = "any c" if self.contexts is None else (
            f"c = {self.contexts[0]:g}" if len(self.contexts) == 1 else f"c in [{min(self.contexts):g}, {max(self.contexts):g}]")
        return f"N in [{self.ns[0]:g}, {self.ns[1]:g}], {c}"

    def _checked(self, what: str, seconds, n: np.ndarray | None, c: np.ndarray, extrapolate: bool) -> Evaluation:
        past_n, held = None if n is None else self._n_out(n), self._c_out(c)
        out = held if n is None else (past_n | held)
        if out.any() and not extrapolate:
            k = int(np.flatnonzero(out.ravel())[0])
            at = (f"N={n.ravel()[k]:g}, " if n is not None else "") + f"c={c.ravel()[k]:g}"
            raise ParamsError(
                f"{what}({at}) is outside the profiled range of {self.key.label()} ({self._range_text()}); "
                f"{int(out.sum())} value(s) out of range; set extrapolate to allow it (rows are then marked)")
        return Evaluation(np.asarray(seconds, dtype=float).reshape(out.shape), out, past_n, held)

    def _last_segment(self) -> tuple[float, float] | None:
        """The last profiled segment's two N (the rule past the profiled N extends it); None for a parametric form."""
        if isinstance(self.prefill, GridCurve) and len(self.prefill.ns) > 1:
            return float(self.prefill.ns[-2]), float(self.prefill.ns[-1])
        if isinstance(self.prefill, PaperPrefill):
            return float(PAPER_POINTS[0][0]), float(PAPER_POINTS[1][0])
        return None

    def _past_n(self, seconds: np.ndarray, n: np.ndarray, c: np.ndarray, rule: str) -> np.ndarray:
        """`seconds` under the rule past the profiled N (module docstring); `loglog` leaves them as they are."""
        if rule == LOGLOG:
            return seconds
        if rule not in PAST_N_RULES:
            raise ParamsError(f"bounds.prefill_past_n must be one of {PAST_N_RULES}, got {rule!r}")
        out = np.array(seconds, dtype=float)
        beyond, segment = (n > self.ns[1]), self._last_segment()
        if segment is not None and beyond.any():
            lo, hi = segment
            at = c[beyond]
            top = self.prefill.evaluate(np.full(at.shape, hi), at)
            slope = np.maximum(top - self.prefill.evaluate(np.full(at.shape, lo), at), 0.0) / (hi - lo)
            extended = top + (n[beyond] - hi) * slope
            if rule == LINEAR:
                extended = np.maximum(extended, top * n[beyond] / hi)
            out[beyond] = np.maximum(out[beyond], extended)
        flagged = (n > 0) & (self._n_out(n) | self._c_out(c))
        if self.floor is not None and flagged.any():
            out[flagged] = np.maximum(out[flagged], self.floor.seconds(n[flagged], c[flagged]))
        return out

    # -- evaluation
    def t_prefill(self, n, c, extrapolate: bool = False, past_n: str = LOGLOG) -> Evaluation:
        """T_prefill(n, c); past the profiled N (and at an extrapolated c, the floor) under the rule `past_n`
        (module docstring: every pricing call passes params bounds.prefill_past_n)."""
        n, c = _broadcast(n, c)
        seconds = np.where(n > 0, self.prefill.evaluate(np.maximum(n, 0), c), 0.0)
        return self._checked("T_prefill", self._past_n(seconds, n, c, past_n), n, c, extrapolate)

    def t_ar(self, n, c, extrapolate: bool = False) -> Evaluation:
        n, c = _broadcast(n, c)
        seconds = np.where(n > 0, self.ar.evaluate(np.maximum(n, 0), c), 0.0)
        return self._checked("T_ar", seconds, n, c, extrapolate)

    def t_step(self, c, extrapolate: bool = False) -> Evaluation:
        c = np.asarray(c, dtype=float)
        seconds = np.broadcast_to(np.asarray(self.ar.t_step(c), dtype=float), c.shape)
        one = np.ones(c.shape)
        # t_step is T_ar at N = 1 for interp, so N = 1 must be profiled too
        return self._checked("t_step", seconds, one if self.form == "interp" else None, c, extrapolate)

    def step_costs(self, c, steady_max_n: int, extrapolate: bool = False) -> tuple[Evaluation, Evaluation]:
        """(first-step overhead o(c), steady step s(c)) of a decode run at context c: a run of N steps
        costs o(c) + the sum of s over its contexts, where t_step(c) = T_ar(1, c) = o(c) + s(c).

        Evidence (reports/tables/kernel_ar_steps, the raw per-step segments of every H200 AR run): the
        first step of each profiled run is the slow one and every later step is flat, e.g. 1.5B
        static_compiled c=256: step 1 3.76 ms, steps 2..512 2.445-2.449 ms in both repeats (7B: 6.94 vs
        5.64 ms); each profiled run starts after a sync on a freshly rewound cache, which is where a
        program's decode run starts after a copy's prefill. So the overhead is paid once per decode run
        (a regeneration: once; a program: once per generated span that follows a prefill), the steady
        step per token. `interp`: o and s by least squares (relative error, o, s >= 0) of
        T_ar(N, c) = o + N * s over the profiled N <= steady_max_n at each profiled context (steady_max_n
        keeps out the later per-step shifts kernel_ar_steps flags), s interpolated like T_ar (log-log in
        1 + c, end segments extended), o linear in log(1 + c) and held at its end values outside the
        profiled contexts (such c are flagged). Parametric and paper forms have no first-step term
        (T_ar has no intercept): o = 0 and s = their t_step."""
        c = np.asarray(c, dtype=float)
        if isinstance(self.ar, GridCurve):
            overhead, steady = fit_step_split(self.ar, steady_max_n).evaluate(c)
        else:
            steady = np.broadcast_to(np.asarray(self.ar.t_step(c), dtype=float), c.shape)
            overhead = np.zeros(c.shape)
        one = np.ones(c.shape) if self.form == "interp" else None
        return (self._checked("first-step overhead", overhead, one, c, extrapolate),
                self._checked("steady step", steady, one, c, extrapolate))

    def prices(self, step_contexts, prefill_n, prefill_contexts, step_cost: str, steady_max_n: int,
               past_n: str) -> Prices:
        """What the bound prices a program with, in one call, extrapolation allowed (each value flagged):
        the decode step at `step_contexts` under `step_cost` (STEADY: the first-step overhead o(c) and
        the steady step s(c) of `step_costs`; FIRST_STEP, v1: o = 0 and every token at t_step(c) =
        T_ar(1, c)) and T_prefill(prefill_n, prefill_contexts) under the rule past the profiled N `past_n`."""
        if step_cost == FIRST_STEP:
            step = self.t_step(step_contexts, extrapolate=True)
            overhead = Evaluation(np.zeros(step.seconds.shape), np.zeros(step.seconds.shape, dtype=bool))
        elif step_cost == STEADY:
            overhead, step = self.step_costs(step_contexts, steady_max_n, extrapolate=True)
        else:
            raise ParamsError(f"step_cost must be one of {STEP_COSTS}, got {step_cost!r}")
        return Prices(overhead, step, self.t_prefill(prefill_n, prefill_contexts, extrapolate=True, past_n=past_n))

    def speedup(self, n, c, extrapolate: bool = False) -> Evaluation:
        """T_ar(N, c) / T_prefill(N, c), for N > 0."""
        ar, pre = self.t_ar(n, c, extrapolate), self.t_prefill(n, c, extrapolate)
        return Evaluation(ar.seconds / pre.seconds, ar.extrapolated | pre.extrapolated)

    # -- kernel repeats
    def repeat_models(self) -> list[LatencyModel]:
        """One model per kernel repeat (same range); empty when the repeats are not known."""
        return [replace(self, ar=ar, prefill=pre, repeats=(), diagnostics={}) for ar, pre in self.repeats]

    # -- serialization
    def to_record(self) -> dict:
        return {
            **{k: getattr(self.key, k) for k in KEY_FIELDS},
            **({} if self.key.source == FIT_SOURCE else {"source": self.key.source}),
            **({} if self.key.prefill == "eager" else {"prefill_kind": self.key.prefill}),
            "form": self.form,
            "n_range": list(self.ns),
            "contexts": None if self.contexts is None else list(self.contexts),
            "ar": self.ar.to_record(),
            "prefill": self.prefill.to_record(),
            "repeats": [{"ar": ar.to_record(), "prefill": pre.to_record()} for ar, pre in self.repeats],
            "diagnostics": self.diagnostics,
            **({} if self.floor is None else {"prefill_floor": self.floor.to_record()}),
        }

    @classmethod
    def from_record(cls, record: dict) -> LatencyModel:
        missing = [k for k in (*KEY_FIELDS, "form", "n_range", "contexts", "ar", "prefill") if k not in record]
        if missing:
            raise ParamsError(f"latency model record lacks {missing}")
        contexts = record["contexts"]
        return cls(
            key=ModelKey(*(record[k] for k in KEY_FIELDS), source=record.get("source", FIT_SOURCE),
                         prefill=record.get("prefill_kind", "eager")), form=record["form"],
            ar=curve_from_record(record["ar"]), prefill=curve_from_record(record["prefill"]),
            ns=tuple(record["n_range"]), contexts=None if contexts is None else tuple(contexts),
            repeats=tuple((curve_from_record(r["ar"]), curve_from_record(r["prefill"])) for r in record.get("repeats", [])),
            diagnostics=record.get("diagnostics", {}), floor=PrefillFloor.from_record(record.get("prefill_floor")),
        )


def paper_model() -> LatencyModel:
    """The `paper` kernel source (see the module docstring): dimensionless, N in [8, 512], any c."""
    return LatencyModel(key=PAPER_KEY, form=PAPER_FORM, ar=PaperAR(), prefill=PaperPrefill(),
                        ns=(float(PAPER_POINTS[0][0]), float(PAPER_POINTS[1][0])), contexts=None,
                        diagnostics={"notes": [PAPER_NOTE]})

# ---------------------------------------------------------------- documents

def to_document(models: Sequence[LatencyModel], source: str, environment: list[dict]) -> dict:
    """The JSON document the fit stage writes (reports/kernels/latency_model.json)."""
    return {"schema": SCHEMA, "source": source, "environment": environment,
            "forms": sorted({m.form for m in models}), "formulas": FORMULAS,
            "models": [m.to_record() for m in models]}


def from_document(document: dict) -> list[LatencyModel]:
    """Models from a document written by `to_document`."""
    if document.get("schema") == SCHEMA:
        return [LatencyModel.from_record(r) for r in document["models"]]
    raise ParamsError(f"latency model document: unknown schema {document.get('schema')!r}")


def select_model(models: Sequence[LatencyModel], model: str, dtype: str, device: str, baseline: str,
                 form: str | None = None, source: str = FIT_SOURCE, prefill: str = "eager") -> LatencyModel:
    """The model for this key (and form, when the document holds several forms per key)."""
    matches = [m for m in models if (m.key.model, m.key.dtype, m.key.device, m.key.baseline) == (model, dtype, device, baseline)
               and m.key.source == source and m.key.prefill == prefill and (form is None or m.form == form)]
    if len(matches) == 1:
        return matches[0]
    have = sorted(f"{m.key.model}/{m.key.dtype}/{m.key.device}/{m.key.baseline} ({m.form})" for m in models)
    if not matches:
        raise ParamsError(f"no latency model for {model}/{dtype}/{device}/{baseline}"
                          f"{'' if form is None else f' of form {form}'}; have: {have}")
    raise ParamsError(f"several latency models for {model}/{dtype}/{device}/{baseline}; name the form; have: {have}")

