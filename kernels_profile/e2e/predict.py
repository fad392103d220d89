"""The e2e stage's prediction: a latency curve measured in each case's own unit, right after its
methods (so the curve and the timings it predicts share the same minutes and the same machine load: a
curve measured apart from them priced another machine state), fitted in the form params e2e.fit names, and
every method's forward log priced under it.

The curve: T_prefill(N) over params e2e.prefill_grid up to the smallest grid size that covers the
case's largest forward, and T_ar(N) over e2e.ar_grid up to e2e.ar_steps, at the case's shortest prompt
and its longest context (so every forward's context lies between; others are flagged extrapolated).

Every method's forward log is priced by the suite's one price of a forward log
(analysis.rivals.pricing.price_log, the bounds' rules under analysis.bounds.log_cost_settings:
bounds.step_cost and bounds.steady_max_n from params; each forward at its own context, running from the
method's own prompt; a forward outside the curve counted, never refused); the log is read by
`Forwards.from_log` (a forward of q > 1 tokens a prefill, a one-token forward a decode step). With
directives decoded the log also counts the directive tokens in the context, as the executor's cache does.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.latency.fit import FitOptions, fit_points
from analysis.latency.model import LatencyModel, ModelKey
from kernels_profile.measure.profiler import CacheBench


@dataclass(frozen=True)
class CurvePoint:
    n: int
    context: int
    median: float


@dataclass(frozen=True)
class LatencyCurve:
    """T_prefill(N, c) and T_ar(N, c) medians over repeats, at `contexts`."""

    prefill: tuple[CurvePoint, ...]
    ar: tuple[CurvePoint, ...]
    contexts: tuple[int, ...]

    def to_json(self) -> dict:
        return {"prefill": [asdict(p) for p in self.prefill], "ar": [asdict(p) for p in self.ar],
                "contexts": list(self.contexts)}

    @classmethod
    def from_json(cls, record: dict) -> LatencyCurve:
        try:
            return cls(tuple(CurvePoint(int(p["n"]), int(p["context"]), float(p["median"])) for p in record["prefill"]),
                       tuple(CurvePoint(int(p["n"]), int(p["context"]), float(p["median"])) for p in record["ar"]),
                       tuple(int(c) for c in record["contexts"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParamsError(f"e2e: a latency curve record is malformed ({exc!r})") from exc

    def ar_points(self) -> list[int]:
        """The AR step counts it holds (the same at every context)."""
        return sorted({p.n for p in self.ar})

    def model(self, key: ModelKey, form: str) -> LatencyModel:
        """Its latency model (analysis.latency.model) under `key` (the model, weights, dtype and device the
        curve was measured on), fitted in `form` (params e2e.fit)."""
        frame = lambda points: pl.DataFrame([asdict(p) for p in points])  # noqa: E731
        return fit_points(frame(self.ar), frame(self.prefill), key, FitOptions(form).validate())


def ar_points(ar_grid: tuple[int, ...], ar_steps: int) -> list[int]:
    """The AR step counts a curve keeps: those of the grid up to `ar_steps`, and `ar_steps` itself."""
    return sorted(n for n in {*ar_grid, ar_steps} if n <= ar_steps)


def prefill_sizes(grid: tuple[int, ...], largest: int) -> tuple[int, ...]:
    """The grid's sizes up to the smallest one that covers `largest` (every size when none does)."""
    ordered = sorted(set(grid))
    cover = next((n for n in ordered if n >= largest), ordered[-1])
    return tuple(n for n in ordered if n <= cover)


def measure_curve(lm, sizes: tuple[int, ...], ar_grid: tuple[int, ...], ar_steps: int, contexts: tuple[int, ...],
                  repeats: int) -> LatencyCurve:
    """T_prefill(N) at `sizes` and T_ar(N) at `ar_points(ar_grid, ar_steps)` on this model at each
    context (medians over `repeats`, after a warm-up), on random token ids (kernels_profile.measure.profiler)."""
    prefill, ar = [], []
    for context in contexts:
        bench = CacheBench(lm, context, max(max(sizes), ar_steps), seed=0)
        for n in sizes:
            bench.prefill(n)  # warm-up
        bench.ar(min(ar_steps, 4), "eager")
        prefill += [CurvePoint(n, context, float(np.median([bench.prefill(n) for _ in range(repeats)]))) for n in sizes]
        runs = [bench.ar(ar_steps, "eager") for _ in range(repeats)]
        ar += [CurvePoint(n, context, float(np.median([r[n - 1] for r in runs]))) for n in ar_points(ar_grid, ar_steps)]
    return LatencyCurve(tuple(prefill), tuple(ar), tuple(contexts))
