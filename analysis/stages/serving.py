"""`copydecode serving simulate`: the corpora's edits under continuous batching, per method and kernel source.

Reads data/rivals/forwards.parquet (per case and method, its forwards: analysis.serving.forwards), the corpora's
sources (data/corpora/cases.parquet: each method's own prompt, analysis.serving.prompts) and
reports/kernels/step_cost.json (the step-cost model of each source: this CPU's batched profile, measured, and
the H200 sources extrapolated from batch 1), params `serving`. For every source, token budget and load point
(closed loop over the concurrencies, open loop over Poisson rates set from AR's capacity on that source) every
method serves the same seeded requests (analysis.serving.simulate); the headline concurrencies run once more
with every step past the fitted step tokens at the lowest defensible price, for the extrapolation band. Writes
tables only (the claims row is analysis.claims.serving's):

* reports/tables/serving.csv/.md: every method at every load point of every source and budget, with its
  speedup over AR and over the best rival there, its extrapolated share by cause and whether the point is
  compute-bound;
* reports/tables/serving_claim.csv/.md: the gains table (analysis.serving.gains), and
  reports/metrics/serving.json: its headline figures for `dvc metrics show`;
* data/serving/steps.parquet: a seeded sample of the simulated steps of the replay source by step mix, the real
  batched forwards `copydecode serving replay` times.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.stepcost import MARGINAL_RULE, StepCostModel, read_step_cost
from analysis.layout import CASES, METRICS, STEP_COST, TABLES
from analysis.pooling import pool_rows
from analysis.parallel.progress import progress_bar, timed
from analysis.pipeline.io import read_parquet, write_json, write_parquet, write_table
from analysis.pipeline.params import get, known_keys, number, number_list, positive_int
from analysis.rivals.methods import method_name, parse_method
from analysis.serving.forwards import FORWARDS, read_forwards, traces
from analysis.serving.gains import gains_table
from analysis.serving.prompts import own_prompts
from analysis.serving.scheduler import STRATA, EngineConfig, stratum
from analysis.pipeline.config import bootstrap_settings, tokenizer_spec
from analysis.serving.steps import STEP_COLUMNS, STEPS
from analysis.serving.simulate import (Methods, Resampling, Sweep, check_run_size, closed_points, rival_intervals, shared_cases,
                                       sweep_source, with_compute_bound, with_families, with_speedups)
from analysis.serving.workload import closed_loop_requests
from analysis.text.tokens import load_tokenizer

GROUP_KEYS = ("methods", "best_of", "framing", "sources", "engine", "closed_loop", "open_loop", "slo",
              "seed", "bootstrap_resamples", "ci", "gain_threshold", "headline_concurrency", "compute_bound_share",
              "replay")
ENGINE_KEYS = ("max_num_batched_tokens", "max_num_seqs", "headline_budget")
REPLAY_KEYS = ("source", "concurrency", "steps_per_stratum", "max_context", "repeats", "warmup", "order_seed",
               "noisy_drift", "reference_budget_s", "contention_slack")
DEFAULT_BUDGET = "default"  # serving.engine.headline_budget's key for every source it does not name


@dataclass(frozen=True)
class ReplaySample:
    """Which simulated steps the replay times (params serving.replay; its timing keys are the replay stage's):
    `steps_per_stratum` per step mix (analysis.serving.scheduler.STRATA) and concurrency, drawn from every method's
    steps whose context and new tokens fit `max_context`."""

    source: str
    concurrency: tuple[int, ...]
    steps_per_stratum: int
    max_context: int


@dataclass(frozen=True)
class HeadlineBudget:
    """The token budget a source's figures lead with (params serving.engine.headline_budget): vLLM's default on
    that device (8,192 on a GPU of 70 GiB or more, 2,048 on a smaller one), keyed by the source name's first part
    (`h200`, `h200-devtime`, `batched`) with a default."""

    by_device: dict[str, int]
    default: int

    def __call__(self, source: str) -> int:
        return self.by_device.get(source.split("/")[0], self.default)


@dataclass(frozen=True)
class ServingSettings:
    methods: Methods
    framing: str
    sources: tuple[str, ...]
    budgets: tuple[int, ...]
    max_num_seqs: int
    sweep: Sweep
    gain_threshold: float
    headline: tuple[int, ...]
    replay: ReplaySample
    bootstrap: Resampling           # the request bootstrap of the gains over the best rival
    headline_budget: HeadlineBudget
    compute_bound_share: float
    tokenizer: str                  # counts the numbered source's tokens (tokenizer.spec)


def _string_list(params: dict, dotted: str) -> tuple[str, ...]:
    values = get(params, dotted, list)
    if not values or any(not isinstance(v, str) or not v for v in values) or len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} must be a non-empty list of distinct names, got {values!r}")
    return tuple(values)


def methods_of(params: dict) -> Methods:
    """The simulated methods (params serving.methods, names of the forwards table) with the roles and the
    speculative flag the vocabulary gives them (analysis.rivals.methods: never restated in params), and the
    families of serving.best_of."""
    methods = [parse_method(n) for n in _string_list(params, "serving.methods")]
    for m in methods:
        if m.spec.unservable:
            raise ParamsError(f"params: 'serving.methods' names {m.name}, which the serving simulation cannot schedule: "
                              f"{m.spec.unservable}")
    best_of = get(params, "serving.best_of", dict)
    families = {}
    for family, members in best_of.items():
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise ParamsError(f"params: 'serving.best_of.{family}' must be a list of rival methods, got {members!r}")
        families[str(family)] = tuple(method_name(m) for m in members)
    return Methods({m.name: m.role for m in methods}, families,
                   frozenset(m.name for m in methods if m.speculative)).validate()


# `copydecode serving simulate`: its help line and what it reads and writes (the CLI's --help)
HELP = "continuous-batching simulation of the corpora's edits per method, priced by the step-cost model"
READS_WRITES = ("reads data/rivals/forwards.parquet and reports/kernels/step_cost.json (params serving); writes "
                "data/serving/*.parquet, reports/tables/serving*.*, reports/metrics/serving.json")


def headline_budget(params: dict, budgets: tuple[int, ...], sources: tuple[str, ...]) -> HeadlineBudget:
    """Each simulated source's headline budget, by its name's first part. An entry for a source this run does not
    simulate is not checked against this run's budgets (a run of the batched source alone at 2,048 keeps the H200
    entries for the runs that simulate them)."""
    given = get(params, "serving.engine.headline_budget", dict)
    where = "serving.engine.headline_budget"
    simulated = {str(src).split("/")[0] for src in sources} | {DEFAULT_BUDGET}
    bad = {k: v for k, v in given.items() if k in simulated and (v not in budgets or isinstance(v, bool))}
    if bad:
        raise ParamsError(f"params: {where} {bad} must name budgets of serving.engine.max_num_batched_tokens {list(budgets)}")
    if DEFAULT_BUDGET not in given:
        raise ParamsError(f"params: {where} needs a {DEFAULT_BUDGET!r} budget for the sources it does not name")
    return HeadlineBudget({str(k): int(v) for k, v in given.items() if k != DEFAULT_BUDGET}, int(given[DEFAULT_BUDGET]))


def settings(params: dict) -> ServingSettings:
    known_keys(params, "serving", GROUP_KEYS)
    known_keys(params, "serving.engine", ENGINE_KEYS)
    known_keys(params, "serving.replay", REPLAY_KEYS)
    budgets = number_list(params, "serving.engine.max_num_batched_tokens", lo=1, integer=True, distinct=True)
    max_seqs = positive_int(params, "serving.engine.max_num_seqs")
    for budget in budgets:
        EngineConfig(budget, max_seqs).validate()
    sweep = Sweep(
        concurrency=number_list(params, "serving.closed_loop.concurrency", lo=1, integer=True, distinct=True),
        min_requests=positive_int(params, "serving.closed_loop.min_requests"),
        requests_per_client=positive_int(params, "serving.closed_loop.requests_per_client"),
        warmup_share=number(params, "serving.closed_loop.warmup_share", lo=0, hi=0.9),
        qps_fractions=number_list(params, "serving.open_loop.qps_fractions", lo=1e-9, distinct=True),
        open_requests=positive_int(params, "serving.open_loop.requests"),
        ttft_x=number(params, "serving.slo.ttft_x"), tpot_x=number(params, "serving.slo.tpot_x"),
        seed=positive_int(params, "serving.seed", minimum=0)).validate()
    headline = number_list(params, "serving.headline_concurrency", lo=1, integer=True, distinct=True)
    missing = sorted(set(headline) - set(sweep.concurrency))
    if missing:
        raise ParamsError(f"params: 'serving.headline_concurrency' {missing} are not in serving.closed_loop.concurrency")
    sources = _string_list(params, "serving.sources")
    replay = ReplaySample(get(params, "serving.replay.source", str),
                          number_list(params, "serving.replay.concurrency", lo=1, integer=True, distinct=True),
                          positive_int(params, "serving.replay.steps_per_stratum"),
                          positive_int(params, "serving.replay.max_context"))
    if replay.source not in sources:
        raise ParamsError(f"params: 'serving.replay.source' {replay.source!r} is not one of serving.sources {list(sources)}")
    if set(replay.concurrency) - set(sweep.concurrency):
        raise ParamsError(f"params: 'serving.replay.concurrency' {sorted(set(replay.concurrency) - set(sweep.concurrency))} "
                          "are not in serving.closed_loop.concurrency")
    boot = bootstrap_settings(params, "serving")
    methods = methods_of(params)
    check_run_size(sweep, len(sources) * len(budgets) * len(methods.roles))
    return ServingSettings(methods, get(params, "serving.framing", str), sources, budgets, max_seqs, sweep,
                           number(params, "serving.gain_threshold", lo=1.0), headline, replay,
                           Resampling(boot.resamples, boot.seed, boot.ci), headline_budget(params, budgets, sources),
                           number(params, "serving.compute_bound_share", lo=1e-9, hi=1.0), tokenizer_spec(params))


def load_sources(path: Path, names: tuple[str, ...]) -> list[StepCostModel]:
    models = {m.source: m for m in read_step_cost(path)[0]}
    missing = [n for n in names if n not in models]
    if missing:
        raise ParamsError(f"serving.sources {missing} are not in {path} (it holds {sorted(models)}); add them to "
                          "kernels.batched.batch1_sources or rerun the batched profile")
    return [models[n] for n in names]


def replay_sample(kept: dict, budget: int, sample: ReplaySample, seed: int) -> tuple[list[dict], dict]:
    """A seeded draw of steps_per_stratum steps per (step mix, concurrency), pooled over the methods, among the
    steps whose every sequence's context and new tokens fit max_context; the rest are counted per stratum."""
    import numpy as np

    rows, left_out = [], {}
    pools: dict[tuple[str, int], list[tuple[str, tuple]]] = {}
    for (method, concurrency), shapes in sorted(kept.items()):
        for shape in shapes:
            qs, contexts, kinds, _ = shape
            key = (stratum(kinds), concurrency)
            if max(c + q for q, c in zip(qs, contexts)) > sample.max_context:
                left_out[f"{key[0]}/c{concurrency}"] = left_out.get(f"{key[0]}/c{concurrency}", 0) + 1
                continue
            pools.setdefault(key, []).append((method, shape))
    for (mix, concurrency), fits in sorted(pools.items(), key=lambda kv: (STRATA.index(kv[0][0]), kv[0][1])):
        rng = np.random.default_rng(np.random.SeedSequence([seed, concurrency, *mix.encode()]))
        picks = sorted(rng.choice(len(fits), size=min(sample.steps_per_stratum, len(fits)), replace=False).tolist())
        for k, i in enumerate(picks):
            method, (qs, contexts, kinds, seconds) = fits[i]
            rows.append({"step_id": f"{mix.replace(' ', '-')}/c{concurrency}/{k}", "method": method,
                         "concurrency": concurrency, "max_num_batched_tokens": budget, "stratum": mix, "batch": len(qs),
                         "qs": list(qs), "contexts": list(contexts), "kinds": list(kinds), "predicted_s": seconds})
    return rows, left_out


def read_sources(framing: str) -> pl.DataFrame:
    """case_id and source of every case of the pool (the corpora stage's table)."""
    cases = read_parquet(CASES, "the corpora stage's cases (run `copydecode corpora`)", ParamsError)
    return pool_rows(cases, framing).select("case_id", "source")


def _progress(bar):
    def say(text: str) -> None:
        bar.set_postfix_str(text[:60])
        bar.update(1)
    return say


def run(s: ServingSettings) -> dict:
    with timed("serving_simulate"):
        forwards = read_forwards(FORWARDS)
        pool = pool_rows(forwards, s.framing)
        if pool.height == 0:
            raise ParamsError(f"serving.framing {s.framing!r}: the forwards table has no row of that pool "
                              f"(framings: {sorted(set(forwards['framing']))})")
        tokenizer = load_tokenizer(s.tokenizer)
        prompts = own_prompts(pool, read_sources(s.framing), tokenizer.count)
        by_case = traces(prompts.forwards)
        cases, outside = shared_cases(by_case, list(s.methods.roles))
        if outside and any(outside.values()):
            print(f"copydecode serving simulate: cases without a trace of every method are not drawn: {outside}",
                  file=sys.stderr)
        models = load_sources(STEP_COST, s.sources)
        loads = len(s.sweep.concurrency) + len(s.sweep.qps_fractions) + len(s.headline)
        runs = len(models) * len(s.budgets) * loads * len(s.methods.roles)
        bar = progress_bar(total=runs, desc="serving simulate", unit="run")
        rows, low_rows, steps, meta, latencies = [], [], [], {}, {}
        for model in models:
            for budget in s.budgets:
                config = EngineConfig(budget, s.max_num_seqs)
                keep = (lambda m, c: model.source == s.replay.source and budget == s.budgets[0]
                        and c in s.replay.concurrency)
                got, info = sweep_source(model, config, by_case, s.methods, s.sweep, cases, keep, _progress(bar))
                rows += got
                low_rows += closed_points(model.with_rule(MARGINAL_RULE), config, by_case, s.methods, s.sweep, cases,
                                          s.headline, _progress(bar))
                latencies.update({(model.source, budget, load, method): served
                                  for (load, method), served in info["latencies"].items()})
                meta[f"{model.source}/T{budget}"] = {"ar_capacity_requests_per_s": info["ar_capacity_requests_per_s"],
                                                     "slo_ttft_s": info["slo"].ttft_s, "slo_tpot_s": info["slo"].tpot_s}
                if info["steps"]:
                    sampled, left_out = replay_sample(info["steps"], budget, s.replay, s.sweep.seed)
                    steps += sampled
                    meta["replay_left_out_past_max_context"] = left_out
        bar.close()
        table = with_speedups(with_families(pl.DataFrame(rows, infer_schema_length=None), s.methods), s.methods)
        table = with_compute_bound(rival_intervals(table, latencies, s.methods, s.bootstrap), s.compute_bound_share)
        table = table.sort("kernel_source", "max_num_batched_tokens", "workload", "load", "method")
        low = with_speedups(with_families(pl.DataFrame(low_rows, infer_schema_length=None), s.methods), s.methods)
        write_table(table, TABLES / "serving", digits=4)
        gains = gains_table(table, low, s.methods.of("copy"), s.gain_threshold, s.headline, len(cases), s.headline_budget)
        write_table(gains, TABLES / "serving_claim", digits=4)
        write_parquet(pl.DataFrame(steps, schema=STEP_COLUMNS), STEPS)
        headline: dict[str, dict] = {}
        for g in gains.iter_rows(named=True):
            headline.setdefault(g["kernel_source"], {})[f"{g['method']}_T{g['max_num_batched_tokens']}"] = {
                **{f"vs_ar_c{c}": g[f"vs_ar_c{c}"] for c in s.headline},
                **{f"vs_rival_c{c}": g[f"vs_best_rival_c{c}"] for c in s.headline},
                "below_vs_ar_from_c": g["below_vs_ar_from_c"], "below_vs_rival_from_c": g["below_vs_best_rival_from_c"]}
        write_json({"gains": headline, "cases": len(cases), "runs": meta,
                    "headline_budget": {src: s.headline_budget(src) for src in s.sources},
                    "prompt_tokens": {"how": prompts.how, "numbered_added_tokens_mean": prompts.added_tokens_mean},
                    "requests_per_point": {f"closed/{c}": closed_loop_requests(c, s.sweep.min_requests,
                                                                               s.sweep.requests_per_client)
                                           for c in s.sweep.concurrency},
                    "sim_wall_s": float(sum(r["sim_wall_s"] for r in rows + low_rows))}, METRICS / "serving.json")
    return {"rows": table.height, "cases": len(cases), "replay_steps": len(steps), "prompt_tokens": prompts.how}
