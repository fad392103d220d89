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

`ar_mode: prefix` runs N_max steps once per repeat and reads T_ar(N) for every N off the same run as
the time of its first N steps (the first N steps of a longer run are exactly an N-step run), which
makes the CPU profile fit its time budget; `separate` runs each N on its own.

Raw rows are checkpointed per (model, context, part, repeat) so an interrupted run resumes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import ParamsError
from kernels_profile.models import DTYPES, LoadedModel, build_model, cache_kwarg, torch_dtype

BASELINES = ("eager", "static", "static_compiled")
AR_MODES = ("prefix", "separate")
RAW_SCHEMA = {
    "model": pl.String, "weights": pl.String, "dtype": pl.String, "device": pl.String,
    "method": pl.String, "baseline": pl.String, "context": pl.Int64, "n": pl.Int64,
    "repeat": pl.Int64, "seconds": pl.Float64,
}


@dataclass(frozen=True)
class ProfileSpec:
    models: tuple[str, ...] = ("qwen2.5-0.5b",)
    weights: str = "random"
    dtype: str = "bfloat16"
    device: str = "cpu"
    contexts: tuple[int, ...] = (256,)
    ns: tuple[int, ...] = tuple(2 ** k for k in range(10))
    baselines: tuple[str, ...] = ("eager", "static")
    repeats: int = 3
    warmup: int = 1
    ar_mode: str = "prefix"
    seed: int = 0
    threads: int | None = None

    def validate(self) -> "ProfileSpec":
        if not self.models:
            raise ParamsError("kernels.profile.models is empty")
        if self.dtype not in DTYPES:
            raise ParamsError(f"kernels.profile.dtype {self.dtype!r} unknown; known: {', '.join(DTYPES)}")
        if not self.ns or any(not isinstance(n, int) or n < 1 for n in self.ns):
            raise ParamsError(f"kernels.profile.ns must be integers >= 1, got {list(self.ns)}")
        if any(not isinstance(c, int) or c < 0 for c in self.contexts) or not self.contexts:
            raise ParamsError(f"kernels.profile.contexts must be integers >= 0, got {list(self.contexts)}")
        bad = [b for b in self.baselines if b not in BASELINES]
        if bad or not self.baselines:
            raise ParamsError(f"kernels.profile.baselines {bad or []} unknown or empty; known: {', '.join(BASELINES)}")
        if self.ar_mode not in AR_MODES:
            raise ParamsError(f"kernels.profile.ar_mode must be one of {AR_MODES}, got {self.ar_mode!r}")
        if self.repeats < 1 or self.warmup < 0:
            raise ParamsError(f"kernels.profile.repeats must be >= 1 and warmup >= 0, got {self.repeats}, {self.warmup}")
        return self

    @property
    def n_max(self) -> int:
        return max(self.ns)

    def key(self, *parts: Any) -> str:
        """Checkpoint key of one measured part: the settings that change what that part measures
        (not the lists of models, contexts, baselines or the repeat count, which only add parts)."""
        settings = {k: v for k, v in asdict(self).items() if k not in ("models", "contexts", "baselines", "repeats")}
        blob = json.dumps([settings, *parts], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
        self._compiled: Callable | None = None

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
            self._static = StaticCache(config=self.lm.config, max_cache_len=self.context + self.n_max)
            if self.context:
                with torch.inference_mode():
                    self.lm.model(input_ids=self.context_ids, use_cache=True, logits_to_keep=1,
                                  **{self.kw: self._static})
        rewind_static(self._static, self.context)
        return self._static

    # ---------------------------------------------------------------- operations
    def prefill(self, n: int) -> float:
        import torch

        cache = self.dynamic()
        _sync(self.lm.device)
        clock = Clock(self.lm.device)
        with torch.inference_mode():
            clock.mark()
            self.lm.model(input_ids=self.copy_ids[:, :n], use_cache=True, logits_to_keep=1, **{self.kw: cache})
            clock.mark()
        seconds = clock.elapsed()[0]
        self.dynamic()  # crop back
        return seconds

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


def rewind_static(cache, length: int) -> None:
    """Move a StaticCache's write position back to `length`, in place (its tensors keep their
    addresses, which CUDA graphs need); slots past it are overwritten next and masked until then."""
    for layer in cache.layers:
        if getattr(layer, "is_initialized", False):
            layer.cumulative_length.fill_(length)
            if hasattr(layer, "cumulative_length_int"):
                layer.cumulative_length_int = length


def ar_rows(bench: CacheBench, spec: ProfileSpec, baseline: str) -> list[tuple[int, float]]:
    """(N, T_ar(N)) for every N of the grid, by the spec's ar_mode."""
    if spec.ar_mode == "prefix":
        cumulative = bench.ar(spec.n_max, baseline)
        return [(n, cumulative[n - 1]) for n in spec.ns]
    return [(n, bench.ar(n, baseline)[-1]) for n in spec.ns]


def warm_up(bench: CacheBench, spec: ProfileSpec) -> None:
    for _ in range(spec.warmup):
        for n in spec.ns:
            bench.prefill(n)
        for baseline in spec.baselines:
            bench.ar(min(spec.n_max, 8), baseline)


def environment(lm: LoadedModel, spec: ProfileSpec) -> dict[str, Any]:
    import platform

    import torch
    import transformers

    device_name = torch.cuda.get_device_name(lm.device) if lm.device.startswith("cuda") else (
        platform.processor() or platform.machine()
    )
    return {
        "device_name": device_name,
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


def profile(spec: ProfileSpec, checkpoint_dir: Path, progress: bool = True) -> pl.DataFrame:
    """Run (or resume) the whole grid; returns the raw timings with their environment columns."""
    import torch
    from tqdm import tqdm

    spec.validate()
    if spec.threads:
        torch.set_num_threads(spec.threads)
    for model in spec.models:  # fail on a bad name or dtype before spending minutes on the first model
        torch_dtype(spec.dtype, spec.device)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    parts = list(spec.baselines) + ["prefill"]
    units = [(m, c, p, r) for m in spec.models for c in spec.contexts for r in range(spec.repeats) for p in parts]
    bar = tqdm(total=len(units), desc="kernels profile", unit="run", disable=not progress)
    frames = []
    for model_name in spec.models:
        todo = [u for u in units if u[0] == model_name and not _part_path(checkpoint_dir, spec, *u).exists()]
        bar.update(sum(1 for u in units if u[0] == model_name) - len(todo))
        lm = None
        for context in spec.contexts:
            pending = [u for u in todo if u[1] == context]
            if not pending:
                continue
            if lm is None:
                bar.set_postfix_str(f"building {model_name}")
                lm = build_model(model_name, spec.weights, spec.dtype, spec.device, spec.seed)
                env = environment(lm, spec)
            bench = CacheBench(lm, context, spec.n_max, spec.seed)
            bar.set_postfix_str(f"{model_name} c={context} warm-up")
            warm_up(bench, spec)
            for _, _, part, repeat in pending:
                bar.set_postfix_str(f"{model_name} c={context} {part} #{repeat}")
                rows = _measure(bench, spec, part)
                frame = _rows_frame(lm, spec, part, context, repeat, rows, env)
                frame.write_parquet(_part_path(checkpoint_dir, spec, model_name, context, part, repeat))
                bar.update(1)
        del lm
    bar.close()
    for unit in units:
        frames.append(pl.read_parquet(_part_path(checkpoint_dir, spec, *unit)))
    return pl.concat(frames, how="vertical").sort("model", "context", "method", "baseline", "n", "repeat")


def _measure(bench: CacheBench, spec: ProfileSpec, part: str) -> list[tuple[int, float]]:
    if part == "prefill":
        return [(n, bench.prefill(n)) for n in spec.ns]
    return ar_rows(bench, spec, part)


def _part_path(root: Path, spec: ProfileSpec, model: str, context: int, part: str, repeat: int) -> Path:
    return root / f"{model}-c{context}-{part}-r{repeat}-{spec.key(model, context, part, repeat)}.parquet"


def _rows_frame(lm, spec, part, context, repeat, rows, env) -> pl.DataFrame:
    method, baseline = ("prefill", "eager") if part == "prefill" else ("ar", part)
    frame = pl.DataFrame(
        {
            "model": [lm.name] * len(rows), "weights": [lm.weights] * len(rows),
            "dtype": [spec.dtype] * len(rows), "device": [spec.device] * len(rows),
            "method": [method] * len(rows), "baseline": [baseline] * len(rows),
            "context": [context] * len(rows), "n": [n for n, _ in rows],
            "repeat": [repeat] * len(rows), "seconds": [s for _, s in rows],
        },
        schema=RAW_SCHEMA,
    )
    return frame.with_columns(**{k: pl.lit(v) for k, v in env.items()})
