"""`copydecode bench throughput`: cases per second of the per-case work of programs + spans + optimal
with 1 and 2 workers (analysis.parallel), peak memory, and an extrapolation to 1M cases.

The synthetic corpus: the CommitEdits cases mined from the bundles that params `corpora.commits`
lists (with `corpora.commit_defaults`), repeated in mining order until `--cases` cases, each copy with
its own case id (so the work per case is real edit work, in the real mix of sizes). For each worker
count the three steps run on the whole corpus in this process's pool, timed separately:

  programs  analysis.stages.programs.oracle_programs (tokenization + line and token oracles)
  spans     analysis.stages.spans.build_spans on those programs
  optimal   the cost-optimal line and token programs (analysis.stages.optimal, `optimal.baseline`'s
            fitted kernel at `bounds.context`) and their span rows

Peak memory: the largest resident set of this process and, separately, of any worker process
(`getrusage`, RUSAGE_SELF and RUSAGE_CHILDREN; the latter covers workers that have ended, i.e. after
the pool shuts down, so loky workers kept alive between runs may be missed: it is a floor).

The extrapolation (an ESTIMATE, labelled so): hours for 1M cases on 1, 16 and 64 cores, from the
measured per-case time at 1 worker, under (a) linear scaling and (b) the parallel efficiency measured
here from 1 to 2 workers held at every core count. Neither accounts for I/O, a cluster's scheduling or
memory limits. The machine's load average is recorded beside every number: a shared machine's
numbers are not quiet.

Writes reports/bench/throughput.json and .md (`--out` to change the folder).
"""

from __future__ import annotations

import os
import platform
import resource
import time
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from analysis.corpora.cases import Case, cases_frame
from analysis.corpora import registry
from analysis.stages.corpora import CorporaSettings
from analysis.stages.optimal import OptimalSettings
from analysis.config import tokenizer_spec
from analysis.errors import ParamsError
from analysis.io import markdown_table, write_json, write_text
from analysis.parallel import ParallelSettings, check_parallel
from analysis.program import parse

BENCH_DIR = Path("reports/bench")
STEPS = ("programs", "spans", "optimal")
EXTRAPOLATE_CASES = 1_000_000
EXTRAPOLATE_CORES = (1, 16, 64)


@dataclass(frozen=True)
class BenchSettings:
    cases: int                    # --cases
    jobs: tuple[int, ...]         # --jobs
    backend: str                  # --backend
    out: Path                     # --out
    tokenizer: str                # params tokenizer.spec
    token_min_copy: int           # params programs.token_min_copy
    prompt_overhead_tokens: int   # params spans.prompt_overhead_tokens
    corpora: CorporaSettings      # the corpora stage's settings (its commits builds make the synthetic corpus)
    optimal: OptimalSettings      # the optimal stage's settings


def synthetic_cases(corpora: CorporaSettings, n: int) -> list[Case]:
    """`n` cases cycled from the CommitEdits corpora of params (see the module docstring)."""
    base: list[Case] = []
    for kind, corpus_settings in corpora.builds:
        if kind == "commits":
            base += registry.build_corpus(kind, corpus_settings).cases
    if not base:
        raise ParamsError("bench throughput: params corpora.commits lists no repository to build the synthetic corpus from")
    return [replace(base[i % len(base)], case_id=f"{base[i % len(base)].case_id}#{i // len(base)}")
            for i in range(n)]


def _peak_mb() -> tuple[float, float]:
    scale = 1 if platform.system() == "Darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 2**20
    return round(own, 1), round(children, 1)


def run_steps(cases: list[Case], s: BenchSettings, parallel: ParallelSettings, tokenizer) -> dict[str, float]:
    """Seconds of each step over `cases` with `parallel`."""
    from analysis.optimal import TokenizerDirectives
    from analysis.stages import optimal as optimal_stage
    from analysis.stages.programs import oracle_programs
    from analysis.stages.spans import build_spans

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    programs = oracle_programs(cases, tokenizer, s.token_min_copy, parallel)
    seconds["programs"] = time.perf_counter() - t0
    joined = programs.join(cases_frame(cases).select("case_id", "framing", "source", "target"),
                           on=["case_id", "framing"], how="left")
    t0 = time.perf_counter()
    build_spans(joined, tokenizer, s.prompt_overhead_tokens, parallel)
    seconds["spans"] = time.perf_counter() - t0
    o = s.optimal
    t0 = time.perf_counter()
    (_, _, model), = optimal_stage.select_kernels(("fit",), o.model, o.dtype, o.device, [o.baseline], o.latency_form)
    cost = optimal_stage.cost_model(model, o)
    directives = TokenizerDirectives(tokenizer)
    sources = tokenizer.encode_many([c.source for c in cases])
    targets = tokenizer.encode_many([c.target for c in cases])
    texts = {(r["case_id"], r["level"]): r["program"] for r in programs.iter_rows(named=True)}
    oracle_cases = [optimal_stage.OracleCase(c.case_id, c.corpus, c.framing, src, tgt,
                                             {lv: parse(texts[(c.case_id, lv)]) for lv in o.levels})
                    for c, src, tgt in zip(cases, sources, targets)]
    optimal_stage.parallel_span_frame(oracle_cases, o.levels, "optimal", cost, directives, parallel)
    seconds["optimal"] = time.perf_counter() - t0
    return {k: round(v, 3) for k, v in seconds.items()}


def extrapolation(per_case_s: float, efficiency: float | None) -> pl.DataFrame:
    rows = []
    for cores in EXTRAPOLATE_CORES:
        linear = EXTRAPOLATE_CASES * per_case_s / cores / 3600
        measured = (None if efficiency is None or efficiency <= 0 else
                    EXTRAPOLATE_CASES * per_case_s / (1 + (cores - 1) * efficiency) / 3600)
        rows.append({"cases": EXTRAPOLATE_CASES, "cores": cores, "hours_linear_estimate": round(linear, 2),
                     "hours_at_measured_efficiency_estimate": None if measured is None else round(measured, 2)})
    return pl.DataFrame(rows, schema={"cases": pl.Int64, "cores": pl.Int64, "hours_linear_estimate": pl.Float64,
                                      "hours_at_measured_efficiency_estimate": pl.Float64})


def settings(params: dict, cases: int, jobs: str, backend: str, out: str | Path | None = None) -> BenchSettings:
    """The command line's --cases/--jobs/--backend/--out, and what the timed steps read from params
    (through the programs, spans, corpora and optimal stages' own settings)."""
    from analysis.stages import corpora as corpora_stage
    from analysis.stages import optimal as optimal_stage
    from analysis.stages import programs as programs_stage
    from analysis.stages import spans as spans_stage

    try:
        jobs = tuple(int(j) for j in str(jobs).split(","))
    except ValueError:
        raise ParamsError(f"bench throughput: --jobs must be comma-separated integers, got {jobs!r}") from None
    if cases < 1:
        raise ParamsError(f"bench throughput: --cases must be >= 1, got {cases}")
    if not jobs or any(j < 1 for j in jobs) or 1 not in jobs:
        raise ParamsError(f"bench throughput: --jobs must list positive worker counts including 1, got {jobs}")
    for j in jobs:
        check_parallel(ParallelSettings(j, backend))
    return BenchSettings(cases, jobs, backend, Path(out or BENCH_DIR), tokenizer_spec(params),
                         programs_stage.settings(params).token_min_copy,
                         spans_stage.settings(params).prompt_overhead_tokens,
                         corpora_stage.settings(params), optimal_stage.settings(params))


def run(s: BenchSettings) -> dict:
    from analysis.tokenization import load_tokenizer

    load_before = [round(x, 2) for x in os.getloadavg()]
    tokenizer = load_tokenizer(s.tokenizer)
    t0 = time.perf_counter()
    cases = synthetic_cases(s.corpora, s.cases)
    build_s = round(time.perf_counter() - t0, 3)
    runs = []
    for jobs in s.jobs:
        load = [round(x, 2) for x in os.getloadavg()]
        seconds = run_steps(cases, s, ParallelSettings(jobs, s.backend), tokenizer)
        own, workers = _peak_mb()
        total = sum(seconds.values())
        runs.append({"n_jobs": jobs, "seconds": seconds, "total_seconds": round(total, 3),
                     "cases_per_second": {k: round(s.cases / v, 2) for k, v in seconds.items()}
                     | {"all_three": round(s.cases / total, 2)},
                     "peak_rss_mb_main": own, "peak_rss_mb_workers_floor": workers, "load_average_at_start": load})
    serial = next(r for r in runs if r["n_jobs"] == 1)
    two = next((r for r in runs if r["n_jobs"] == 2), None)
    speedup = None if two is None else round(serial["total_seconds"] / two["total_seconds"], 3)
    efficiency = None if speedup is None else round((speedup - 1) / (2 - 1), 3)
    per_case = serial["total_seconds"] / s.cases
    table = extrapolation(per_case, efficiency)
    result = {
        "what": "per-case work of programs + spans + optimal on a synthetic corpus cycled from the CommitEdits bundles",
        "cases": s.cases, "distinct_cases": len({c.case_id.rsplit('#', 1)[0] for c in cases}),
        "backend": s.backend, "cpu_count": os.cpu_count(), "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()], "corpus_build_seconds": build_s,
        "runs": runs, "speedup_2_vs_1": speedup, "parallel_efficiency_1_to_2": efficiency,
        "per_case_seconds_1_worker": round(per_case, 6),
        "extrapolation_estimate": table.to_dicts(),
        "note": "extrapolation is an ESTIMATE from this run's per-case time; the machine's load average is "
                "recorded: numbers taken on a shared machine are not quiet",
    }
    s.out.mkdir(parents=True, exist_ok=True)
    write_json(result, s.out / "throughput.json")
    write_text(report_markdown(result, runs, table), s.out / "throughput.md")
    return {"cases": s.cases, "speedup_2_vs_1": speedup,
            "cases_per_second": {r["n_jobs"]: r["cases_per_second"]["all_three"] for r in runs}}


def report_markdown(result: dict, runs: list[dict], table: pl.DataFrame) -> str:
    steps = pl.DataFrame([{"n_jobs": r["n_jobs"], **{f"{k}_s": v for k, v in r["seconds"].items()},
                           "cases_per_s": r["cases_per_second"]["all_three"], "peak_rss_mb_main": r["peak_rss_mb_main"],
                           "peak_rss_mb_workers_floor": r["peak_rss_mb_workers_floor"],
                           "load_1min_at_start": r["load_average_at_start"][0]} for r in runs])
    return "\n".join([
        "# Throughput: programs + spans + optimal per-case work",
        "",
        f"{result['cases']:,} synthetic cases ({result['distinct_cases']:,} distinct CommitEdits cases, cycled), "
        f"joblib backend {result['backend']}, {result['cpu_count']} CPUs, load average (1/5/15 min) "
        f"{result['load_average_before']} before and {result['load_average_after']} after.",
        f"Speedup of 2 workers against 1 worker, same {result['cases']:,} cases: {result['speedup_2_vs_1']}.",
        "",
        markdown_table(steps, 3),
        "",
        f"## Extrapolation to {EXTRAPOLATE_CASES:,} cases (ESTIMATE)",
        "",
        f"From {result['per_case_seconds_1_worker']} s per case at 1 worker; linear scaling, and scaling at the "
        f"parallel efficiency measured from 1 to 2 workers ({result['parallel_efficiency_1_to_2']}). "
        "No I/O, scheduling or memory limits are modelled.",
        "",
        markdown_table(table, 2),
        "",
    ])
