"""The e2e stage's prediction: each model's latency curve, measured in the same run as the cases
(T_prefill(N) over params e2e.prefill_grid, T_ar(N) over e2e.ar_grid up to e2e.ar_steps, at the
sample's shortest and longest context), fitted in the form params e2e.fit names, and the closed-form
cost (analysis.bounds) of each case's own executor segments under it."""

from __future__ import annotations

import numpy as np
import polars as pl

from kernels_profile.e2e.methods import LEVELS, MethodPlan, cad_parts


def latency_curve(lm, grid: tuple[int, ...], ar_grid: tuple[int, ...], ar_steps: int, contexts: tuple[int, ...],
                  repeats: int) -> dict:
    """T_prefill(N) over `grid` and T_ar(N) at `ar_points(ar_grid, ar_steps)` (params e2e.prefill_grid,
    e2e.ar_grid, e2e.ar_steps), on this model at each context (the shortest prompt and the longest
    prompt + output of the sample, so every op's context lies between), measured in the same run as the
    cases (medians over repeats). The e2e prediction is composed from these alone, never from a case's
    own measured AR time."""
    from kernels_profile.measure.profiler import CacheBench

    prefill, ar = [], []
    for context in contexts:
        bench = CacheBench(lm, context, max(max(grid), ar_steps), seed=0)
        for n in grid:
            bench.prefill(n)  # warm-up
        bench.ar(min(ar_steps, 4), "eager")
        prefill += [{"n": n, "context": context, "median": float(np.median([bench.prefill(n) for _ in range(repeats)]))}
                    for n in grid]
        runs = [bench.ar(ar_steps, "eager") for _ in range(repeats)]
        ar += [{"n": n, "context": context, "median": float(np.median([r[n - 1] for r in runs]))}
               for n in ar_points(ar_grid, ar_steps)]
    return {"prefill": prefill, "ar": ar, "contexts": list(contexts)}


def ar_points(ar_grid: tuple[int, ...], ar_steps: int) -> list[int]:
    """The AR step counts a curve keeps: those of the grid up to `ar_steps`, and `ar_steps` itself."""
    return sorted(n for n in {*ar_grid, ar_steps} if n <= ar_steps)


def curve_ar_points(curve: dict) -> list[int]:
    """The AR step counts a measured curve holds (the same at every context)."""
    return sorted({row["n"] for row in curve["ar"]})


def curve_model(curve: dict, name: str, form: str):
    """The latency model (analysis.latency.model) of an e2e curve, fitted in `form` (params e2e.fit)."""
    from analysis.latency.model import ModelKey
    from analysis.latency.fit import FitOptions, fit_points

    key = ModelKey(name, "e2e", "e2e", "cpu", "eager")
    return fit_points(pl.DataFrame(curve["ar"]), pl.DataFrame(curve["prefill"]), key, FitOptions(form).validate())


def span_ops(segments) -> list:
    """The executor's segments as the bound's ops (copy: the tokens its prefill forwards)."""
    from analysis.bounds import SpanOp

    return [SpanOp(seg.kind, len(seg.ids), len(seg.ids) if seg.kind == "copy" else 0, seg.directive_tokens)
            for seg in segments]


def predicted_cost(segments, model, prompt_tokens: int):
    """The closed-form costs (analysis.bounds.case_cost) of the executor's own segments: regen, and
    program time without (ideal) and with (overhead) the directive tokens, each op costed at the
    context where it happens (prompt + output so far)."""
    from analysis.bounds import CostSettings, case_cost

    settings = CostSettings(context_mode="running", extrapolate=True)
    return case_cost(span_ops(segments), model, settings, prompt_tokens=prompt_tokens)


def method_predictions(segments: dict, model, prompt_tokens: int, plan: MethodPlan) -> list[dict]:
    """Per Copy-as-Decode method of the plan: predicted AR seconds (the bound's regen), predicted
    method seconds and their ratio, so that predictions aggregate over cases as the measurements do."""
    costs = {level: predicted_cost(segments[level], model, prompt_tokens) for level in LEVELS}
    records = []
    for method in plan.methods():
        parts = cad_parts(method)
        if parts is None:
            continue
        cost = costs[parts[0]]
        seconds = cost.program_overhead if parts[1] else cost.program_ideal
        records.append({"method": method, "predicted_ar_seconds": cost.regen, "predicted_seconds": seconds,
                        "predicted": cost.regen / seconds, "extrapolated_spans": cost.extrapolated_spans})
    return records
