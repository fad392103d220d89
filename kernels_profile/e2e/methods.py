"""End-to-end measurement of one case job on a real KV cache (the `e2e` stage orchestrates; the
methods are analysis.rivals.methods' typed values, each run the way its family's `executor` names:
`autoregressive`, `speculative` with the family's drafter, or `program`).

Per repeat, from each prompt's cached prefill: both prompts' prefills timed (time to first token, in a
seeded order), then every method of the job's plan once, back to back, in the seeded alternating order
of kernels_profile.measure.interleave (a method's speedup is AR seconds / its seconds within the same
repeat). AR and the drafters run on the rewrite prompt (what they would be given), Copy-as-Decode on
the program prompt. After the timings: the losslessness check on every case (the executor's final
logits against one-token steps over the same sequence, per level of params e2e.lossless_levels), then
the case's own latency curve (kernels_profile.e2e.predict), which prices every method's forward log.
The sample and the jobs are kernels_profile.e2e.job's; the side checks on a model (transformers' own
prompt lookup, constrained generation) are kernels_profile.e2e.checks'.
"""

from __future__ import annotations

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.model import ModelKey
from analysis.rivals.families.ar import AR
from analysis.rivals.families.copy import DECODED, IDEAL
from analysis.rivals.forwards import Forwards
from analysis.rivals.pricing import price_log
from analysis.rivals.methods import PROGRAM_PROMPT, REWRITE_PROMPT, Method
from analysis.rivals.settings import DraftSettings
from kernels_profile.e2e.job import CaseJob
from kernels_profile.e2e.predict import LatencyCurve, measure_curve
from kernels_profile.e2e.settings import E2ESettings, MethodPlan
from kernels_profile.measure.interleave import interleaved_order
from kernels_profile.e2e.executor import Executor, acceptance_histogram
from kernels_profile.measure.equivalence import compare_logits

PROMPTS = (REWRITE_PROMPT, PROGRAM_PROMPT)


# ---------------------------------------------------------------- the runs

def new_drafter(method: Method, prompt: list[int], drafts: DraftSettings):
    """A fresh drafter over the prompt's tokens: the method's family's (analysis.rivals.families)."""
    return method.drafter(list(prompt), drafts)


def _autoregressive(method: Method, executor, gold: list[int], segments: dict, drafts: DraftSettings, drafters):
    return lambda: executor.autoregressive(gold)[0]


def _speculative(method: Method, executor, gold: list[int], segments: dict, drafts: DraftSettings, drafters):
    if method.k is None:
        raise ParamsError(f"e2e: {method.name} drafts without a budget; the acceptance histogram needs a k")

    def speculative():
        drafter = drafters(method, executor.prompt_ids, drafts)
        return executor.speculative(gold, drafter, method.k)
    return speculative


def _program(method: Method, executor, gold: list[int], segments: dict, drafts: DraftSettings, drafters):
    if method.directives not in (DECODED, IDEAL):
        raise ParamsError(f"e2e: {method.name}: the executor runs a program with its directive tokens decoded or "
                          f"free, not {method.directives}")
    return lambda: executor.copy_as_decode(segments[method.level], directives=method.directives == DECODED)[0]


RUNNERS = {"autoregressive": _autoregressive, "speculative": _speculative, "program": _program}


def method_runner(method: Method, executors: dict, gold: list[int], segments: dict, plan: MethodPlan, drafters=None):
    """A call that runs `method` once from its prompt's cached prefill and returns its Run, by its family's
    executor (RUNNERS); a drafter is built before the call (outside the timer, as the programs' segments are)."""
    how = method.spec.executor
    if how is None:
        raise ParamsError(f"e2e: {method.name} is not run end to end (its family names no executor)")
    return RUNNERS[how](method, executors[method.prompt], gold, segments, plan.drafts, drafters or new_drafter)


def acceptance(run, method: Method) -> list[int] | None:
    """A speculative run's acceptance histogram (counts[n]: forwards that accepted n draft tokens,
    n = 0..k); None for any other method."""
    if not method.speculative:
        return None
    if len(run.accepted) != run.forwards:
        raise ValueError(f"a {method.name} run recorded {len(run.accepted)} acceptances for {run.forwards} forwards")
    return acceptance_histogram(run.accepted, method.k)


def measure_case(executors: dict, gold: list[int], segments: dict, plan: MethodPlan, repeats: int,
                 order_seed: str, drafters=None) -> list[dict]:
    """Per repeat: both prompts' prefills timed (seeded order), then every method once, back to back
    in the order `interleaved_order(names, repeats, order_seed)` gives (`order_index`: its position in
    the repeat). Each record carries its run's forward log and its prompt's prefill in that repeat."""
    by_name = {m.name: m for m in plan.methods}
    runners = {m.name: method_runner(m, executors, gold, segments, plan, drafters) for m in plan.methods}
    prompt_orders = interleaved_order(PROMPTS, repeats, f"{order_seed}/prompt")
    records = []
    for repeat, order in enumerate(interleaved_order(plan.names(), repeats, order_seed)):
        prompt_seconds = {p: executors[p].time_prompt() for p in prompt_orders[repeat]}
        for index, name in enumerate(order):
            method = by_name[name]
            run = runners[name]()
            records.append({"method": name, "repeat": repeat, "order_index": index, "seconds": run.seconds,
                            "forwards": run.forwards, "tokens": run.tokens, "accept_hist": acceptance(run, method),
                            "prompt_tokens": len(executors[method.prompt].prompt_ids),
                            "prompt_seconds": prompt_seconds[method.prompt], "draft_seconds": run.draft_seconds,
                            "new_tokens": list(run.new_tokens), "emitted": list(run.emitted)})
    return records


def losslessness(executor, segments, tolerance: float) -> dict:
    """Executor's final logits vs one-token steps over exactly the same token sequence."""
    _, cad_logits = executor.copy_as_decode(segments)
    sequence = [t for s in segments for t in s.ids]
    _, ar_logits = executor.autoregressive(sequence)
    check = compare_logits(cad_logits, ar_logits, tolerance)
    return {"logits_rel_diff": check.rel_diff, "argmax_equal": check.argmax_equal, "ok": check.ok}


# ---------------------------------------------------------------- one job

PREDICTION_SCHEMA = {"method": pl.String, "predicted_ar_seconds": pl.Float64, "predicted_seconds": pl.Float64,
                     "predicted": pl.Float64, "extrapolated_spans": pl.Int64}
LOG_TYPE = pl.List(pl.Int32)


def predictions(records: list[dict], model, cost) -> pl.DataFrame:
    """Per method: its forward log (repeat 0's: gold acceptance makes every repeat's the same) priced
    under the case's curve by the bounds' price (`cost`), AR's likewise, and their ratio."""
    first = {r["method"]: r for r in records if r["repeat"] == 0}
    priced = {name: price_log(Forwards.from_log(r["new_tokens"], r["emitted"]), r["prompt_tokens"], model, cost)
              for name, r in first.items()}
    ar = priced[AR].seconds
    return pl.DataFrame([{"method": name, "predicted_ar_seconds": ar, "predicted_seconds": p.seconds,
                          "predicted": ar / p.seconds if p.seconds > 0 else None, "extrapolated_spans": p.extrapolated}
                         for name, p in priced.items()], schema=PREDICTION_SCHEMA)


def check_logs(records: list[dict]) -> None:
    """Gold acceptance is deterministic: every repeat of a method must log the same forwards."""
    logs: dict[str, tuple] = {}
    for r in records:
        log = (tuple(r["new_tokens"]), tuple(r["emitted"]))
        if logs.setdefault(r["method"], log) != log:
            raise ValueError(f"e2e: {r['method']} logged different forwards in repeat {r['repeat']}")


def measure_job(lm, job: CaseJob, s: E2ESettings, run_id: str, drafters=None) -> tuple[pl.DataFrame, LatencyCurve]:
    """The job's rows (CHECKPOINT_COLUMNS of the stage) and its latency curve."""
    executors = {p: Executor(lm, list(job.prompts[p])) for p in PROMPTS}
    records = measure_case(executors, list(job.gold), job.segments, job.plan, job.repeats, job.order_seed, drafters)
    check_logs(records)
    checks = {level: losslessness(executors[PROGRAM_PROMPT], job.segments[level], s.checks.losslessness_tolerance)
              for level in job.lossless_levels}
    curve = measure_curve(lm, job.curve_sizes, s.curve.ar_grid, s.curve.ar_steps, job.curve_contexts, job.repeats)
    key = ModelKey(job.model.name, job.model.weights, job.model.dtype, str(lm.device), "eager")
    predicted = predictions(records, curve.model(key, s.curve.fit), s.price)
    directives = pl.DataFrame([{"method": m.name, "directive_tokens": sum(seg.directive_tokens for seg in job.segments[m.level])}
                               for m in job.plan.methods if m.directives == DECODED],
                              schema={"method": pl.String, "directive_tokens": pl.Int64})
    measured = pl.DataFrame(records, schema_overrides={"accept_hist": pl.List(pl.Int64), "new_tokens": LOG_TYPE,
                                                       "emitted": LOG_TYPE})
    worst = max(checks.values(), key=lambda c: c["logits_rel_diff"]) if checks else {"logits_rel_diff": None}
    frame = measured.join(predicted, on="method", how="left").join(directives, on="method", how="left").with_columns(
        model=pl.lit(job.model.name), weights=pl.lit(job.model.weights), dtype=pl.lit(job.model.dtype),
        case_id=pl.lit(job.case_id), corpus=pl.lit(job.corpus), gold_tokens=pl.lit(len(job.gold)), run_id=pl.lit(run_id),
        lossless_levels=pl.lit(",".join(checks)), lossless_rel_diff=pl.lit(worst["logits_rel_diff"], dtype=pl.Float64),
        lossless_ok=pl.lit(all(c["ok"] for c in checks.values()) if checks else None, dtype=pl.Boolean),
    )
    return frame.sort("repeat", "order_index"), curve
