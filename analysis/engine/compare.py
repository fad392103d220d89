"""The simulator against the engine: the project's rivals and serving simulations rerun on the engine run's
requests, with the engine's own greedy output as the gold and a step-cost model fitted to the engine's steps.

* Forwards per request and method (analysis.rivals.forwards' rules, on the engine tokenizer's ids): AR one
  decode step per gold token; vLLM's ngram as prompt lookup with gold acceptance at the same k and n-gram window
  (vLLM takes the longest trailing n-gram's earliest earlier occurrence, the `earliest` policy), drafting from the
  rewrite prompt's ids plus the output so far; Copy-as-Decode from the run's own plan: every forced token one
  decode step, every copy one prefill of its appended tokens. No end-of-sequence step is counted (the rivals'
  rule), and the prompt prefill emits nothing (the scheduler's rule).
* The step-cost model (analysis.latency.stepcost) fitted to the engine's logged steps: once on every step of the
  run (`all steps`), once on the AR runs' steps only (`AR steps`: the other methods' steps held out).
* The scheduler (analysis.serving.scheduler) runs each (method, load, repeat) closed loop with the engine run's
  request order and engine limits; predicted throughput (gold tokens over the makespan), TTFT and TPOT p50 are
  set beside the measured ones (the median over repeats), with the relative error, and per load whether the
  methods' throughput ranking agrees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.engine.methods import AR, COPY, NGRAM, EngineMethod, parse_engine_method
from analysis.engine.requests import closed_loop_order
from analysis.latency.stepcost import MEASURED, TERMS, StepCostModel, fit_step_cost
from analysis.rivals.families.pld import PromptLookup
from analysis.rivals.forwards import Forwards, decode_forwards, speculative_forwards
from analysis.serving.forwards import Trace
from analysis.serving.scheduler import EngineConfig, simulate
from analysis.stats import ratio_of_sums, ratio_of_sums_ci

FITS = ("all steps", "AR steps")
FIGURES = ("output_throughput", "ttft_p50_s", "tpot_p50_s")


@dataclass(frozen=True)
class SimulationInputs:
    """What the simulation needs of a frozen run (analysis.engine.frozen reads and checks it)."""

    rids: tuple[str, ...]
    rewrite_prompts: Mapping[str, Sequence[int]]
    program_prompts: Mapping[str, Sequence[int]]
    gold: Mapping[str, Sequence[int]]
    plans: Mapping[str, dict] | None
    end_id: int
    lookup_min: int
    lookup_max: int
    seed: int
    config: EngineConfig


def copy_forwards_of(plan: dict, end_id: int) -> Forwards:
    """A plan's forwards: each forced token a decode step (the final end token excepted), each copy a prefill."""
    out = Forwards()
    chain = plan["chain"]
    for i, stage in enumerate(chain):
        if stage["append_ids"]:
            out.add(len(stage["append_ids"]), len(stage["append_ids"]), True)
        forced = list(stage["forced_ids"])
        if i == len(chain) - 1 and forced and forced[-1] == end_id:
            forced = forced[:-1]
        for _ in forced:
            out.add(1, 1, False)
    if not out.new_tokens:  # nothing but the end token: the one forward the engine runs still counts
        out.add(1, 1, False)
    return out


def method_trace(method: EngineMethod, rid: str, inp: SimulationInputs) -> Trace:
    gold = list(inp.gold[rid])
    if method.family == COPY:
        prompt, forwards = inp.program_prompts[rid], copy_forwards_of(inp.plans[rid], inp.end_id)
    elif method.family == NGRAM:
        prompt = inp.rewrite_prompts[rid]
        drafter = PromptLookup(prompt, policy="earliest", max_ngram=inp.lookup_max, min_ngram=inp.lookup_min)
        forwards = speculative_forwards(drafter, gold, method.k)
    else:
        prompt, forwards = inp.rewrite_prompts[rid], decode_forwards(len(gold))
    return Trace(rid, "", method.name, len(prompt), len(gold), tuple(forwards.new_tokens), tuple(forwards.emitted))


def step_bins(steps: pl.DataFrame) -> pl.DataFrame:
    """Steps grouped by shape (log2 bins of batch, tokens and largest context, per method): the mean of each
    column. Under contention a step's time has a long right tail, and a run's throughput is set by the mean step
    time, so the model is fitted to means, each bin weighted once."""
    shape = [pl.col(c).log(2).floor().alias(f"{c}_bin") for c in ("batch", "tokens", "context_max")]
    return (steps.with_columns(shape).group_by("method", "batch_bin", "tokens_bin", "context_max_bin")
            .agg(pl.col("batch", "tokens", "sum_context", "attention_keys", "seconds", "context_max").mean(),
                 steps=pl.len())
            .sort("method", "batch_bin", "tokens_bin", "context_max_bin"))


def fit_engine_steps(steps: pl.DataFrame, which: str) -> StepCostModel:
    """The step-cost model through the run's steps (`which`: one of FITS), binned by shape (`step_bins`)."""
    chosen = steps if which == "all steps" else steps.filter(pl.col("method") == "ar")
    points = step_bins(chosen)
    basis = ("each point is the mean wall-clock time of the LLMEngine.step calls of one shape bin (log2 of batch, "
             "tokens, largest context), timed in the engine process")
    if points.height <= len(TERMS):  # too few shapes for six terms: every step is a point
        points, basis = chosen, "each point is one LLMEngine.step, wall clock, timed in the engine process"
    return fit_step_cost(points.select("batch", "tokens", "sum_context", "attention_keys", "seconds", "context_max"),
                         f"engine ({which})", MEASURED, assumptions=(basis,))


def simulated_run(traces: Mapping[str, Trace], order: Sequence[str], concurrency: int, cost: StepCostModel,
                  config: EngineConfig, speculative: bool) -> dict:
    """One closed-loop run's predicted figures, defined as the engine run's are (analysis.engine.records)."""
    result = simulate(config, cost, lambda i: traces[order[i]], None, concurrency, len(order),
                      atomic_methods=frozenset({traces[order[0]].method}) if speculative else frozenset())
    reqs = result.requests
    ttft = [r.first - r.arrival for r in reqs]
    tpot = [(r.finish - r.first) / (r.trace.gold_tokens - 1) for r in reqs if r.trace.gold_tokens > 1]
    return {"output_throughput": sum(r.trace.gold_tokens for r in reqs) / result.end,
            "ttft_p50_s": float(np.median(ttft)), "tpot_p50_s": float(np.median(tpot)) if tpot else None,
            "extrapolated_step_share": result.extrapolated_steps / max(result.steps, 1)}


def predictions(methods: Sequence[str], concurrency: Sequence[int], repeats: Sequence[int], inp: SimulationInputs,
                cost: StepCostModel, fit: str) -> pl.DataFrame:
    rows = []
    for name in methods:
        method = parse_engine_method(name)
        traces = {rid: method_trace(method, rid, inp) for rid in inp.rids}
        for c in concurrency:
            for repeat in repeats:
                order = closed_loop_order(list(inp.rids), inp.seed, f"c{c}-r{repeat}")
                figures = simulated_run(traces, order, c, cost, inp.config, method.family == NGRAM)
                rows.append({"fit": fit, "method": name, "concurrency": c, "repeat": repeat, **figures})
    return pl.DataFrame(rows)


def measured(results: Sequence[dict]) -> pl.DataFrame:
    """Per run: the results JSON's throughput, TTFT and TPOT p50 (seconds)."""
    return pl.DataFrame([{"method": r["method"], "concurrency": r["max_concurrency"], "repeat": r["repeat"],
                          "output_throughput": r["output_throughput"], "ttft_p50_s": r["p50_ttft_ms"] / 1000,
                          "tpot_p50_s": None if r["p50_tpot_ms"] is None else r["p50_tpot_ms"] / 1000,
                          "same_text_share": r["same_text_share"],
                          # the run's time outside any forward: requests waiting on a grammar compile, admission
                          "no_forward_share": (max(0.0, 1 - r["forward_seconds"] / r["duration"])
                                               if r.get("forward_seconds") is not None else None)} for r in results])


def comparison(measured_runs: pl.DataFrame, predicted_runs: pl.DataFrame) -> pl.DataFrame:
    """Per fit, method and load: measured (median over repeats) and predicted figures and their relative error."""
    med = [pl.col(f).median() for f in FIGURES]
    m = measured_runs.group_by("method", "concurrency").agg(*med, repeats=pl.len(),
                                                           throughput_min=pl.col("output_throughput").min(),
                                                           throughput_max=pl.col("output_throughput").max())
    p = predicted_runs.group_by("fit", "method", "concurrency").agg(*med, pl.col("extrapolated_step_share").max())
    joined = p.join(m, on=["method", "concurrency"], suffix="_measured").rename(
        {f: f"{f}_predicted" for f in FIGURES})
    return joined.with_columns(
        *(((pl.col(f"{f}_predicted") / pl.col(f"{f}_measured")) - 1).alias(f"{f}_error") for f in FIGURES)
    ).sort("fit", "concurrency", "method")


def rankings(table: pl.DataFrame) -> pl.DataFrame:
    """Per fit and load: the methods by measured and by predicted throughput (fastest first), whether the two
    orders agree, and Kendall's tau between them."""
    from scipy.stats import kendalltau

    rows = []
    for (fit, c), group in table.group_by("fit", "concurrency", maintain_order=True):
        by_measured = group.sort("output_throughput_measured", descending=True)["method"].to_list()
        by_predicted = group.sort("output_throughput_predicted", descending=True)["method"].to_list()
        tau = kendalltau(group["output_throughput_measured"].to_numpy(), group["output_throughput_predicted"].to_numpy())
        rows.append({"fit": fit, "concurrency": c, "measured_order": " > ".join(by_measured),
                     "predicted_order": " > ".join(by_predicted), "same_ranking": by_measured == by_predicted,
                     "kendall_tau": None if np.isnan(tau.statistic) else float(tau.statistic)})
    return pl.DataFrame(rows).sort("fit", "concurrency")


def error_summary(table: pl.DataFrame, ranks: pl.DataFrame, target: float) -> pl.DataFrame:
    """Per fit: the median absolute error of each figure over (method, load) and the loads whose ranking agrees."""
    rows = []
    for fit in table["fit"].unique(maintain_order=True).to_list():
        t, r = table.filter(pl.col("fit") == fit), ranks.filter(pl.col("fit") == fit)
        row = {"fit": fit, "points": t.height}
        for f in FIGURES:
            row[f"{f}_mdape"] = float(t[f"{f}_error"].abs().median())
        row["within_target"] = row["output_throughput_mdape"] <= target
        row["loads_same_ranking"] = int(r["same_ranking"].sum())
        row["loads"] = r.height
        rows.append(row)
    return pl.DataFrame(rows)


def speedups(records: pl.DataFrame, results: pl.DataFrame, resamples: int, seed: int, level: float = 0.95) -> pl.DataFrame:
    """Per method and load, throughput over AR. In a closed loop throughput is the concurrency over the mean latency
    (Little's law), so `throughput_over_ar` is the ratio of summed end-to-end latencies (AR over the method, requests
    paired by request and repeat), with a paired request-bootstrap interval of that same ratio. `makespan_ratio`
    beside it is the ratio of the runs' own throughputs (gold tokens over the makespan, median over repeats): with
    few requests in flight at once it is set by the slowest request, and it is what the simulator is compared on."""
    med = results.group_by("method", "concurrency").agg(pl.col("output_throughput").median())
    rows = []
    for (method, c), group in med.group_by("method", "concurrency", maintain_order=True):
        ar = med.filter((pl.col("method") == "ar") & (pl.col("concurrency") == c))
        if ar.height == 0:
            continue
        mine = records.filter((pl.col("method") == method) & (pl.col("concurrency") == c)).select("rid", "repeat", "e2e_s")
        base = records.filter((pl.col("method") == "ar") & (pl.col("concurrency") == c)).select("rid", "repeat", "e2e_s")
        paired = base.join(mine, on=["rid", "repeat"], suffix="_method")
        ci = ratio_of_sums_ci(paired["e2e_s"].to_numpy(), paired["e2e_s_method"].to_numpy(), resamples,
                              seed + c, level)
        rows.append({"method": method, "concurrency": c,
                     "throughput_over_ar": ratio_of_sums(paired["e2e_s"].to_numpy(), paired["e2e_s_method"].to_numpy()),
                     "ci_low": ci.low, "ci_high": ci.high, "pairs": paired.height,
                     "makespan_ratio": group["output_throughput"][0] / ar["output_throughput"][0]})
    return pl.DataFrame(rows).sort("concurrency", "method")


def decisions(records: pl.DataFrame, gains: pl.DataFrame, resamples: int, seed: int, level: float = 0.95) -> pl.DataFrame:
    """Per load, Copy-as-Decode against the fastest rival the engine ran there (the speculative method with the
    highest throughput over AR): the rival's summed request latencies over Copy-as-Decode's (above 1, Copy-as-Decode
    is faster), requests paired by request and repeat, with a paired request-bootstrap interval; the same rule as
    `speedups`, with the rival in AR's place."""
    rows = []
    for c in sorted(gains["concurrency"].unique().to_list()):
        here = gains.filter(pl.col("concurrency") == c)
        rivals = here.filter(~pl.col("method").is_in([AR, COPY])).sort("throughput_over_ar", descending=True)
        copy = here.filter(pl.col("method") == COPY)
        if rivals.height == 0 or copy.height == 0:
            continue
        rival = rivals["method"][0]
        side = {m: records.filter((pl.col("method") == m) & (pl.col("concurrency") == c)).select("rid", "repeat", "e2e_s")
                for m in (rival, COPY)}
        paired = side[rival].join(side[COPY], on=["rid", "repeat"], suffix="_copy")
        if paired.height == 0:
            continue
        num, den = paired["e2e_s"].to_numpy(), paired["e2e_s_copy"].to_numpy()
        ci = ratio_of_sums_ci(num, den, resamples, seed + c, level)
        rows.append({"concurrency": c, "copy": COPY, "rival": rival, "copy_over_rival": ratio_of_sums(num, den),
                     "copy_over_rival_ci_low": ci.low, "copy_over_rival_ci_high": ci.high, "pairs": paired.height,
                     "copy_over_ar": copy["throughput_over_ar"][0], "rival_over_ar": rivals["throughput_over_ar"][0]})
    return pl.DataFrame(rows)
