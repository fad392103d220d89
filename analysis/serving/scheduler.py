"""A continuous-batching engine in the vLLM V1 style, simulated step by step (simpy is the event loop).

Every step the scheduler hands each request some new tokens against one token budget
(`max_num_batched_tokens`); there is no prefill phase and no decode phase (vLLM's scheduler comment:
chunked prefills, speculative tokens and, in future, "jump decoding" are all just new tokens):

1. Running requests first, in the order they were admitted (decode-first): each asks for the rest of its
   current unit: the prompt's remaining prefill, or its next forward's q tokens. A prompt prefill and a
   copy span are chunks of the request's tokens: when the budget is short they are split across steps.
   A speculative verify (k + 1 tokens) is atomic: if it does not fit in what is left of the budget it waits
   for the next step (vLLM would shorten the draft; with a budget of 2,048 this binds only when prefill
   chunks have taken nearly all of it).
2. Then waiting requests, first come first served, while fewer than `max_num_seqs` run and budget is left:
   each starts its prompt prefill with what the budget allows.
3. The step is priced by the step-cost model (analysis.latency.stepcost) on its shape: B scheduled
   sequences, T tokens, the summed context each reads and the attention's (query, key) pairs:
   sum of q_i x (c_i + (q_i + 1) / 2), the chunk attending causally to its own tokens too. Steps priced
   outside the model's fitted range are counted by cause (batch, step tokens, context), steps a pricing limit
   set (the marginal cost past the range, the compute floor) too, and the busy time that grows with the
   tokens a step forwards (`StepCostModel.priced`): where it is nearly all of every method's time, the
   methods rank by the tokens they forward per output token, whatever they do with them.

A unit completes when all its tokens have been computed; a forward's `emitted` tokens are output then
(the first such forward's end is the request's first token). KV-cache capacity is not modelled (no
preemption): every admitted request keeps its cache.

Workloads (analysis.serving.workload) submit requests: closed loop (a finished request is replaced at once
by the next one of the seeded draw, so the concurrency stays at C) or open loop (arrival times given).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from analysis.errors import ParamsError
from analysis.latency.stepcost import StepCostModel
from analysis.serving.forwards import Trace


@dataclass(frozen=True)
class EngineConfig:
    """The scheduler's limits (params serving.engine)."""

    max_num_batched_tokens: int
    max_num_seqs: int

    def validate(self, where: str = "serving.engine") -> EngineConfig:
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParamsError(f"{where}.{name} must be an integer >= 1, got {value!r}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ParamsError(f"{where}.max_num_batched_tokens ({self.max_num_batched_tokens}) is below one step's "
                              f"decode tokens at max_num_seqs ({self.max_num_seqs}): a full batch could not decode")
        return self


class Request:
    """A request's progress through its trace; __slots__ because a run moves millions of units."""

    __slots__ = ("trace", "rid", "arrival", "first", "finish", "unit", "done", "cache", "emitted", "atomic")

    def __init__(self, trace: Trace, rid: int, arrival: float, atomic: bool):
        self.trace, self.rid, self.arrival = trace, rid, arrival
        self.first = self.finish = None
        self.unit = -1        # -1: the prompt prefill; i >= 0: forward i
        self.done = 0         # tokens of the current unit computed so far
        self.cache = 0        # tokens in the KV cache
        self.emitted = 0      # output tokens so far
        self.atomic = atomic  # forwards with q > 1 are speculative verifies (not split across steps)

    def need(self) -> int:
        if self.unit < 0:
            return self.trace.prompt_tokens - self.done
        return self.trace.new_tokens[self.unit] - self.done

    def splittable(self) -> bool:
        return self.unit < 0 or not self.atomic

    def kind(self) -> str:
        if self.unit < 0:
            return PREFILL
        if self.trace.new_tokens[self.unit] == 1:
            return DECODE
        return VERIFY if self.atomic else COPY


PREFILL, DECODE, COPY, VERIFY = "prefill", "decode", "copy", "verify"  # what a sequence's tokens in a step are
STRATA = ("decode only", "prefill chunk", "copy chunk", "verify", "mixed")


def stratum(kinds: Sequence[str]) -> str:
    """A step's mix: decodes only; one kind of chunk only (the prompt's prefill, a copy span, a verify); or mixed
    (decodes beside chunks, or chunks of several kinds)."""
    chunks = {k for k in kinds if k != DECODE}
    if not chunks:
        return STRATA[0]
    if DECODE in kinds or len(chunks) > 1:
        return STRATA[4]
    return {PREFILL: STRATA[1], COPY: STRATA[2], VERIFY: STRATA[3]}[chunks.pop()]


@dataclass
class StepLog:
    """What a run did, step by step (kept only when asked: the replay's sample of real shapes): per step each
    sequence's new tokens, its context, what the tokens are (PREFILL: the prompt; DECODE: one token; COPY: a
    copy span's chunk; VERIFY: a speculative verify) and the predicted seconds."""

    keep: bool = False
    shapes: list[tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...], float]] = field(default_factory=list)


@dataclass(frozen=True)
class RunResult:
    requests: list[Request]
    steps: int
    busy_s: float              # simulated time the engine spent in steps
    tokens_scheduled: int      # sum of T over steps
    seqs_scheduled: int        # sum of B over steps
    extrapolated_steps: int    # steps priced outside the step-cost model's fitted range ...
    extrapolated_by: dict[str, int]  # ... by cause: batch, tokens, context (a step may have several)
    limited_steps: int         # steps a pricing limit set (the marginal cost past the range, the compute floor)
    token_bound_s: float       # busy time that grows with the tokens each step forwards
    end: float                 # simulated time of the last step's end
    log: StepLog
    step_ends: list[float]     # each step's end time ...
    output: list[float]        # ... and the output so far then, in gold tokens (a forward's emitted tokens, scaled
                               # by its request's gold / emitted tokens: the same unit for every method)


class Engine:
    """The scheduler and its queues; `run` drives it with simpy."""

    def __init__(self, config: EngineConfig, cost: StepCostModel, atomic_methods: frozenset[str], log: StepLog):
        self.config, self.cost, self.atomic_methods, self.log = config, cost, atomic_methods, log
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.steps = self.tokens = self.seqs = self.extrapolated = self.limited = 0
        self.by_cause = {"batch": 0, "tokens": 0, "context": 0}
        self.busy = self.output = self.token_bound = 0.0
        self.step_ends: list[float] = []
        self.outputs: list[float] = []

    def schedule(self) -> list[tuple[Request, int]]:
        budget = self.config.max_num_batched_tokens
        plan: list[tuple[Request, int]] = []
        for r in self.running:
            if budget == 0:
                break
            need = r.need()
            if need > budget and not r.splittable():
                if need > self.config.max_num_batched_tokens:
                    raise ParamsError(f"case {r.trace.case_id} ({r.trace.method}): a {need}-token verify forward exceeds "
                                      f"serving.engine.max_num_batched_tokens ({self.config.max_num_batched_tokens})")
                continue
            chunk = min(need, budget)
            plan.append((r, chunk))
            budget -= chunk
        while self.waiting and len(self.running) < self.config.max_num_seqs and budget > 0:
            r = self.waiting.popleft()
            self.running.append(r)
            chunk = min(r.need(), budget)
            plan.append((r, chunk))
            budget -= chunk
        return plan

    def price(self, plan: list[tuple[Request, int]]) -> float:
        tokens = sum_c = keys = c_max = 0
        for r, q in plan:
            tokens += q
            sum_c += r.cache
            keys += q * (r.cache + (q + 1) / 2)
            c_max = max(c_max, r.cache)
        batch = len(plan)
        self.steps += 1
        self.tokens += tokens
        self.seqs += batch
        causes = self.cost.outside_causes(batch, tokens, c_max)
        if any(causes):
            self.extrapolated += 1
            for cause, hit in zip(("batch", "tokens", "context"), causes):
                self.by_cause[cause] += hit
        seconds, per_token, limited = self.cost.priced(batch, tokens, sum_c, keys)
        self.limited += limited
        self.token_bound += per_token
        if self.log.keep:
            self.log.shapes.append((tuple(q for _, q in plan), tuple(r.cache for r, _ in plan),
                                    tuple(r.kind() for r, _ in plan), seconds))
        return seconds

    def advance(self, plan: list[tuple[Request, int]], now: float) -> list[Request]:
        """Apply a finished step; returns the requests it finished."""
        finished = []
        for r, q in plan:
            r.done += q
            r.cache += q
            if r.need() > 0:
                continue
            trace = r.trace
            if r.unit >= 0:
                out = trace.emitted[r.unit]
                if out and r.first is None:
                    r.first = now
                r.emitted += out
                self.output += out * trace.gold_tokens / trace.output_tokens
                # rejected draft tokens are cropped: the cache holds the prompt and the output so far
                r.cache = trace.prompt_tokens + r.emitted
            r.unit += 1
            r.done = 0
            if r.unit == len(trace.new_tokens):
                r.finish = now
                finished.append(r)
        self.step_ends.append(now)
        self.outputs.append(self.output)
        if finished:
            gone = {id(r) for r in finished}
            self.running = [r for r in self.running if id(r) not in gone]
        return finished


def simulate(config: EngineConfig, cost: StepCostModel, arrivals: Callable[[int], Trace | None],
             schedule: Sequence[float] | None, concurrency: int | None, total: int,
             atomic_methods: frozenset[str] = frozenset(), keep_steps: bool = False) -> RunResult:
    """Serve `total` requests drawn by `arrivals(i)` (the i-th request's trace).

    Closed loop (`concurrency` C): C requests at time 0, and each finished request is replaced at once while
    fewer than `total` were submitted. Open loop (`schedule`: the arrival time of each request, increasing)."""
    import simpy

    if (schedule is None) == (concurrency is None):
        raise ParamsError("simulate: give either arrival times (open loop) or a concurrency (closed loop)")
    if concurrency is not None and concurrency < 1:
        raise ParamsError(f"serving concurrency must be >= 1, got {concurrency}")
    env = simpy.Environment()
    engine = Engine(config, cost, atomic_methods, StepLog(keep_steps))
    requests: list[Request] = []
    wake = [env.event()]

    def submit(at: float) -> None:
        i = len(requests)
        trace = arrivals(i)
        r = Request(trace, i, at, trace.method in atomic_methods)
        requests.append(r)
        engine.waiting.append(r)
        if not wake[0].triggered:
            wake[0].succeed()

    def step_loop():
        done = 0
        while done < total:
            if not engine.running and not engine.waiting:
                wake[0] = env.event()
                yield wake[0]
                continue
            plan = engine.schedule()
            if not plan:
                raise ParamsError("serving: a step scheduled nothing while requests wait (engine limits too small)")
            seconds = engine.price(plan)
            engine.busy += seconds
            yield env.timeout(seconds)
            finished = engine.advance(plan, env.now)
            done += len(finished)
            if concurrency is not None:
                for _ in finished:
                    if len(requests) < total:
                        submit(env.now)

    def arrival_loop():
        for at in schedule:
            if at > env.now:
                yield env.timeout(at - env.now)
            submit(env.now)

    if concurrency is not None:
        for _ in range(min(concurrency, total)):
            submit(0.0)
    else:
        if len(schedule) != total:
            raise ParamsError(f"simulate: {len(schedule)} arrival times for {total} requests")
        env.process(arrival_loop())
    loop = env.process(step_loop())
    env.run(until=loop)
    return RunResult(requests, engine.steps, engine.busy, engine.tokens, engine.seqs, engine.extrapolated,
                     dict(engine.by_cause), engine.limited, engine.token_bound, env.now, engine.log, engine.step_ends,
                     engine.outputs)
