"""Workloads for the serving simulation and what each run measured.

Requests are drawn (seeded, with replacement) from the cases every simulated method has, and every method
serves the same draw: its own trace of the same case, so two methods' figures are paired by request.

* Closed loop at concurrency C: C requests in flight from time 0, each finished one replaced at once (no
  think time), `max(min_requests, requests_per_client * C)` requests in all. Figures are taken over a steady
  window: from the completion of the first `warmup_share` of the requests to the last submission (until
  then exactly C requests are in flight; after it the run drains): throughput is the output the engine's
  steps produced inside the window over its length, latencies those of the requests submitted inside it.
* Open loop: Poisson arrivals at a rate (seeded exponential gaps); figures over every request, throughput
  over the time from the first arrival to the last completion.

Per run (`run_figures`): output tokens/s (in gold tokens of the edited text, the same count for every
method: a forward's emitted tokens scaled by its request's gold over emitted tokens), requests/s, latency, time to first token (TTFT: arrival to the end of the first forward that emits)
and time per output token (TPOT: first token to finish over the output tokens after the first) at p50, p90
and p99, and goodput: requests/s that met both the TTFT and the TPOT objective. How its steps were priced:
the share priced outside the step-cost model's fitted range, in all and by cause (batch past the measured
batch, step tokens past the profiled ones, context past the profiled ones), the share a pricing limit set,
the share of busy time that grows with the tokens forwarded (`token_bound_share`), and the tokens the
engine forwarded per output token over the whole run (the prompt's prefill included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.corpora.sample import sample_ids
from analysis.errors import ParamsError
from analysis.serving.scheduler import Request, RunResult

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Slo:
    """A request meets its objectives when TTFT <= ttft_s and TPOT <= tpot_s (seconds on its source)."""

    ttft_s: float
    tpot_s: float


def draw_cases(cases: list[str], n: int, seed: int, stream: str) -> list[str]:
    """n case ids drawn with replacement; the same (seed, stream) gives the same draw on every machine."""
    if not cases:
        raise ParamsError("serving workload: no case has a trace for every simulated method")
    return sample_ids(cases, n, seed, stream, replace=True)


def poisson_arrivals(n: int, qps: float, seed: int, stream: str) -> list[float]:
    if not qps > 0:
        raise ParamsError(f"serving: an open-loop rate must be > 0 requests/s, got {qps!r}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, *stream.encode()]))
    return np.cumsum(rng.exponential(1.0 / qps, size=n)).tolist()


def closed_loop_requests(concurrency: int, min_requests: int, per_client: int) -> int:
    return max(min_requests, per_client * concurrency)


def tpot(r: Request) -> float | None:
    after_first = r.emitted - 1
    return (r.finish - r.first) / after_first if after_first > 0 else None


def _percentiles(values: list[float], name: str) -> dict[str, float | None]:
    if not values:
        return {f"{name}_p{p}": None for p in PERCENTILES}
    return {f"{name}_p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES))}


def window(result: RunResult, closed: bool, warmup_share: float) -> tuple[list[Request], float, float]:
    """The requests a run's latency figures are taken over, and the window its throughput is measured in.

    Closed loop: from the completion of the first `warmup_share` of the requests to the last submission (until
    then exactly C requests are in flight); the requests submitted inside it. Open loop: every request, from
    the first arrival to the last completion."""
    done = sorted((r for r in result.requests if r.finish is not None), key=lambda r: r.finish)
    if not done:
        raise ParamsError("serving: a run finished no request")
    if not closed:
        return done, min(r.arrival for r in result.requests), done[-1].finish
    skip = int(warmup_share * len(done))
    start = done[skip - 1].finish if skip > 0 else 0.0
    end = max(r.arrival for r in result.requests)
    if end <= start:  # too few requests for a steady window: the whole run
        return done, 0.0, done[-1].finish
    return [r for r in done if start <= r.arrival <= end] or done, start, end


def window_latencies(result: RunResult, warmup_share: float) -> dict[int, float]:
    """Closed loop: each request of the steady window (`window`) by its index in the draw, with its latency. Every
    method serves the same draw, so two methods' latencies pair on the index."""
    kept, _, _ = window(result, True, warmup_share)
    return {r.rid: r.finish - r.arrival for r in kept}


def output_between(result: RunResult, start: float, end: float) -> float:
    """Gold-equivalent output tokens produced by steps ending in (start, end]."""
    from bisect import bisect_right

    def at(t: float) -> float:
        i = bisect_right(result.step_ends, t)
        return result.output[i - 1] if i else 0.0

    return at(end) - at(start)


def run_figures(result: RunResult, closed: bool, warmup_share: float, slo: Slo | None) -> dict:
    kept, start, end = window(result, closed, warmup_share)
    span = max(end - start, 1e-12)
    finished = sum(1 for r in result.requests if r.finish is not None and start < r.finish <= end)
    latency = [r.finish - r.arrival for r in kept]
    ttft = [r.first - r.arrival for r in kept if r.first is not None]
    tpots = [t for r in kept if (t := tpot(r)) is not None]
    met = None
    if slo is not None:
        met = sum(1 for r in kept if r.first is not None and r.first - r.arrival <= slo.ttft_s
                  and (tpot(r) is None or tpot(r) <= slo.tpot_s))
    return {
        "requests": len(kept), "window_s": span,
        "output_tokens_per_s": output_between(result, start, end) / span,
        "requests_per_s": finished / span,
        **_percentiles(latency, "latency_s"), **_percentiles(ttft, "ttft_s"), **_percentiles(tpots, "tpot_s"),
        "latency_mean_s": float(np.mean(latency)),
        "goodput_requests_per_s": None if met is None else met / span,
        "slo_attained": None if met is None else met / len(kept),
        "steps": result.steps, "mean_batch": result.seqs_scheduled / max(result.steps, 1),
        "mean_step_tokens": result.tokens_scheduled / max(result.steps, 1),
        "extrapolated_step_share": result.extrapolated_steps / max(result.steps, 1),
        **{f"extrapolated_{cause}_share": n / max(result.steps, 1) for cause, n in result.extrapolated_by.items()},
        "priced_at_limit_share": result.limited_steps / max(result.steps, 1),
        "token_bound_share": result.token_bound_s / max(result.busy_s, 1e-12),
        "tokens_per_output": result.tokens_scheduled / max(result.output[-1] if result.output else 0.0, 1e-12),
        "busy_share": result.busy_s / max(result.end, 1e-12),
    }
