"""The e2e stage's prediction: a latency curve measured in each case's own unit, right after its
methods (so the curve and the timings it predicts share the same minutes and the same machine load: a
curve measured apart from them priced another machine state), fitted in the form params e2e.fit names, and
every method's forward log priced under it.

The curve: T_prefill(N) over params e2e.prefill_grid up to the smallest grid size that covers the
case's largest forward, and T_ar(N) over e2e.ar_grid up to e2e.ar_steps, at the case's shortest prompt
and its longest context (so every forward's context lies between; others are flagged extrapolated).

The price (`price_forwards`) is the bounds' own (analysis.bounds.case_cost under
analysis.bounds.log_cost_settings: bounds.step_cost and bounds.steady_max_n from params): the log is
read as a program whose ops are its forwards, a forward of q > 1 tokens a copy (a q-token prefill at its
context, committing its emitted tokens) and a q = 1 forward a one-token gen (a decode step, plus the
first-step overhead once per decode run: a run starts after the prompt's prefill or after any q > 1
forward); contexts run (prompt + tokens committed so far), and a forward outside the curve is counted,
never refused. For AR and the ideal programs this is the bounds' regeneration and program cost
(tests/kernels_profile/e2e/test_e2e_predict.py); with directives decoded the log also counts the
directive tokens in the context, as the executor's cache does (the bound leaves them out of c).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from analysis.bounds import CostSettings, SpanOp, case_cost
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


@dataclass(frozen=True)
class Priced:
    seconds: float
    extrapolated: int  # forwards priced outside the curve's measured range


def price_forwards(model: LatencyModel, cost: CostSettings, prompt_tokens: int, new_tokens: Sequence[int],
                   emitted: Sequence[int]) -> Priced:
    """A forward log's seconds under `model`, priced by the bounds (`cost`: analysis.bounds.log_cost_settings;
    the module docstring says how a log is read as a program)."""
    if len(new_tokens) != len(emitted):
        raise ParamsError(f"e2e: a forward log has {len(new_tokens)} query lengths and {len(emitted)} emitted counts")
    if not len(new_tokens):
        return Priced(0.0, 0)
    ops = []
    for q, e in zip(new_tokens, emitted):
        if q == 1 and e != 1:
            raise ParamsError(f"e2e: a one-token forward logged {e} emitted tokens (a decode step commits one)")
        ops.append(SpanOp("gen", 1, 0, 0) if q == 1 else SpanOp("copy", int(e), int(q), 0))
    priced = case_cost(ops, model, cost, prompt_tokens=prompt_tokens)
    return Priced(priced.program_ideal, priced.extrapolated_spans)
