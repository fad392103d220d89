"""The AR-versus-prefill profiler: what copying N tokens costs by decoding and by one prefill.

For each (model, dtype, device, context c, N):
- T_ar(N): N sequential one-token forwards, each appending to a KV cache that holds c tokens first.
- T_prefill(N): one forward appending all N tokens to the same cache state, computing logits for the
  last position only (`logits_to_keep=1`: a copy needs no logits inside the span, only after it).

Every repeat starts from the identical cache state: the context is prefilled once, and after each
measurement the dynamic cache is cropped back to exactly c tokens (`DynamicCache.crop(-k)`); a static
cache's write position is moved back to c (`rewind_static`), so later repeats overwrite the same
slots, and attention is masked past the current position.

AR baselines (`baselines`):
- eager: the plain transformers loop with a DynamicCache (Python overhead on every step).
- static: a preallocated StaticCache (no reallocation or concatenation per step).
- static_compiled: the static loop through `torch.compile(mode="reduce-overhead")`, which uses CUDA
  graphs on a GPU; the closest this stack gets to a serving engine's decode step.

Ratios are measured as ratios. The unit of measurement is a *pair*: for one (model, context, AR
baseline, repeat), the AR run and the prefill grid run back to back, in an order that alternates
from repeat to repeat (`kernels_profile.measure.interleave.interleaved_order`, seeded by `order_seed`), so
speedup(N) = T_ar(N) / T_prefill(N) is computed inside one pair (seconds apart, not minutes). Each
baseline gets its own prefill grid (prefill rows carry `pair_baseline`; their `baseline` stays
"eager", the dynamic cache prefill runs on). `ar_mode: prefix` runs N_max steps once per pair and
reads T_ar(N) for every N off the same run as the time of its first N steps (the first N steps of a
longer run are exactly an N-step run); `separate` runs, for each N, AR(N) and prefill(N) back to back.

The run over a grid (checkpoints, the profiling session and its environment sidecar: the file I/O)
is kernels_profile.measure.session; this module only measures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.names import AR_LOOPS
from analysis.pipeline.params import check_threads
from kernels_profile.measure.timing import NoiseRules
from kernels_profile.measure.interleave import interleaved_order
from kernels_profile.measure.machine import machine_info
from kernels_profile.runtime.models import DTYPES, LoadedModel, cache_kwarg, model_label
from kernels_profile.runtime.checkpoints import checkpoint_key

# Bump when what a checkpointed row means changes (the timed code, the pairing, the columns):
# every checkpoint written by another version is then measured again.
MEASUREMENT_VERSION = "pairs-2"  # pairs-2: prefill kinds, the static cache built inside inference_mode
AR_MODES = ("prefix", "separate")
# prefill kind -> the method name it runs under in a pair's order (the eager one keeps its old name, so a
# profile with only it orders each pair exactly as before)
PREFILL_METHODS = {"eager": "prefill", "compiled": "prefill_compiled"}
COMPILED_SHAPES_LIMIT = 64  # graphs the compiled prefill may build (one per N); ProfileSpec refuses larger grids
RAW_SCHEMA = {
    "model": pl.String, "weights": pl.String, "dtype": pl.String, "device": pl.String,
    "method": pl.String, "baseline": pl.String, "context": pl.Int64, "n": pl.Int64,
    "repeat": pl.Int64, "seconds": pl.Float64,
}
# Columns added to every raw row (beside the environment columns of `environment`).
PAIR_SCHEMA = {
    "pair_id": pl.String,        # model/c<context>/<baseline>/r<repeat>: the AR run and prefill grid timed together
    "pair_baseline": pl.String,  # the AR baseline of the pair (for prefill rows: the one they are paired with)
    "order_index": pl.Int64,     # 0 if this method ran first in its pair (per N in ar_mode separate), else 1
    "run_id": pl.String,         # the profiling session that measured the pair (run-<run_id>.json)
    "load1_before": pl.Float64,  # 1-minute load average just before / after the pair
    "load1_after": pl.Float64,
    "ref_before_s": pl.Float64,  # reference workload seconds just before / after the pair
    "ref_after_s": pl.Float64,
    "ref_drift": pl.Float64,     # max/min - 1 of those two
    "noisy": pl.Boolean,         # ref_drift > noisy_drift
    "checkpoint_key": pl.String,
}
# ProfileSpec fields that do not change what one pair measures: they add pairs (models, contexts,
# baselines, repeats) or only judge and describe a run (noisy_drift, reference_budget_s, roofline).
UNKEYED_FIELDS = ("models", "contexts", "baselines", "repeats", "noisy_drift", "reference_budget_s", "roofline",
                  "contention_slack")


@dataclass(frozen=True)
class ProfileSpec:
    """What one profile measures: kernels.profile (overlaid with a preset), every field from params.yaml
    (kernels_profile.stages.profile.settings); no field has a default in code."""

    models: tuple[str, ...]
    weights: str
    dtype: str
    device: str
    contexts: tuple[int, ...]
    ns: tuple[int, ...]
    baselines: tuple[str, ...]
    repeats: int
    warmup: int
    ar_mode: str
    seed: int
    threads: int | None
    order_seed: int             # seeds the alternating AR/prefill order of each pair
    noisy_drift: float          # reference workload drift above which a pair/run is noisy
    reference_budget_s: float   # time budget of one reference workload sample
    roofline: bool              # measure stream bandwidth and matmul throughput once per run
    contention_slack: float     # other load beyond the free cores before a run is contended
    prefills: tuple[str, ...]   # prefill kinds timed in every pair: eager | compiled (static shapes, graphs)
    warmup_ar_steps: int        # AR steps per warm-up; n_max warms every cache size (see the kernel report)

    def validate(self) -> "ProfileSpec":
        if not self.models:
            raise ParamsError("kernels.profile.models is empty")
        if self.dtype not in DTYPES:
            raise ParamsError(f"kernels.profile.dtype {self.dtype!r} unknown; known: {', '.join(DTYPES)}")
        if not self.ns or any(not isinstance(n, int) or n < 1 for n in self.ns):
            raise ParamsError(f"kernels.profile.ns must be integers >= 1, got {list(self.ns)}")
        if any(not isinstance(c, int) or c < 0 for c in self.contexts) or not self.contexts:
            raise ParamsError(f"kernels.profile.contexts must be integers >= 0, got {list(self.contexts)}")
        for name, values in (("ns", self.ns), ("contexts", self.contexts)):
            if len(set(values)) != len(values):  # a pair measured twice under one key
                raise ParamsError(f"kernels.profile.{name} lists a value twice: {list(values)}")
        bad = [b for b in self.baselines if b not in AR_LOOPS]
        if bad or not self.baselines:
            raise ParamsError(f"kernels.profile.baselines {bad or []} unknown or empty; known: {', '.join(AR_LOOPS)}")
        if self.ar_mode not in AR_MODES:
            raise ParamsError(f"kernels.profile.ar_mode must be one of {AR_MODES}, got {self.ar_mode!r}")
        if self.repeats < 1 or self.warmup < 0:
            raise ParamsError(f"kernels.profile.repeats must be >= 1 and warmup >= 0, got {self.repeats}, {self.warmup}")
        if not isinstance(self.order_seed, int):
            raise ParamsError(f"kernels.profile.order_seed must be an integer, got {self.order_seed!r}")
        bad = [k for k in self.prefills if k not in PREFILL_METHODS]
        if bad or not self.prefills or len(set(self.prefills)) != len(self.prefills):
            raise ParamsError(f"kernels.profile.prefills must list distinct kinds of {', '.join(PREFILL_METHODS)}, "
                              f"got {list(self.prefills)}")
        if "compiled" in self.prefills and len(self.ns) > COMPILED_SHAPES_LIMIT - 4:
            raise ParamsError(f"kernels.profile.ns has {len(self.ns)} values; the compiled prefill builds one graph per N "
                              f"and allows at most {COMPILED_SHAPES_LIMIT - 4}")
        if isinstance(self.warmup_ar_steps, bool) or not isinstance(self.warmup_ar_steps, int) or self.warmup_ar_steps < 1:
            raise ParamsError(f"kernels.profile.warmup_ar_steps must be an integer >= 1, got {self.warmup_ar_steps!r}")
        self.rules.validate("kernels.profile")
        check_threads(self.threads, "kernels.profile.threads")
        return self

    @property
    def rules(self) -> NoiseRules:
        return NoiseRules(self.noisy_drift, self.reference_budget_s, self.contention_slack)

    @property
    def n_max(self) -> int:
        return max(self.ns)

    def keyed_settings(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in UNKEYED_FIELDS}

    def key(self, *parts: Any) -> str:
        """Hash of the settings that change what one pair measures, and of `parts` (the pair's own
        coordinates and the fingerprint of the model and software it ran on)."""
        return checkpoint_key(MEASUREMENT_VERSION, self.keyed_settings(), *parts)


@dataclass
class Clock:
    """Marks time points; on CUDA with events (no sync inside the timed loop), else perf_counter."""

    device: str
    marks: list = field(default_factory=list)

    def mark(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def elapsed(self) -> list[float]:
        """Seconds from the first mark to each later mark."""
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
            return [self.marks[0].elapsed_time(m) / 1000.0 for m in self.marks[1:]]
        return [m - self.marks[0] for m in self.marks[1:]]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


class CacheBench:
    """One model at one context length: the cache states and the timed operations."""

    def __init__(self, lm: LoadedModel, context: int, n_max: int, seed: int):
        import torch

        self.lm, self.context, self.n_max = lm, context, n_max
        self.kw = cache_kwarg(lm.model)
        gen = torch.Generator().manual_seed(seed + context)
        vocab = lm.config.vocab_size
        self.context_ids = torch.randint(0, vocab, (1, context), generator=gen).to(lm.device)
        self.copy_ids = torch.randint(0, vocab, (1, n_max), generator=gen).to(lm.device)
        self._dynamic = None
        self._static = None
        self._static_prefill = None
        self._compiled: Callable | None = None
        self._compiled_prefill: Callable | None = None

    # ---------------------------------------------------------------- cache states
    def dynamic(self):
        """The dynamic cache holding exactly the context (built once, cropped back after each use)."""
        import torch
        from transformers import DynamicCache

        if self._dynamic is None:
            self._dynamic = DynamicCache(config=self.lm.config)
            if self.context:
                with torch.inference_mode():
                    self.lm.model(input_ids=self.context_ids, use_cache=True, logits_to_keep=1,
                                  **{self.kw: self._dynamic})
        extra = self._dynamic.get_seq_length() - self.context
        if extra > 0:
            self._dynamic.crop(-extra)
        return self._dynamic

    def static(self):
        import torch
        from transformers import StaticCache

        if self._static is None:
            # Built inside inference_mode, as on CUDA, where StaticLayer moves its position counter to
            # the device inside the first (inference-mode) forward and so makes it an inference tensor;
            # on CPU that move is a no-op, so without this the CPU tests would miss the GPU's failure.
            with torch.inference_mode():
                self._static = StaticCache(config=self.lm.config, max_cache_len=self.context + self.n_max)
                if self.context:
                    self.lm.model(input_ids=self.context_ids, use_cache=True, logits_to_keep=1,
                                  **{self.kw: self._static})
        rewind_static(self._static, self.context)
        return self._static

    def static_prefill(self):
        """A second static cache for the compiled prefill, holding exactly the context. Filled eagerly
        (one extra token when the context is empty, so its tensors exist before any compiled call:
        transformers allocates a static layer on first use, which must not happen inside a graph)."""
        import torch
        from transformers import StaticCache

        if self._static_prefill is None:
            with torch.inference_mode():
                self._static_prefill = StaticCache(config=self.lm.config, max_cache_len=self.context + self.n_max)
                ids = self.context_ids if self.context else self.copy_ids[:, :1]
                self.lm.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self.kw: self._static_prefill})
        rewind_static(self._static_prefill, self.context)
        return self._static_prefill

    # ---------------------------------------------------------------- operations
    def prefill_output(self, n: int, kind: str = "eager"):
        """One prefill of the first n copy tokens onto the context (logits of the last position only),
        then the cache is put back; `kind` eager (dynamic cache) or compiled (static cache, static shapes
        through torch.compile: one graph per N of the grid, CUDA graphs on a GPU)."""
        import torch

        with torch.inference_mode():
            if kind == "eager":
                out = self.lm.model(input_ids=self.copy_ids[:, :n], use_cache=True, logits_to_keep=1,
                                    **{self.kw: self.dynamic()})
            else:
                out = self._compiled_prefill_forward()(input_ids=self.copy_ids[:, :n], use_cache=True, logits_to_keep=1,
                                                       **{self.kw: self.static_prefill()})
        return out

    def timed_prefill(self, n: int, kind: str = "eager") -> float:
        """Seconds of one prefill of n tokens of `kind` (see prefill_output)."""
        import torch

        cache = self.dynamic() if kind == "eager" else self.static_prefill()
        forward = self.lm.model if kind == "eager" else self._compiled_prefill_forward()
        _sync(self.lm.device)
        clock = Clock(self.lm.device)
        with torch.inference_mode():
            clock.mark()
            forward(input_ids=self.copy_ids[:, :n], use_cache=True, logits_to_keep=1, **{self.kw: cache})
            clock.mark()
        seconds = clock.elapsed()[0]
        self.dynamic() if kind == "eager" else self.static_prefill()  # put the cache back
        return seconds

    def prefill(self, n: int) -> float:
        """Seconds of one eager prefill of n tokens (the dynamic cache is cropped back after)."""
        return self.timed_prefill(n, "eager")

    def ar(self, n_steps: int, baseline: str) -> list[float]:
        """Cumulative seconds after each of n_steps one-token forwards."""
        import torch

        step = self._step_fn(baseline)
        _sync(self.lm.device)
        clock = Clock(self.lm.device)
        with torch.inference_mode():
            clock.mark()
            for k in range(n_steps):
                step(k)
                clock.mark()
        elapsed = clock.elapsed()
        if baseline == "eager":
            self.dynamic()  # crop back
        else:
            self.static()  # rewind
        return elapsed

    def _step_fn(self, baseline: str) -> Callable[[int], Any]:
        model, kw = self.lm.model, self.kw
        if baseline == "eager":
            cache = self.dynamic()
            return lambda k: model(input_ids=self.copy_ids[:, k:k + 1], use_cache=True, **{kw: cache})
        cache = self.static()
        forward = model.forward if baseline == "static" else self._compiled_forward()
        return lambda k: forward(input_ids=self.copy_ids[:, k:k + 1], use_cache=True, **{kw: cache})

    def _compiled_forward(self) -> Callable:
        import torch

        if self._compiled is None:
            self._compiled = torch.compile(self.lm.model.forward, mode="reduce-overhead", fullgraph=False)
        return self._compiled

    def _compiled_prefill_forward(self) -> Callable:
        """The forward through torch.compile with static shapes (dynamic=False): each N of the grid is
        its own graph (CUDA graphs under reduce-overhead on a GPU). The recompile limit is raised to the
        grid's size, since past it dynamo would silently run the rest eagerly."""
        import torch

        if self._compiled_prefill is None:
            needed = COMPILED_SHAPES_LIMIT
            for name in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, name):
                    setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), needed))
            self._compiled_prefill = torch.compile(self.lm.model.forward, mode="reduce-overhead", dynamic=False)
        return self._compiled_prefill


def rewind_static(cache, length: int) -> None:
    """Move a StaticCache's write position back to `length`, in place (its tensors keep their
    addresses, which CUDA graphs need); slots past it are overwritten next and masked until then.

    The position counters were created by forwards under `torch.inference_mode()`, so they are
    inference tensors, which torch lets no one update in place outside inference mode (on CUDA the
    profiler failed here with "Inplace update to inference tensor outside InferenceMode"); the
    update therefore runs inside it, wherever the caller is."""
    import torch

    with torch.inference_mode():
        for layer in cache.layers:
            if getattr(layer, "is_initialized", False):
                layer.cumulative_length.fill_(length)
                if hasattr(layer, "cumulative_length_int"):
                    layer.cumulative_length_int = length




# ---------------------------------------------------------------- what a pair measures

def pair_methods(spec: ProfileSpec) -> list[str]:
    """The methods of one pair: the AR run and one prefill grid per prefill kind."""
    return ["ar"] + [PREFILL_METHODS[k] for k in spec.prefills]


PREFILL_KIND = {method: kind for kind, method in PREFILL_METHODS.items()}


def pair_steps(spec: ProfileSpec) -> int:
    """The timed runs of one pair, one progress step each: with `ar_mode: prefix` one AR run of n_max steps
    and one prefill per N and prefill kind; otherwise one AR run and one prefill per N and kind."""
    prefills = len(spec.prefills) * len(spec.ns)
    return (1 if spec.ar_mode == "prefix" else len(spec.ns)) + prefills


def measure_pair(bench: CacheBench, spec: ProfileSpec, baseline: str, order: list[str],
                 step: Callable[[], None] = lambda: None) -> list[tuple[str, str, int, float, int]]:
    """(method, kind, N, seconds, order_index) of one pair: the AR run and each prefill grid in `order`;
    kind is the AR loop for AR rows and the prefill kind for prefill rows. `step` is called after each
    timed run (pair_steps of them), so a progress bar moves within a pair."""
    rows: list[tuple[str, str, int, float, int]] = []

    def prefill(n: int, kind: str) -> float:
        seconds = bench.timed_prefill(n, kind)
        step()
        return seconds

    if spec.ar_mode == "prefix":
        for index, method in enumerate(order):
            if method == "ar":
                cumulative = bench.ar(spec.n_max, baseline)
                step()
                rows += [("ar", baseline, n, cumulative[n - 1], index) for n in spec.ns]
            else:
                kind = PREFILL_KIND[method]
                rows += [("prefill", kind, n, prefill(n, kind), index) for n in spec.ns]
        return rows
    for n in spec.ns:
        for index, method in enumerate(order):
            if method == "ar":
                rows.append(("ar", baseline, n, bench.ar(n, baseline)[-1], index))
                step()
            else:
                kind = PREFILL_KIND[method]
                rows.append(("prefill", kind, n, prefill(n, kind), index))
    return rows


def pair_order(spec: ProfileSpec, model: str, context: int, baseline: str, repeat: int) -> list[str]:
    """The seeded, alternating order of AR and prefill in one pair (row `repeat` of its schedule)."""
    return interleaved_order(pair_methods(spec), repeat + 1, f"{spec.order_seed}/{model}/{context}/{baseline}")[repeat]


def warm_up(bench: CacheBench, spec: ProfileSpec) -> None:
    """Every prefill kind at every N (compiles each graph once) and each AR loop for warmup_ar_steps
    steps. The warm-up's AR length matters on a GPU: a dynamic cache grows by one token a step, and
    sizes the caching allocator has not seen before cost an allocation each (kernel report)."""
    for _ in range(spec.warmup):
        for kind in spec.prefills:
            for n in spec.ns:
                bench.timed_prefill(n, kind)
        for baseline in spec.baselines:
            bench.ar(min(spec.n_max, spec.warmup_ar_steps), baseline)


def environment(lm: LoadedModel, spec: ProfileSpec) -> dict[str, Any]:
    import torch
    import transformers

    machine = machine_info()
    device_name = torch.cuda.get_device_name(lm.device) if lm.device.startswith("cuda") else machine["cpu_model"]
    return {
        "device_name": device_name,
        "cpu_flags": machine["cpu_flags"],
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "threads": torch.get_num_threads(),
        "attn_implementation": getattr(lm.config, "_attn_implementation", None) or "sdpa",
        "weights_note": lm.info.get("weights_note", ""),
        "config": lm.info.get("config", ""),
        "ar_mode": spec.ar_mode,
        "repeats": spec.repeats,
        "warmup": spec.warmup,
    }


# ---------------------------------------------------------------- pairs

@dataclass(frozen=True)
class Pair:
    """The coordinates of one measured pair (AR run + prefill grid)."""

    model: str
    context: int
    baseline: str
    repeat: int

    @property
    def pair_id(self) -> str:
        return f"{self.model}/c{self.context}/{self.baseline}/r{self.repeat}"

    def path(self, root: Path, key: str) -> Path:
        """The pair's checkpoint under `root`, named by the model's label (a --model folder or hub id is a
        path: its raw string would put the file beside the model, outside the tree: H4); `key` keeps two
        models of one label apart."""
        return root / f"{model_label(self.model)}-c{self.context}-{self.baseline}-r{self.repeat}-{key}.parquet"


def pair_units(spec: ProfileSpec) -> list[Pair]:
    """Every pair of the grid, in measurement order: repeats outside baselines, so the repeats of one
    baseline are spread over the run rather than taken back to back."""
    return [Pair(m, c, b, r) for m in spec.models for c in spec.contexts for r in range(spec.repeats) for b in spec.baselines]


def expected_columns() -> dict[str, Any]:
    return {**RAW_SCHEMA, **PAIR_SCHEMA}



def pair_frame(lm: LoadedModel, spec: ProfileSpec, unit: Pair, timings, env: dict[str, Any]) -> pl.DataFrame:
    """The raw rows of one pair (RAW_SCHEMA + pair_id, pair_baseline, order_index + environment)."""
    count = len(timings)
    frame = pl.DataFrame(
        {
            "model": [lm.name] * count, "weights": [lm.weights] * count,
            "dtype": [spec.dtype] * count, "device": [spec.device] * count,
            "method": [m for m, _, _, _, _ in timings],
            "baseline": [kind for _, kind, _, _, _ in timings],  # AR rows: the loop; prefill rows: the prefill kind
            "context": [unit.context] * count, "n": [n for _, _, n, _, _ in timings],
            "repeat": [unit.repeat] * count, "seconds": [s for _, _, _, s, _ in timings],
        },
        schema=RAW_SCHEMA,
    )
    return frame.with_columns(
        pair_id=pl.lit(unit.pair_id), pair_baseline=pl.lit(unit.baseline),
        order_index=pl.Series([i for _, _, _, _, i in timings], dtype=pl.Int64),
        **{k: pl.lit(v) for k, v in env.items()},
    )
