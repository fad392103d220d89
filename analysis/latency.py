"""The latency model: T_ar(N, c), T_prefill(N, c) and t_step(c), its fit, and its JSON record.

This module is the one owner of the latency model (pure, torch-free). The profiler
(kernels_profile.profiler) writes raw timings; the fit stage turns them into models here and writes
them as one JSON document; the bounds stage and the end-to-end prediction rebuild the models from it.

Quantities (seconds), for one (model, weights, dtype, device, AR baseline):

    T_ar(N, c)       N decode steps starting from a KV cache of c tokens
    T_prefill(N, c)  one forward of N tokens on a KV cache of c tokens (what a copy costs)
    t_step(c)        one decode step at context c

Summaries. `summarize` gives median, quartiles and IQR over repeats per grid point;
`speedup_table` gives Speedup(N, c) = T_ar / T_prefill per repeat (repeat r of the AR loop over
repeat r of the prefill), its median and IQR over repeats, and which AR baseline is strongest.

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
result's `extrapolated` array marks those values. `interp` extends the last (or first) log-log
segment; with one context, a c other than the profiled one is held at that context (flagged).
N = 0 (a copy that forwards nothing) costs 0 and is always in range.

Kernel uncertainty. A model fitted from raw timings with a `repeat` column also carries one curve
pair per repeat (`repeat_models()`), so a bootstrap can resample kernel repeats as well as cases.

Hold-out check. For every form, refit without the held-out N values and predict them; the worst
relative error is in the diagnostics (`holdout_max_rel_error`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.stats import portable_exp, portable_log, portable_log1p, portable_power, quartiles

GROUP = ["model", "weights", "dtype", "device"]
KEY_FIELDS = (*GROUP, "baseline")
FORMS = ("interp", "quadratic", "roofline")
ONE_CONTEXT_RULES = ("drop", "keep")
SCHEMA = "copydecode.latency_model/2"
AR_TERMS = ("a", "b")
PREFILL_TERMS = ("p0", "p1", "p2", "p3")
ROOFLINE_TERMS = ("p0", "w", "k1", "k2")


def paper_kernel_points(path: Path = Path(__file__).parent / "data" / "paper_claims.json") -> tuple[tuple[int, float], ...]:
    """The paper's kernel points (N, speedup), read from paper_claims.json, their one home."""
    import json

    return tuple((int(n), float(s)) for n, s in json.loads(Path(path).read_text())["kernel_speedup"]["points"])


PAPER_POINTS = paper_kernel_points()
PAPER_NOTE = "speedup through the paper abstract's points (6.8x at N=8, 303x at N=512), log-log line; unit decode step"
FORMULAS = {
    "interp": "T(N, c): bilinear in (log N, log(1 + c)) through the running-max medians; t_step(c) = T_ar(1, c)",
    "quadratic": "T_ar = a*N + b*(N*c + N*(N-1)/2); t_step = a + b*c; T_prefill = p0 + p1*N + p2*N*c + p3*N^2",
    "roofline": "T_ar = a*N + b*(N*c + N*(N-1)/2); t_step = a + b*c; T_prefill = p0 + max(w, k1*N + k2*N*c)",
    "paper": "speedup(N) = 6.8*(N/8)^(log(303/6.8)/log(64)); t_step = 1; T_ar = N; T_prefill = N / speedup(N)",
}


# ---------------------------------------------------------------- summaries (moved from kernels_profile)

PREFILL_KINDS = ("eager", "compiled")  # a prefill row's `baseline`: dynamic cache, or static shapes through torch.compile


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


# ---------------------------------------------------------------- evaluation results

@dataclass(frozen=True)
class Evaluation:
    """Values of a latency function and, per value, whether it lies outside the profiled range."""

    seconds: np.ndarray
    extrapolated: np.ndarray  # bool, same shape

    @property
    def n_extrapolated(self) -> int:
        return int(self.extrapolated.sum())


FIT_SOURCE = "fit"          # this run's own profile (kernels.fit.raw entries without another source)
PAPER_SOURCE = "paper"      # the abstract's curve; not a fit
# (the names' one spelling; analysis.kernel_sources formats, parses and selects them and re-exports these two)


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
        out = self._c_out(c) if n is None else (self._n_out(n) | self._c_out(c))
        if out.any() and not extrapolate:
            k = int(np.flatnonzero(out.ravel())[0])
            at = (f"N={n.ravel()[k]:g}, " if n is not None else "") + f"c={c.ravel()[k]:g}"
            raise ParamsError(
                f"{what}({at}) is outside the profiled range of {self.key.label()} ({self._range_text()}); "
                f"{int(out.sum())} value(s) out of range; set extrapolate to allow it (rows are then marked)")
        return Evaluation(np.asarray(seconds, dtype=float).reshape(out.shape), out)

    # -- evaluation
    def t_prefill(self, n, c, extrapolate: bool = False) -> Evaluation:
        n, c = _broadcast(n, c)
        seconds = np.where(n > 0, self.prefill.evaluate(np.maximum(n, 0), c), 0.0)
        return self._checked("T_prefill", seconds, n, c, extrapolate)

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
            diagnostics=record.get("diagnostics", {}),
        )


def paper_model() -> LatencyModel:
    """The `paper` kernel source (see the module docstring): dimensionless, N in [8, 512], any c."""
    return LatencyModel(key=PAPER_KEY, form="paper", ar=PaperAR(), prefill=PaperPrefill(),
                        ns=(float(PAPER_POINTS[0][0]), float(PAPER_POINTS[1][0])), contexts=None,
                        diagnostics={"notes": [PAPER_NOTE]})


# ---------------------------------------------------------------- fitting

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


# ---------------------------------------------------------------- documents

def to_document(models: Sequence[LatencyModel], source: str, environment: list[dict]) -> dict:
    """The JSON document the fit stage writes (reports/kernels/latency_model.json)."""
    return {"schema": SCHEMA, "source": source, "environment": environment,
            "forms": sorted({m.form for m in models}), "formulas": FORMULAS,
            "models": [m.to_record() for m in models]}


def from_legacy_fit(fit: dict) -> LatencyModel:
    """A v1 fit record as written before schema 2 (`fits[i]` with ar/prefill terms): a quadratic model."""
    ns, contexts = fit.get("ns") or [], fit.get("contexts") or []
    if not ns or not contexts:
        raise ParamsError(f"legacy latency fit for {fit.get('model')}/{fit.get('baseline')} lacks ns or contexts")
    diagnostics = {k: {kk: vv for kk, vv in fit[k].items() if kk != "terms"} for k in ("ar", "prefill")}
    return LatencyModel(
        key=ModelKey(*(fit[k] for k in KEY_FIELDS)), form="quadratic",
        ar=QuadraticAR(**fit["ar"]["terms"]), prefill=QuadraticPrefill(**fit["prefill"]["terms"]),
        ns=(float(min(ns)), float(max(ns))), contexts=tuple(float(c) for c in contexts),
        diagnostics={**diagnostics, "notes": ["legacy v1 record (schema 1): no per-repeat curves"]},
    )


def from_document(document: dict) -> list[LatencyModel]:
    """Models from a document written by `to_document`, or from a schema-1 document (`fits`)."""
    if document.get("schema") == SCHEMA:
        return [LatencyModel.from_record(r) for r in document["models"]]
    if "fits" in document:
        return [from_legacy_fit(f) for f in document["fits"]]
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


# ---------------------------------------------------------------- the roofline: physical floors and the ceiling ratio

BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2}
DEVICES_FILE = "devices.json"


def copy_speedup_ceiling(n: int, stream_gbps: float, gflops: float, bytes_per_param: float) -> float:
    """The roofline bound on T_ar(N) / T_prefill(N) for a dense model whose weights dominate traffic.

    A decode step reads every weight once for 2 FLOPs per weight (intensity 2 / bytes_per_param
    FLOP/byte), so it is memory-bound: t_step >= W / bandwidth. A prefill of N tokens reads the
    weights once for 2N FLOPs per weight: t_prefill >= max(W / bandwidth, 2 N P / flops). When both run
    at their floors the ratio is N while prefill stays memory-bound and saturates at the machine's
    ridge point times bytes_per_param / 2 beyond it. A loop slower than its floor (host overhead, an
    eager decode step) can measure a larger ratio than this: the ceiling holds for floor-bound kernels."""
    if n < 1 or stream_gbps <= 0 or gflops <= 0 or bytes_per_param <= 0:
        raise ParamsError(f"copy_speedup_ceiling needs positive inputs, got n={n}, "
                          f"stream_gbps={stream_gbps}, gflops={gflops}, bytes_per_param={bytes_per_param}")
    ridge = gflops / stream_gbps  # FLOP per byte
    return min(float(n), ridge * bytes_per_param / 2)


@dataclass(frozen=True)
class Roof:
    """One device's two ceilings, and where the figures come from (a datasheet or a measurement)."""

    device: str
    bandwidth_gbps: float
    gflops: float
    source: str


@dataclass(frozen=True)
class WeightCount:
    """Parameters of a dense decoder, those a decode step must read (the embedding table is read one
    row per token unless it is tied to the output head), and what a prefill computes with.

    A prefill token passes through the layers' weights (`layers`: every weight but the embedding and
    the head; the embedding is a gather, no FLOPs), the profiler's prefill keeps ONE logit
    (`logits_to_keep=1`), so the LM head (`head`: vocab x hidden) runs once per prefill, and
    attention costs 4 FLOPs per (query token, key, head dimension) (`attention_width`: layers x
    query heads x head_dim; QK^T and AV). A count built without the breakdown (`layers` None) charges
    every weight per token and no attention: an over-count, kept only for hand-made counts."""

    total: int
    read_per_step: int
    layers: int | None = None   # weights a prefill token multiplies with (all layers and the final norm)
    head: int = 0               # LM head weights, applied to the kept logits only
    attention_width: int = 0    # layers * query heads * head_dim


def decoder_weights(config: dict) -> WeightCount:
    """Weight count of a Qwen2/Llama-style decoder from its published config (q/k/v biases when
    `model_type` is qwen2; norms included; rotary and buffers are not weights)."""
    try:
        h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
        heads, vocab = config["num_attention_heads"], config["vocab_size"]
        kv_heads = config.get("num_key_value_heads", heads)
    except KeyError as exc:
        raise ParamsError(f"model config lacks {exc.args[0]!r}; cannot count its weights") from exc
    head_dim = config.get("head_dim") or h // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    bias = (q + 2 * kv) if config.get("model_type") == "qwen2" else 0
    per_layer = h * q + 2 * h * kv + q * h + bias + 3 * h * inter + 2 * h
    embed = vocab * h
    tied = bool(config.get("tie_word_embeddings", False))
    total = layers * per_layer + h + embed + (0 if tied else embed)
    return WeightCount(total, total - (0 if tied else embed), layers=layers * per_layer + h, head=embed,
                       attention_width=layers * q)


PREFILL_LOGITS_KEPT = 1  # the profiler's prefill asks for the last position's logits only (logits_to_keep=1)


def prefill_flops(weights: WeightCount, n, c=0, logits_kept: int = PREFILL_LOGITS_KEPT):
    """FLOPs of one prefill of N tokens on a KV cache of c tokens: 2 per layer weight per token,
    2 per head weight per kept logit, and causal attention (token i of the N attends to c + i + 1
    keys: 4 x attention_width FLOPs per key). Without a breakdown (`layers` None): 2 x total x N."""
    n, c = _broadcast(n, c)
    if weights.layers is None:
        return 2.0 * weights.total * n
    keys = n * c + n * (n + 1) / 2
    head = np.where(n > 0, 2.0 * weights.head * logits_kept, 0.0)
    return 2.0 * weights.layers * n + head + 4.0 * weights.attention_width * keys


def step_floor_s(weights: WeightCount, roof: Roof, bytes_per_param: float) -> float:
    """The fastest a decode step can be: every weight read once at the device's bandwidth."""
    return weights.read_per_step * bytes_per_param / (roof.bandwidth_gbps * 1e9)


def prefill_floor_s(weights: WeightCount, n, roof: Roof, bytes_per_param: float, c=0):
    """The fastest a prefill of N tokens on c cached tokens can be: the weights read once, or its
    FLOPs (`prefill_flops`: the layers for N tokens, the head for the one kept logit, attention over
    the cache) at peak throughput, whichever is slower."""
    return np.maximum(step_floor_s(weights, roof, bytes_per_param), prefill_flops(weights, n, c) / (roof.gflops * 1e9))


def device_roofs(document: dict) -> list[tuple[str, Roof]]:
    """(substring of the device name, Roof) for every datasheet entry of analysis/data/devices.json."""
    roofs = []
    for name, entry in document.items():
        if name.startswith("_"):
            continue
        try:
            roofs.append((entry["match"], Roof(name, float(entry["hbm_gbps"]), float(entry["bf16_tflops"]) * 1000,
                                               f"datasheet: {entry['source']}")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParamsError(f"{DEVICES_FILE}: entry {name!r} lacks match/hbm_gbps/bf16_tflops/source ({exc})") from exc
    return roofs


def device_roof(device_name: str, document: dict) -> Roof | None:
    """The datasheet roof of a GPU by its torch device name; None when the file does not know it."""
    return next((roof for match, roof in device_roofs(document) if match in device_name), None)


def roofline_table(speedups: pl.DataFrame, weights: dict[str, WeightCount], roofs: dict[str, Roof]) -> pl.DataFrame:
    """Each measured (kernel source, context, N) beside its physical floors: the ceiling ratio when
    both kernels run at their floors, and the share of each floor the measurement reached
    (floor / measured: 1 means at the floor). `roofs` maps kernel_source -> Roof; sources without a
    roof or a weight count are left out (the caller says so)."""
    rows = []
    for r in speedups.iter_rows(named=True):
        roof, count = roofs.get(r["kernel_source"]), weights.get(r["model"])
        if roof is None or count is None or r["dtype"] not in BYTES_PER_PARAM:
            continue
        bpp = BYTES_PER_PARAM[r["dtype"]]
        step, pre = step_floor_s(count, roof, bpp), float(prefill_floor_s(count, r["n"], roof, bpp, r["context"]))
        rows.append({
            "kernel_source": r["kernel_source"], "model": r["model"], "dtype": r["dtype"], "device": r["device"],
            "roof": roof.device, "roof_source": roof.source, "baseline": r["baseline"], "context": r["context"],
            "n": r["n"], "speedup": r["speedup"], "ceiling": r["n"] * step / pre,
            "ar_step_ms": r["t_ar"] / r["n"] * 1000, "step_floor_ms": step * 1000,
            "ar_share_of_floor": r["n"] * step / r["t_ar"],
            "prefill_ms": r["t_prefill"] * 1000, "prefill_floor_ms": pre * 1000,
            "prefill_share_of_floor": pre / r["t_prefill"],
        })
    return pl.DataFrame(rows) if rows else pl.DataFrame()


# ---------------------------------------------------------------- AR runs step by step

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
