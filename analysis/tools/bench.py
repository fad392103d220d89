"""`copydecode bench throughput`: cases per second of the per-case work of programs + spans + optimal
with 1 and 2 workers (analysis.parallel.workers), peak memory, and an extrapolation to 1M cases.

The synthetic corpus: the CommitEdits cases mined from the bundles that params `corpora.commits`
lists (with `corpora.commit_defaults`), repeated in mining order until `--cases` cases, each copy with
its own case id (so the work per case is real edit work, in the real mix of sizes). A size below the
number of mined cases takes them evenly spaced over the mining order (every repository, not the
first one's oldest commits), so a small run's per-case time stands for the whole mix. For each worker
count the three steps run on the whole corpus in this process's pool, timed separately:

  programs  analysis.oracle.programs.oracle_programs (tokenization + line and token oracles)
  spans     analysis.coverage.spans.build_spans on those programs
  optimal   the cost-optimal line and token programs (analysis.oracle.span_frames, `optimal.baseline`'s
            fitted kernel at `bounds.context`) and their span rows

It runs the stages' own domain functions on their own settings (analysis.corpora.settings,
analysis.oracle.settings, programs.token_min_copy, spans.prompt_overhead_tokens), and imports no stage.

The steps run shard by shard (`parallel.shard_cases` cases at a time, analysis.parallel.shards), as the stages
do, so the peak memory is that of one shard's work, not of the whole corpus.

Peak memory: the largest summed resident set of this process and all its children (the joblib
workers), sampled every SAMPLE_SECONDS by a thread (psutil) during each run, so a peak shorter than
that interval can be missed; beside it, the largest resident set of this process and of any ended
worker (`getrusage`, RUSAGE_SELF and RUSAGE_CHILDREN).

Size: params `bench.cases` (20,000 in the shipped params.yaml), or `--cases N` for one run (tests use
a few cases).

CPU seconds: beside each step's wall seconds, the CPU seconds of this process (`time.process_time`):
at 1 worker they are the work itself, so cases per CPU second is the per-core throughput even on a
busy machine, where wall time also counts the time other processes held the core.

Backends (params `bench.backends`, or `--backend a,b`): the 1-worker run once, and every worker count
above 1 with each backend; `runs` holds the first backend's (the README quotes them) and
`backend_runs` the others' at the same worker counts, with their total time over the first backend's
at the same count (`overhead_vs_first`: a dask LocalCluster's scheduling and transfers against
loky's; the cluster's start is timed apart, as the pool's).

Memory by size (params `bench.memory_sizes`, `--memory-sizes N,M` or `none`): for each size, the
three steps at 1 worker on that many cases in a fresh process (spawned), whose peak resident memory
(`own_peak_mb`: the kernel's high-water mark of that process, exact, not sampled) shows whether memory
grows with the corpus;
`memory_growth_largest_vs_previous` is the ratio of the two largest sizes' peaks.

The extrapolation (an ESTIMATE, labelled so): hours for 1M cases on 1, 16 and 64 cores, from the
measured per-case time at 1 worker, under (a) linear scaling and (b) the parallel efficiency measured
here from 1 to 2 workers held at every core count. Neither accounts for I/O, a cluster's scheduling or
memory limits. The machine's load average is recorded beside every number: a shared machine's
numbers are not quiet.

Writes reports/bench/throughput.json and .md (`--out` to change the folder).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import platform
import resource
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from analysis.corpora import registry
from analysis.corpora.cases import Case, cases_frame
from analysis.corpora.settings import CorporaSettings
from analysis.corpora.settings import settings as corpora_settings
from analysis.coverage.spans import build_spans, prompt_overhead_tokens
from analysis.errors import ParamsError
from analysis.grammar.program import parse
from analysis.latency.names import FIT_SOURCE
from analysis.latency.sources import kernels_for
from analysis.layout import BENCH_DIR
from analysis.oracle.optimal import TokenizerDirectives, dp_cost
from analysis.oracle.programs import oracle_programs, token_min_copy
from analysis.oracle.settings import OptimalSettings
from analysis.oracle.settings import settings as optimal_settings
from analysis.oracle.span_frames import OracleCase, parallel_span_frame
from analysis.parallel.shards import shard_cases
from analysis.parallel.workers import (SERIAL, ParallelSettings, check_parallel, cluster_session, map_cases,
                                       parallel_settings)
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.io import markdown_table, write_json, write_text
from analysis.pipeline.params import get, number_list
from analysis.text.tokens import load_tokenizer

STEPS = ("programs", "spans", "optimal")
EXTRAPOLATE_CASES = 1_000_000
EXTRAPOLATE_CORES = (1, 16, 64)
SAMPLE_SECONDS = 0.05


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
    shard_cases: int              # params parallel.shard_cases
    chunks_per_job: int           # params parallel.chunks_per_job
    backends: tuple[str, ...]     # --backend a,b or params bench.backends (first: `runs`; `backend` is backends[0])
    memory_sizes: tuple[int, ...]  # --memory-sizes or params bench.memory_sizes
    address: str                  # params parallel.address (dask/ray)

    def parallel(self, jobs: int, backend: str | None = None) -> ParallelSettings:
        backend = backend or self.backend
        return ParallelSettings(jobs, backend, self.chunks_per_job, self.address if backend in ("dask", "ray") else "")


def synthetic_cases(corpora: CorporaSettings, n: int) -> list[Case]:
    """`n` cases cycled from the CommitEdits corpora of params (see the module docstring)."""
    base: list[Case] = []
    for kind, corpus_settings in corpora.builds:
        if kind == "commits":
            base += registry.build_corpus(kind, corpus_settings).cases
    if not base:
        raise ParamsError("bench throughput: params corpora.commits lists no repository to build the synthetic corpus from")
    if n < len(base):
        base = [base[i * len(base) // n] for i in range(n)]
    return [replace(base[i % len(base)], case_id=f"{base[i % len(base)].case_id}#{i // len(base)}")
            for i in range(n)]


def _peak_mb() -> tuple[float, float]:
    scale = 1 if platform.system() == "Darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale / 2**20
    return round(own, 1), round(children, 1)


class TreePeak:
    """The largest summed RSS of this process and its children, sampled by a thread while the block runs."""

    def __init__(self, interval: float = SAMPLE_SECONDS):
        self.interval, self.peak_bytes = interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _tree_rss(self) -> int:
        import psutil

        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            try:
                total += child.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass  # a worker that ended between the listing and the read
        return total

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._tree_rss())
            self._stop.wait(self.interval)

    def __enter__(self) -> "TreePeak":
        self.peak_bytes = self._tree_rss()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._tree_rss())

    @property
    def peak_mb(self) -> float:
        return round(self.peak_bytes / 2**20, 1)


def _load_in_worker(chunk, tokenizer) -> list[int]:
    import importlib

    for module in STEP_MODULES:  # a step's first chunk in a fresh worker would otherwise pay its imports
        importlib.import_module(module)
    return [len(tokenizer.encode("x = 1\n").ids) for _ in chunk]


STEP_MODULES = ("analysis.oracle.programs", "analysis.coverage.spans", "analysis.oracle.span_frames")


def start_pool(parallel: ParallelSettings, tokenizer) -> float | None:
    """Start the workers (the steps' imports, the tokenizer loaded by spec) before the timed steps, so a step's
    time is its work and the chunks' transfer, not the pool's start; returns the seconds it took
    (None at 1 worker: no pool)."""
    if parallel.serial:
        return None
    t0 = time.perf_counter()
    map_cases(_load_in_worker, range(parallel.workers() * parallel.chunks_per_job), parallel, tokenizer)
    return round(time.perf_counter() - t0, 3)


def run_steps(cases: list[Case], s: BenchSettings, parallel: ParallelSettings, tokenizer,
              cpu: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds of each step over `cases` with `parallel`, `s.shard_cases` cases at a time; this
    process's CPU seconds of each step are added to `cpu` when given."""
    seconds = dict.fromkeys(STEPS, 0.0)
    cpu_seconds = dict.fromkeys(STEPS, 0.0)
    for start in range(0, len(cases), s.shard_cases):
        for step, took in shard_steps(cases[start:start + s.shard_cases], s, parallel, tokenizer, cpu_seconds).items():
            seconds[step] += took
    if cpu is not None:
        cpu.update({k: round(v, 3) for k, v in cpu_seconds.items()})
    return {k: round(v, 3) for k, v in seconds.items()}


def shard_steps(cases: list[Case], s: BenchSettings, parallel: ParallelSettings, tokenizer,
                cpu: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds of each step over one shard of cases (this process's CPU seconds added to `cpu`)."""
    seconds: dict[str, float] = {}
    cpu = {} if cpu is None else cpu
    c0, t0 = time.process_time(), time.perf_counter()
    programs = oracle_programs(cases, tokenizer, s.token_min_copy, parallel)
    seconds["programs"] = time.perf_counter() - t0
    cpu["programs"] = cpu.get("programs", 0.0) + time.process_time() - c0
    joined = programs.join(cases_frame(cases).select("case_id", "framing", "source", "target"),
                           on=["case_id", "framing"], how="left")
    c0, t0 = time.process_time(), time.perf_counter()
    build_spans(joined, tokenizer, s.prompt_overhead_tokens, parallel)
    seconds["spans"] = time.perf_counter() - t0
    cpu["spans"] = cpu.get("spans", 0.0) + time.process_time() - c0
    o = s.optimal
    c0, t0 = time.process_time(), time.perf_counter()
    kernel, = kernels_for(o.kernel, (FIT_SOURCE,), [o.baseline])
    cost = dp_cost(kernel.model, o.cost)
    directives = TokenizerDirectives(tokenizer)
    sources = tokenizer.encode_many([c.source for c in cases])
    targets = tokenizer.encode_many([c.target for c in cases])
    texts = {(r["case_id"], r["level"]): r["program"] for r in programs.iter_rows(named=True)}
    oracle_cases = [OracleCase(c.case_id, c.corpus, c.framing, src, tgt,
                                {lv: parse(texts[(c.case_id, lv)]) for lv in o.levels})
                    for c, src, tgt in zip(cases, sources, targets)]
    parallel_span_frame(oracle_cases, o.levels, "optimal", cost, directives, parallel)
    seconds["optimal"] = time.perf_counter() - t0
    cpu["optimal"] = cpu.get("optimal", 0.0) + time.process_time() - c0
    return seconds


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


def _int_list(value, what: str) -> tuple[int, ...]:
    """A comma-separated string or a list of positive integers ("none" or empty: no value)."""
    if value is None or value == "none" or value == "":
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ParamsError(f"bench throughput: {what} must be a list of positive integers, got {value!r}")
    try:
        sizes = tuple(int(x) for x in items if not isinstance(x, bool))
    except (TypeError, ValueError):
        raise ParamsError(f"bench throughput: {what} must be positive integers, got {value!r}") from None
    if len(sizes) != len(items) or any(n < 1 for n in sizes):
        raise ParamsError(f"bench throughput: {what} must be positive integers, got {value!r}")
    return sizes


# `copydecode bench throughput`: its help line and what it reads and writes (the CLI's --help)
HELP = ("cases/s of programs + spans + optimal with 1 and 2 workers, peak memory, 1M-case estimate -> "
        "reports/bench/throughput.{json,md}")
READS_WRITES = ("reads the git bundles of params corpora.commits (synthetic cases) and params bench, parallel; "
                "writes reports/bench/throughput.json and throughput.md")
DESCRIPTION = f"Throughput of the per-case stages: {HELP}. It {READS_WRITES}."


def add_arguments(parser) -> None:
    """`bench throughput`'s own options (settings(params, cases, jobs, backend, bench_out, memory_sizes))."""
    parser.add_argument("--cases", type=int, default=None,
                        help="synthetic cases (default: params bench.cases, 20,000 as shipped)")
    parser.add_argument("--jobs", default=None, help="worker counts to time, comma-separated (default: params "
                                                      "bench.jobs, 1,2 as shipped)")
    parser.add_argument("--backend", default=None,
                        help="joblib backends, comma-separated: 1 worker once, more workers with each "
                             "(default: params bench.backends)")
    parser.add_argument("--memory-sizes", default=None, dest="memory_sizes",
                        help="case counts whose peak memory is measured in a fresh process, comma-separated, "
                             "or none (default: params bench.memory_sizes)")
    parser.add_argument("--out", default=argparse.SUPPRESS, dest="bench_out", metavar="DIR",
                        help="output folder (default reports/bench; `copydecode --out DIR bench throughput` "
                             "writes DIR/reports/bench)")


def settings(params: dict, cases: int | None, jobs: str | None, backend: str | None,
             bench_out: str | Path | None = None, memory_sizes: str | None = None) -> BenchSettings:
    """The command line's --cases/--jobs/--backend/--out/--memory-sizes (params bench.* where absent),
    and what the timed steps read from params (the programs, spans, corpora and optimal stages' own
    readers)."""
    if cases is None:
        cases = get(params, "bench.cases")
    if isinstance(cases, bool) or not isinstance(cases, int):
        raise ParamsError(f"bench throughput: the case count (--cases or params bench.cases) must be an integer, got {cases!r}")
    backends = backend.split(",") if backend else get(params, "bench.backends", list)
    if not isinstance(backends, (list, tuple)) or not backends or len(set(backends)) != len(backends):
        raise ParamsError(f"bench throughput: --backend or params bench.backends must list distinct joblib backends, got {backends!r}")
    try:
        jobs = (tuple(int(j) for j in str(jobs).split(",")) if jobs is not None
                else number_list(params, "bench.jobs", integer=True))
    except ValueError:
        raise ParamsError(f"bench throughput: --jobs must be comma-separated integers, got {jobs!r}") from None
    if cases < 1:
        raise ParamsError(f"bench throughput: --cases must be >= 1, got {cases}")
    if not jobs or any(j < 1 for j in jobs) or 1 not in jobs:
        raise ParamsError(f"bench throughput: --jobs must list positive worker counts including 1, got {jobs}")
    sizes = _int_list(get(params, "bench.memory_sizes", list) if memory_sizes is None else memory_sizes,
                      "--memory-sizes or params bench.memory_sizes")
    base = parallel_settings(params)
    for name in backends:
        for j in jobs:
            check_parallel(ParallelSettings(j, name, base.chunks_per_job, base.address if name in ("dask", "ray") else ""))
    return BenchSettings(cases, jobs, backends[0], Path(bench_out or BENCH_DIR), tokenizer_spec(params),
                         token_min_copy(params), prompt_overhead_tokens(params),
                         corpora_settings(params), optimal_settings(params),
                         shard_cases(params), base.chunks_per_job, tuple(backends), tuple(sorted(set(sizes))),
                         base.address)


def _timed_run(cases: list[Case], s: BenchSettings, parallel: ParallelSettings, tokenizer) -> dict:
    """One timed run of the three steps with `parallel` (a cluster backend's session and the pool started
    before the timed steps, their start timed apart)."""
    load = [round(x, 2) for x in os.getloadavg()]
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        stack.enter_context(cluster_session(parallel))
        cluster_start = round(time.perf_counter() - t0, 3)
        pool_start = start_pool(parallel, tokenizer)
        cpu: dict[str, float] = {}
        with TreePeak() as tree:
            seconds = run_steps(cases, s, parallel, tokenizer, cpu)
    own, workers = _peak_mb()
    total, cpu_total = sum(seconds.values()), sum(cpu.values())
    return {"n_jobs": parallel.n_jobs, "backend": parallel.backend, "seconds": seconds, "total_seconds": round(total, 3),
            "cpu_seconds_main": cpu, "cases_per_cpu_second_main": round(s.cases / cpu_total, 2) if cpu_total else None,
            "cases_per_second": {k: round(s.cases / v, 2) for k, v in seconds.items()}
            | {"all_three": round(s.cases / total, 2)},
            "pool_start_seconds": pool_start,
            "cluster_start_seconds": cluster_start if parallel.backend in ("dask", "ray") and not parallel.serial else None,
            "peak_rss_mb_tree_sampled": tree.peak_mb,
            "peak_rss_mb_main": own, "peak_rss_mb_workers_floor": workers, "load_average_at_start": load}


def _memory_child(s: BenchSettings, n: int, queue) -> None:
    tokenizer = load_tokenizer(s.tokenizer)
    cases = synthetic_cases(s.corpora, n)
    t0 = time.perf_counter()
    run_steps(cases, replace(s, cases=n), SERIAL, tokenizer)
    queue.put({"cases": n, "seconds": round(time.perf_counter() - t0, 3), "peak_rss_mb": own_peak_mb()})


def own_peak_mb() -> float:
    """This process's peak resident memory: VmHWM of /proc/self/status where there is one (the
    high-water mark of this process's own memory map, which an exec starts afresh), else getrusage's
    ru_maxrss (which on Linux keeps the forking parent's peak across fork and exec, so a spawned
    child would report its parent's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        pass
    return _peak_mb()[0]


def memory_by_size(s: BenchSettings) -> list[dict]:
    """Peak resident memory of the three steps at 1 worker, per size, each in a fresh spawned process."""
    context = multiprocessing.get_context("spawn")
    rows = []
    for n in s.memory_sizes:
        queue = context.Queue()
        child = context.Process(target=_memory_child, args=(s, n, queue))
        child.start()
        row = queue.get()
        child.join()
        if child.exitcode:
            raise RuntimeError(f"bench throughput: the memory run at {n} cases failed (exit code {child.exitcode})")
        rows.append(row)
    return rows


def run(s: BenchSettings) -> dict:
    load_before = [round(x, 2) for x in os.getloadavg()]
    tokenizer = load_tokenizer(s.tokenizer)
    t0 = time.perf_counter()
    cases = synthetic_cases(s.corpora, s.cases)
    build_s = round(time.perf_counter() - t0, 3)
    backends = s.backends or (s.backend,)
    runs = [_timed_run(cases, s, s.parallel(jobs, backends[0]), tokenizer) for jobs in s.jobs]
    backend_runs = []
    for backend in backends[1:]:
        for jobs in s.jobs:
            if jobs == 1:
                continue  # one serial run: the backend is not used
            r = _timed_run(cases, s, s.parallel(jobs, backend), tokenizer)
            first = next(x for x in runs if x["n_jobs"] == jobs)
            backend_runs.append(r | {"overhead_vs_first": round(r["total_seconds"] / first["total_seconds"], 3)})
    memory = memory_by_size(s)
    growth = (round(memory[-1]["peak_rss_mb"] / memory[-2]["peak_rss_mb"], 3) if len(memory) >= 2 else None)
    serial = next(r for r in runs if r["n_jobs"] == 1)
    two = next((r for r in runs if r["n_jobs"] == 2), None)
    speedup = None if two is None else round(serial["total_seconds"] / two["total_seconds"], 3)
    efficiency = None if speedup is None else round((speedup - 1) / (2 - 1), 3)
    per_case = serial["total_seconds"] / s.cases
    table = extrapolation(per_case, efficiency)
    result = {
        "what": "per-case work of programs + spans + optimal on a synthetic corpus cycled from the CommitEdits bundles",
        "cases": s.cases, "shard_cases": s.shard_cases, "distinct_cases": len({c.case_id.rsplit('#', 1)[0] for c in cases}),
        "backend": backends[0], "backends": list(backends), "cpu_count": os.cpu_count(), "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()], "corpus_build_seconds": build_s,
        "runs": runs, "backend_runs": backend_runs, "speedup_2_vs_1": speedup, "parallel_efficiency_1_to_2": efficiency,
        "per_case_seconds_1_worker": round(per_case, 6),
        "cases_per_cpu_second_1_worker": serial["cases_per_cpu_second_main"],
        "memory_by_size": memory, "memory_growth_largest_vs_previous": growth,
        "extrapolation_estimate": table.to_dicts(),
        "note": "extrapolation is an ESTIMATE from this run's per-case time; the machine's load average is "
                "recorded: numbers taken on a shared machine are not quiet",
    }
    s.out.mkdir(parents=True, exist_ok=True)
    write_json(result, s.out / "throughput.json")
    write_text(report_markdown(result, runs, table), s.out / "throughput.md")
    return {"cases": s.cases, "speedup_2_vs_1": speedup,
            "cases_per_second": {r["n_jobs"]: r["cases_per_second"]["all_three"] for r in runs},
            "backend_overhead": {f"{r['backend']}/{r['n_jobs']}": r["overhead_vs_first"] for r in backend_runs},
            "memory_by_size": {m["cases"]: m["peak_rss_mb"] for m in memory}}


def report_markdown(result: dict, runs: list[dict], table: pl.DataFrame) -> str:
    every = runs + result.get("backend_runs", [])
    steps = pl.DataFrame([{"n_jobs": r["n_jobs"], "backend": r.get("backend", result["backend"]),
                           **{f"{k}_s": v for k, v in r["seconds"].items()},
                           "cases_per_s": r["cases_per_second"]["all_three"],
                           "cpu_s_main": round(sum(r.get("cpu_seconds_main", {}).values()), 3),
                           "cases_per_cpu_s_main": r.get("cases_per_cpu_second_main"),
                           "overhead_vs_first": r.get("overhead_vs_first"),
                           "cluster_start_s": r.get("cluster_start_seconds"),
                           "pool_start_s": r["pool_start_seconds"], "peak_rss_mb_tree": r["peak_rss_mb_tree_sampled"], "peak_rss_mb_main": r["peak_rss_mb_main"],
                           "peak_rss_mb_workers_floor": r["peak_rss_mb_workers_floor"],
                           "load_1min_at_start": r["load_average_at_start"][0]} for r in every])
    memory = result.get("memory_by_size") or []
    memory_lines = ([] if not memory else [
        "## Peak memory by corpus size",
        "",
        "The three steps at 1 worker, each size in a fresh process (peak resident memory of that process, "
        f"its VmHWM); ratio of the two largest sizes' peaks: {result['memory_growth_largest_vs_previous']}.",
        "",
        markdown_table(pl.DataFrame(memory), 1),
        "",
    ])
    return "\n".join([
        "# Throughput: programs + spans + optimal per-case work",
        "",
        f"{result['cases']:,} synthetic cases ({result['distinct_cases']:,} distinct CommitEdits cases, cycled), "
        f"{result['shard_cases']:,} cases per shard, joblib backend {result['backend']}, {result['cpu_count']} CPUs, load average (1/5/15 min) "
        f"{result['load_average_before']} before and {result['load_average_after']} after.",
        f"Speedup of 2 workers against 1 worker, same {result['cases']:,} cases: {result['speedup_2_vs_1']}.",
        "Step times exclude the worker pool's start (`pool_start_s`, timed before the steps). `peak_rss_mb_tree`: "
        "the largest summed resident memory of this process and its workers, sampled every "
        f"{SAMPLE_SECONDS} s; `peak_rss_mb_main` / `_workers_floor`: getrusage maxima (the latter of ended workers only). "
        "`cpu_s_main`: CPU seconds of this process (at 1 worker: the work itself; `cases_per_cpu_s_main` is the "
        "per-core rate, which a busy machine does not lower); `overhead_vs_first`: total seconds over the first "
        "backend's at the same worker count; `cluster_start_s`: a cluster backend's start, not in the step times.",
        "",
        markdown_table(steps, 3),
        "",
        *memory_lines,
        f"## Extrapolation to {EXTRAPOLATE_CASES:,} cases (ESTIMATE)",
        "",
        f"From {result['per_case_seconds_1_worker']} s per case at 1 worker; linear scaling, and scaling at the "
        f"parallel efficiency measured from 1 to 2 workers ({result['parallel_efficiency_1_to_2']}). "
        "No I/O, scheduling or memory limits are modelled.",
        "",
        markdown_table(table, 2),
        "",
    ])
