"""The serving sweep: every method on every kernel source under every engine budget and load point, and the
figures a reader compares (speedup over AR, over the best rival).

Method roles (the vocabulary's, analysis.rivals.methods, of the methods params serving.methods names):
`baseline` (AR, one per run), `copy` (Copy-as-Decode with its directive tokens decoded: what a deployment
pays, the headline), `bound` (Copy-as-Decode with free directives: an upper bound, shown, never a rival),
`rival` (prompt lookup, suffix decoding, ...); the speculative ones' verifies are atomic. A family in
serving.best_of (e.g. prompt lookup over its k) gets one more row per load point: its best member there,
by output tokens/s (the rival at its best settings for that load). The best rival at a load point is the
fastest rival row (families included).

Speedup of a method over AR at a load point is the ratio of output tokens/s (closed loop: by Little's law
also the ratio of mean latencies at the same concurrency); over the best rival likewise. Its interval
(`rival_intervals`, closed loop, Copy-as-Decode's rows): a percentile bootstrap over the requests of the steady
window that both methods served (paired by their index in the seeded draw) of the rival's summed latency over
Copy-as-Decode's, the Little's-law form of the same ratio, scaled onto the throughput ratio (the interval's
relative spread around the point). Requests of one closed-loop run share the engine, so the interval is the
spread over which edits were drawn, not over reruns of the scheduler; `requests` gives how many requests of
the steady window it was taken over.

A method is compute-bound at a load point (`with_compute_bound`) when it spends at least a share (params
serving.compute_bound_share) of its busy time on work that grows with the tokens it forwards. Where both methods a
comparison sets side by side are, every forwarded token costs the same whoever it belongs to, so they rank by the
tokens they forward per output token (`tokens_per_output`), not by what they do with them; such a comparison is
reported as that, never as parity (analysis.serving.gains, analysis.claims.serving). AR's decode steps stay below
it at these loads, so a gain over AR is not set that way.

What each method assumes of the engine (`engine_features`, by role): AR runs on any continuous-batching engine;
a speculative rival needs n-gram or suffix drafting with drafts up to its k, and its verify is atomic here where
vLLM V1 trims draft tokens to the budget; Copy-as-Decode needs copy spans scheduled as chunkable new tokens of a
running request (jump-forward of forced tokens), which a stock vLLM lacks. KV-cache capacity and preemption are
not modelled for any method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.stepcost import StepCostModel
from analysis.rivals.methods import ROLES
from analysis.serving.forwards import Trace
from analysis.serving.scheduler import EngineConfig, simulate
from analysis.serving.workload import (Slo, closed_loop_requests, draw_cases, poisson_arrivals, run_figures,
                                       window_latencies)
from analysis.stats import ratio_of_sums_ci

ENGINE_FEATURES = {
    "baseline": "any continuous-batching engine: decode steps and chunked prompt prefill",
    "rival": "speculative decoding with prompt n-gram or suffix drafts up to k tokens; the verify is atomic here "
             "(vLLM V1 trims draft tokens to the step budget)",
    "copy": "copy spans as chunkable new tokens of a running request (jump-forward of forced tokens): an engine "
            "feature a stock vLLM lacks",
    "bound": "as Copy-as-Decode, with the directive tokens free: an upper bound, no engine runs it",
}
MAX_REQUESTS_PER_POINT = 100_000  # about 100x the shipped largest point (1,024): a bound, not a setting
# about 30x the shipped run's 362,000 requests (79 s here): the per-point bound let 2,000 load points through
MAX_REQUESTS_PER_RUN = 10_000_000
CLOSED, OPEN = "closed", "open"


@dataclass(frozen=True)
class Methods:
    """Which method plays which role; best_of: family name -> its members (rivals)."""

    roles: dict[str, str]
    best_of: dict[str, tuple[str, ...]]
    atomic: frozenset[str]   # speculative methods: their verify forwards are not split across steps

    def validate(self, where: str = "serving") -> Methods:
        bad = {m: r for m, r in self.roles.items() if r not in ROLES}
        if bad:
            raise ParamsError(f"{where}.methods: unknown roles {bad}; roles: {', '.join(ROLES)}")
        baselines = [m for m, r in self.roles.items() if r == "baseline"]
        if len(baselines) != 1:
            raise ParamsError(f"{where}.methods must name exactly one baseline (AR), got {baselines}")
        if not any(r == "copy" for r in self.roles.values()):
            raise ParamsError(f"{where}.methods names no Copy-as-Decode method (role copy)")
        for family, members in self.best_of.items():
            if family in self.roles:
                raise ParamsError(f"{where}.best_of: family {family!r} is also a method name")
            wrong = [m for m in members if self.roles.get(m) != "rival"]
            if wrong or not members:
                raise ParamsError(f"{where}.best_of.{family} must list rival methods of {where}.methods, got {list(members)}")
        unknown = sorted(self.atomic - set(self.roles))
        if unknown:
            raise ParamsError(f"{where}: speculative methods not in {where}.methods: {unknown}")
        return self

    @property
    def baseline(self) -> str:
        return next(m for m, r in self.roles.items() if r == "baseline")

    def of(self, role: str) -> list[str]:
        return [m for m, r in self.roles.items() if r == role]


@dataclass(frozen=True)
class Sweep:
    """The load points and workload sizes (params serving.closed_loop, serving.open_loop, serving.slo)."""

    concurrency: tuple[int, ...]
    min_requests: int
    requests_per_client: int
    warmup_share: float
    qps_fractions: tuple[float, ...]
    open_requests: int
    ttft_x: float
    tpot_x: float
    seed: int

    def validate(self, where: str = "serving") -> Sweep:
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise ParamsError(f"{where}.closed_loop.concurrency must list integers >= 1, got {list(self.concurrency)}")
        if 1 not in self.concurrency:
            raise ParamsError(f"{where}.closed_loop.concurrency must include 1 (the unloaded point the SLO is set from)")
        if self.ttft_x <= 0 or self.tpot_x <= 0:
            raise ParamsError(f"{where}.slo: ttft_x and tpot_x must be > 0, got {self.ttft_x}, {self.tpot_x}")
        if not 0 <= self.warmup_share < 1:
            raise ParamsError(f"{where}.closed_loop.warmup_share must lie in [0, 1), got {self.warmup_share}")
        if any(f <= 0 for f in self.qps_fractions):
            raise ParamsError(f"{where}.open_loop.qps_fractions must be > 0, got {list(self.qps_fractions)}")
        most = max(closed_loop_requests(max(self.concurrency), self.min_requests, self.requests_per_client),
                   self.open_requests)
        if most > MAX_REQUESTS_PER_POINT:  # a typo (an extra zero, 10**9) would run for days, not fail
            raise ParamsError(f"{where}: a load point would simulate {most:,} requests (closed_loop: max(min_requests, "
                              f"requests_per_client x concurrency); open_loop.requests), above {MAX_REQUESTS_PER_POINT:,}; "
                              "lower them")
        return self

    def requests_per_method(self) -> int:
        """The requests one method serves over every load point of one source and budget."""
        closed = sum(closed_loop_requests(c, self.min_requests, self.requests_per_client) for c in self.concurrency)
        return closed + len(self.qps_fractions) * self.open_requests


def check_run_size(sweep: Sweep, runs: int, where: str = "serving") -> int:
    """The requests of a whole simulation (`runs`: sources x budgets x methods), or a named error past
    MAX_REQUESTS_PER_RUN; returns the count."""
    total = sweep.requests_per_method() * runs
    if total > MAX_REQUESTS_PER_RUN:
        raise ParamsError(f"{where}: the simulation would serve {total:,} requests ({sweep.requests_per_method():,} per "
                          f"method, source and budget, x {runs:,}), above {MAX_REQUESTS_PER_RUN:,} (the shipped run serves "
                          "about 362,000 in a minute or two); fewer load points, sources, budgets or methods")
    return total


def shared_cases(traces: dict[tuple[str, str], Trace], methods: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """Cases with a trace for every method (sorted), and per method how many of its cases fall outside that set."""
    per_method = {m: {c for c, mm in traces if mm == m} for m in methods}
    missing = [m for m, cases in per_method.items() if not cases]
    if missing:
        raise ParamsError(f"serving: the forwards table has no trace of method(s) {missing}; it has "
                          f"{sorted({mm for _, mm in traces})}")
    common = set.intersection(*per_method.values())
    return sorted(common), {m: len(cases - common) for m, cases in per_method.items()}


def _run(config, cost, traces, method, cases, concurrency, schedule, total, atomic, keep):
    start = time.perf_counter()
    result = simulate(config, cost, lambda i: traces[(cases[i], method)], schedule, concurrency, total,
                      atomic_methods=atomic, keep_steps=keep)
    return result, time.perf_counter() - start


def sweep_source(cost: StepCostModel, config: EngineConfig, traces: dict[tuple[str, str], Trace], methods: Methods,
                 sweep: Sweep, cases: list[str], keep_steps: Callable[[str, int], bool] = lambda m, c: False,
                 progress: Callable[[str], None] = lambda text: None) -> tuple[list[dict], dict]:
    """Rows of every closed- and open-loop run of one source and budget, and the step shapes kept for the replay."""
    rows, kept, latencies = [], {}, {}
    names = list(methods.roles)
    base = {"kernel_source": cost.source, "basis": cost.basis, "max_num_batched_tokens": config.max_num_batched_tokens,
            "max_num_seqs": config.max_num_seqs}
    slo = None
    for concurrency in sorted(sweep.concurrency):
        total = closed_loop_requests(concurrency, sweep.min_requests, sweep.requests_per_client)
        draw = draw_cases(cases, total, sweep.seed, f"closed/{concurrency}")
        for method in names:
            progress(f"{cost.source} T={config.max_num_batched_tokens} C={concurrency} {method}")
            result, wall = _run(config, cost, traces, method, draw, concurrency, None, total, methods.atomic,
                                keep_steps(method, concurrency))
            if concurrency == 1 and method == methods.baseline:
                unloaded = run_figures(result, True, sweep.warmup_share, None)
                slo = Slo(sweep.ttft_x * unloaded["ttft_s_p50"], sweep.tpot_x * unloaded["tpot_s_p50"])
            rows.append({**base, "workload": CLOSED, "load": float(concurrency), "method": method,
                         "role": methods.roles[method], "engine_features": ENGINE_FEATURES[methods.roles[method]],
                         **run_figures(result, True, sweep.warmup_share, slo), "sim_wall_s": wall})
            latencies[(float(concurrency), method)] = window_latencies(result, sweep.warmup_share)
            if result.log.keep:
                kept[(method, concurrency)] = result.log.shapes
    capacity = max(r["requests_per_s"] for r in rows if r["method"] == methods.baseline)
    for fraction in sweep.qps_fractions:
        qps = fraction * capacity
        schedule = poisson_arrivals(sweep.open_requests, qps, sweep.seed, f"open/{fraction}")
        draw = draw_cases(cases, sweep.open_requests, sweep.seed, f"open/{fraction}")
        for method in names:
            progress(f"{cost.source} T={config.max_num_batched_tokens} {qps:.3g} req/s {method}")
            result, wall = _run(config, cost, traces, method, draw, None, schedule, sweep.open_requests, methods.atomic,
                                False)
            rows.append({**base, "workload": OPEN, "load": qps, "qps_fraction": fraction, "method": method,
                         "role": methods.roles[method], "engine_features": ENGINE_FEATURES[methods.roles[method]],
                         **run_figures(result, False, sweep.warmup_share, slo), "sim_wall_s": wall})
    return rows, {"slo": slo, "ar_capacity_requests_per_s": capacity, "steps": kept, "latencies": latencies}


def closed_points(cost: StepCostModel, config: EngineConfig, traces: dict[tuple[str, str], Trace], methods: Methods,
                  sweep: Sweep, cases: list[str], concurrencies: Sequence[int],
                  progress: Callable[[str], None] = lambda text: None) -> list[dict]:
    """Closed-loop rows of every method at `concurrencies` only (the same draws as `sweep_source`): the band's
    runs under another price rule."""
    rows = []
    base = {"kernel_source": cost.source, "basis": cost.basis, "max_num_batched_tokens": config.max_num_batched_tokens,
            "max_num_seqs": config.max_num_seqs}
    for concurrency in sorted(concurrencies):
        total = closed_loop_requests(concurrency, sweep.min_requests, sweep.requests_per_client)
        draw = draw_cases(cases, total, sweep.seed, f"closed/{concurrency}")
        for method in methods.roles:
            progress(f"{cost.source} T={config.max_num_batched_tokens} C={concurrency} {method} ({cost.past_range})")
            result, wall = _run(config, cost, traces, method, draw, concurrency, None, total, methods.atomic, False)
            rows.append({**base, "workload": CLOSED, "load": float(concurrency), "method": method,
                         "role": methods.roles[method], **run_figures(result, True, sweep.warmup_share, None),
                         "sim_wall_s": wall})
    return rows


POINT = ["kernel_source", "max_num_batched_tokens", "workload", "load"]


def with_compute_bound(table: pl.DataFrame, share: float) -> pl.DataFrame:
    """`compute_bound` on every row whose token-bound share of busy time is at least `share` (see the module
    docstring)."""
    if not 0 < share <= 1:
        raise ParamsError(f"serving.compute_bound_share must lie in (0, 1], got {share!r}")
    return table.with_columns(compute_bound=pl.col("token_bound_share") >= share)


def with_families(table: pl.DataFrame, methods: Methods) -> pl.DataFrame:
    """One row per family and load point: its best member there (by output tokens/s), named in `best_member`."""
    extra = []
    for family, members in methods.best_of.items():
        best = (table.filter(pl.col("method").is_in(list(members)))
                .sort("output_tokens_per_s", descending=True).group_by(POINT, maintain_order=True).first()
                .with_columns(best_member=pl.col("method"), method=pl.lit(family), role=pl.lit("rival")))
        extra.append(best)
    out = table.with_columns(best_member=pl.lit(None, pl.String))
    return pl.concat([out, *extra], how="diagonal_relaxed") if extra else out


def with_speedups(table: pl.DataFrame, methods: Methods) -> pl.DataFrame:
    """speedup_vs_ar (output tokens/s over AR's at the same point), and the best rival there: its name and the
    speedup over it (a rival is not compared with itself: over the best of the other rivals)."""
    ar = table.filter(pl.col("method") == methods.baseline).select(*POINT, ar_tps="output_tokens_per_s",
                                                                    ar_p50="latency_s_p50")
    rivals = table.filter(pl.col("role") == "rival").select(*POINT, "method", "output_tokens_per_s")
    best = (rivals.sort("output_tokens_per_s", descending=True).group_by(POINT, maintain_order=True)
            .agg(best_rival=pl.col("method").first(), best_rival_tps=pl.col("output_tokens_per_s").first()))
    out = table.join(ar, on=POINT, how="left").join(best, on=POINT, how="left")
    return out.with_columns(
        speedup_vs_ar=pl.col("output_tokens_per_s") / pl.col("ar_tps"),
        latency_p50_vs_ar=pl.col("ar_p50") / pl.col("latency_s_p50"),
        speedup_vs_best_rival=pl.when(pl.col("role") != "rival")
        .then(pl.col("output_tokens_per_s") / pl.col("best_rival_tps")),
    ).drop("ar_tps", "ar_p50", "best_rival_tps")


@dataclass(frozen=True)
class Resampling:
    """The request bootstrap of the gains over the best rival (params serving.bootstrap_resamples, seed, ci)."""

    resamples: int
    seed: int
    ci: float


def paired_ratio_interval(rival: dict[int, float], copy: dict[int, float], point: float,
                          boot: Resampling) -> tuple[float | None, float | None]:
    """The interval of Copy-as-Decode's gain over a rival at one load point: the bootstrap of summed rival latency
    over summed Copy-as-Decode latency on the requests both served in their windows, scaled onto `point`."""
    shared = sorted(set(rival) & set(copy))
    if not shared or boot.resamples == 0 or point is None:
        return None, None
    num = [rival[i] for i in shared]
    den = [copy[i] for i in shared]
    ratio = sum(num) / sum(den)
    interval = ratio_of_sums_ci(num, den, boot.resamples, boot.seed, boot.ci)
    return point * interval.low / ratio, point * interval.high / ratio


def rival_intervals(table: pl.DataFrame, latencies: dict[tuple, dict[int, float]], methods: Methods,
                    boot: Resampling) -> pl.DataFrame:
    """`vs_best_rival_ci_low` / `_ci_high` on the closed-loop Copy-as-Decode rows (`latencies`: (kernel source,
    budget, load, method) -> request index -> latency); a family named best rival is its best member there."""
    members = {(r["kernel_source"], r["max_num_batched_tokens"], r["load"], r["method"]): r["best_member"]
               for r in table.filter(pl.col("workload") == CLOSED).iter_rows(named=True) if r.get("best_member")}
    lows, highs = [], []
    for r in table.iter_rows(named=True):
        low = high = None
        if r["workload"] == CLOSED and r["role"] == "copy" and r.get("best_rival"):
            point = (r["kernel_source"], r["max_num_batched_tokens"], r["load"])
            rival = members.get((*point, r["best_rival"]), r["best_rival"])
            pair = latencies.get((*point, rival)), latencies.get((*point, r["method"]))
            if pair[0] is not None and pair[1] is not None:
                low, high = paired_ratio_interval(pair[0], pair[1], r["speedup_vs_best_rival"], boot)
        lows.append(low)
        highs.append(high)
    return table.with_columns(vs_best_rival_ci_low=pl.Series(lows, dtype=pl.Float64),
                              vs_best_rival_ci_high=pl.Series(highs, dtype=pl.Float64))
