"""The e2e stage's prediction: a latency curve measured in each case's own unit, right after its
methods (so the curve and the timings it predicts share the same minutes and the same machine load:
review D7), fitted in the form params e2e.fit names, and every method's forward log priced under it.

The curve: T_prefill(N) over params e2e.prefill_grid up to the smallest grid size that covers the
case's largest forward, and T_ar(N) over e2e.ar_grid up to e2e.ar_steps, at the case's shortest prompt
and its longest context (so every forward's context lies between; others are flagged extrapolated).

The price (`price_forwards`) follows the bounds' rules (analysis.bounds): a forward of q > 1 tokens is a
q-token prefill at its context; a q = 1 forward a decode step at the steady step cost, plus the
first-step overhead once per decode run (a run starts after the prompt's prefill or after any q > 1
forward); contexts run (prompt + tokens committed so far). For AR and the ideal programs this is the
bounds' own regeneration and program cost to the bit (tests/kernels_profile/e2e/test_e2e_predict.py);
with directives decoded the log also counts the directive tokens in the context, as the executor's
cache does (the bound leaves them out of c).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.latency.fit import FitOptions, fit_points
from analysis.latency.model import ModelKey
from kernels_profile.measure.profiler import CacheBench

STEADY_MAX_N = 8  # the steady step is fitted over T_ar(N) for N <= this (analysis.bounds.CostSettings' default)


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

    def model(self, name: str, form: str):
        """Its latency model (analysis.latency.model), fitted in `form` (params e2e.fit)."""
        key = ModelKey(name, "e2e", "e2e", "cpu", "eager")
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


def price_forwards(model, prompt_tokens: int, new_tokens: Sequence[int], emitted: Sequence[int]) -> Priced:
    """A forward log's seconds under `model` (see the module docstring for the rules)."""
    if len(new_tokens) != len(emitted):
        raise ParamsError(f"e2e: a forward log has {len(new_tokens)} query lengths and {len(emitted)} emitted counts")
    if not len(new_tokens):
        return Priced(0.0, 0)
    q = np.asarray(new_tokens, dtype=np.int64)
    contexts = prompt_tokens + np.concatenate([[0], np.cumsum(np.asarray(emitted, dtype=np.int64))[:-1]])
    step = q == 1
    starts = step & np.concatenate([[True], ~step[:-1]])
    first, steady = model.step_costs(contexts.astype(float), STEADY_MAX_N, extrapolate=True)
    prefill = model.t_prefill(np.where(step, 0, q), contexts.astype(float), extrapolate=True)
    seconds = np.where(step, steady.seconds + starts * first.seconds, prefill.seconds)
    flags = np.where(step, steady.extrapolated | (starts & first.extrapolated), prefill.extrapolated)
    return Priced(float(seconds.sum()), int(flags.sum()))
