"""One engine step of B sequences, timed: the batched step-cost profile and the replay of simulated steps.

A continuous-batching engine runs one forward per step over every running sequence, each adding its
own q_i new tokens (a decode token, a prefill chunk, a copy span, a speculative verify) on top of its
own KV cache of c_i tokens. This module runs exactly that forward on a transformers model:

- The new tokens of all sequences are packed into one row (1 x sum q_i), with each token's position
  `c_i + j`, so the projections and the MLP see sum q_i tokens and no padding. A padded batch
  (B x max q_i) would price a step that mixes one 64-token copy chunk with 15 decodes at 1,024 tokens
  instead of 79; no continuous-batching engine pays that.
- Attention runs per sequence against that sequence's own KV cache (`VarlenStore`: per layer one
  preallocated key and value buffer with a slot per sequence), through an attention function
  registered with transformers' `AttentionInterface` (`VARLEN_ATTENTION`): it writes the step's new
  keys and values into each sequence's slot at positions c_i.. and attends causally over c_i + q_i keys.
  This is the varlen (ragged) attention of vLLM and TensorRT-LLM done as one sdpa call per sequence; the
  per-call dispatch is a host cost per sequence (a term of the step-cost model).
- Logits are computed for each sequence's last new token (`logits_to_keep`): what a decode step and a
  copy need. A speculative verify needs q_i rows; one row of SmolLM2-135M's LM head is 28M of its 135M
  multiply-adds per token, so verify steps are priced slightly low (named in the replay report).

Every measurement restores the cache lengths: the store keeps each slot's length outside the tensors, so
a repeat starts from the same state by writing over the same positions again (`VarlenStore.contexts`).
Contexts are filled once, by one real prefill of a seeded random sequence into slot 0, then copied into
every slot (each slot holds its own memory; timing depends on sizes, not on values). The
logits-equivalence test (tests/kernels_profile/measure/test_batched.py) checks the packed forward
against each sequence run alone through plain transformers.

Pure measurement with plain arguments: the grid run's checkpoints and files are
kernels_profile.measure.batched_session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from analysis.errors import ParamsError
from analysis.pipeline.params import check_threads
from kernels_profile.measure.timing import NoiseRules, Timing
from kernels_profile.runtime.checkpoints import checkpoint_key
from kernels_profile.runtime.models import DTYPES, LoadedModel
from kernels_profile.measure.machine import machine_info

VARLEN_ATTENTION = "copydecode_varlen"
MEASUREMENT_VERSION = "batched-1"
DEVICES = ("cpu", "cuda")
# BatchedSpec fields that do not change what one unit measures (they add units or only judge a run)
UNKEYED_FIELDS = ("contexts", "repeats", "noisy_drift", "reference_budget_s", "contention_slack",
                  "holdout_batch_sizes", "holdout_qs")


@dataclass(frozen=True)
class Step:
    """One engine step: per scheduled sequence, its new tokens q_i and the KV-cache length c_i it starts from."""

    qs: tuple[int, ...]
    contexts: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.qs or len(self.qs) != len(self.contexts):
            raise ParamsError(f"a step needs one context per sequence and at least one sequence, got q={list(self.qs)}, "
                              f"c={list(self.contexts)}")
        if any(q < 1 for q in self.qs) or any(c < 0 for c in self.contexts):
            raise ParamsError(f"a step's q must be >= 1 and its contexts >= 0, got q={list(self.qs)}, c={list(self.contexts)}")

    @classmethod
    def uniform(cls, batch: int, q: int, context: int) -> Step:
        return cls((q,) * batch, (context,) * batch)

    @property
    def batch(self) -> int:
        return len(self.qs)

    @property
    def tokens(self) -> int:
        return sum(self.qs)


@dataclass(frozen=True)
class BatchedSpec:
    """What the batched profile measures: params kernels.batched (overlaid with a preset), every field from
    params.yaml (kernels_profile.stages.batched.settings); no field has a default in code."""

    model: str
    weights: str
    dtype: str
    device: str
    batch_sizes: tuple[int, ...]
    qs: tuple[int, ...]
    contexts: tuple[int, ...]
    repeats: int
    warmup: int
    seed: int
    threads: int | None
    order_seed: int
    noisy_drift: float
    reference_budget_s: float
    contention_slack: float
    holdout_batch_sizes: tuple[int, ...]
    holdout_qs: tuple[int, ...]

    def validate(self) -> BatchedSpec:
        where = "kernels.batched"
        if self.dtype not in DTYPES:
            raise ParamsError(f"{where}.dtype {self.dtype!r} unknown; known: {', '.join(DTYPES)}")
        if self.device not in DEVICES:
            raise ParamsError(f"{where}.device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        for name, values, low in (("batch_sizes", self.batch_sizes, 1), ("qs", self.qs, 1), ("contexts", self.contexts, 0)):
            if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in values):
                raise ParamsError(f"{where}.{name} must be a non-empty list of integers >= {low}, got {list(values)}")
            if len(set(values)) != len(values):
                raise ParamsError(f"{where}.{name} lists a value twice: {list(values)}")
        for name, held, grid in (("holdout_batch_sizes", self.holdout_batch_sizes, self.batch_sizes),
                                 ("holdout_qs", self.holdout_qs, self.qs)):
            if set(held) - set(grid):
                raise ParamsError(f"{where}.{name} {sorted(set(held) - set(grid))} are not in the grid {list(grid)}")
            if len(set(grid) - set(held)) < 2:
                raise ParamsError(f"{where}.{name} leaves fewer than two grid values to fit on")
        self.timing.validate(where)
        check_threads(self.threads, f"{where}.threads")
        return self

    @property
    def timing(self) -> Timing:
        return Timing(self.repeats, self.warmup, self.order_seed,
                      NoiseRules(self.noisy_drift, self.reference_budget_s, self.contention_slack))

    @property
    def points(self) -> list[tuple[int, int]]:
        """Every (B, q) of one context, in grid order."""
        return [(b, q) for b in self.batch_sizes for q in self.qs]

    def key(self, *parts: Any) -> str:
        keyed = {k: v for k, v in asdict(self).items() if k not in UNKEYED_FIELDS}
        return checkpoint_key(MEASUREMENT_VERSION, keyed, *parts)


# ---------------------------------------------------------------- the varlen attention


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function over a packed row (query/key/value: 1 x heads x sum q x d): each
    sequence's new keys and values go into its own slot of the store, and its queries attend causally to
    its c_i + q_i keys. The plan comes in the forward's keyword `copydecode_plan`."""
    import torch.nn.functional as F

    plan: _Plan = kwargs["copydecode_plan"]
    keys, values = plan.store.keys[module.layer_idx], plan.store.values[module.layer_idx]
    out = query.new_empty(query.shape[0], query.shape[2], query.shape[1], query.shape[3])
    for slot, start, q, c, mask in plan.rows:
        keys[slot, :, c:c + q] = key[0, :, start:start + q]
        values[slot, :, c:c + q] = value[0, :, start:start + q]
        attended = F.scaled_dot_product_attention(
            query[:, :, start:start + q], keys[slot:slot + 1, :, :c + q], values[slot:slot + 1, :, :c + q],
            attn_mask=mask, scale=scaling, enable_gqa=True)
        out[0, start:start + q] = attended[0].transpose(0, 1)
    return out, None


def register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(VARLEN_ATTENTION, varlen_attention)


@dataclass(frozen=True)
class _Plan:
    store: VarlenStore
    rows: tuple[tuple[int, int, int, int, Any], ...]  # slot, start in the packed row, q, c, causal mask (None: q = 1)


class VarlenStore:
    """Per layer, key and value buffers of shape (slots, kv heads, capacity, head dim)."""

    def __init__(self, lm: LoadedModel, slots: int, capacity: int):
        import torch

        config = lm.config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv_heads = getattr(config, "num_key_value_heads", heads)
        dtype = next(lm.model.parameters()).dtype
        shape = (slots, kv_heads, capacity, head_dim)
        self.slots, self.capacity = slots, capacity
        self.keys = [torch.zeros(shape, dtype=dtype, device=lm.device) for _ in range(config.num_hidden_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=lm.device) for _ in range(config.num_hidden_layers)]

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def replicate(self, slot: int, length: int) -> None:
        """Copy the first `length` positions of `slot` into every other slot (each its own memory)."""
        for tensors in (self.keys, self.values):
            for layer in tensors:
                layer[:, :, :length] = layer[slot:slot + 1, :, :length]


def _causal_mask(q: int, c: int, device: str):
    """Query j of a chunk may see keys 0..c+j (None for one query: it sees every key)."""
    import torch

    if q == 1:
        return None
    return torch.arange(c + q, device=device)[None, :] <= (c + torch.arange(q, device=device))[:, None]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


class BatchedBench:
    """One model, a store with `slots` sequences of up to `capacity` tokens, and the timed step."""

    def __init__(self, lm: LoadedModel, slots: int, capacity: int, seed: int):
        import torch

        register_attention()
        lm.model.config._attn_implementation = VARLEN_ATTENTION
        self.lm, self.device = lm, lm.device
        self.store = VarlenStore(lm, slots, capacity)
        generator = torch.Generator().manual_seed(seed)
        self.vocab = lm.config.vocab_size
        self.tokens = torch.randint(0, self.vocab, (capacity,), generator=generator).to(lm.device)
        self.filled = 0

    def fill(self, context: int) -> None:
        """Every slot's cache holds the first `context` tokens of the bench's sequence (one real prefill)."""
        if context > self.store.capacity:
            raise ParamsError(f"context {context} exceeds the store's capacity {self.store.capacity}")
        if context > self.filled:
            self.forward([0], [0], [self.tokens[:context]])
            self.store.replicate(0, context)
            self.filled = context

    def forward(self, slots: Sequence[int], contexts: Sequence[int], chunks: Sequence[Any]):
        """One packed forward: chunk i (token ids) appended to slot i at context i; logits of each last token."""
        import torch

        lengths = [int(len(chunk)) for chunk in chunks]
        for slot, c, q in zip(slots, contexts, lengths):
            if not 0 <= slot < self.store.slots or c + q > self.store.capacity:
                raise ParamsError(f"step row slot={slot}, c={c}, q={q} does not fit the store "
                                  f"({self.store.slots} slots of {self.store.capacity} tokens)")
        starts = [0]
        for q in lengths[:-1]:
            starts.append(starts[-1] + q)
        rows = tuple((s, start, q, c, _causal_mask(q, c, self.device))
                     for s, start, q, c in zip(slots, starts, lengths, contexts))
        ids = torch.cat(list(chunks))[None]
        positions = torch.cat([torch.arange(c, c + q, device=self.device) for c, q in zip(contexts, lengths)])[None]
        last = torch.tensor([start + q - 1 for start, q in zip(starts, lengths)], device=self.device)
        with torch.inference_mode():
            out = self.lm.model(input_ids=ids, position_ids=positions, use_cache=False, logits_to_keep=last,
                                copydecode_plan=_Plan(self.store, rows))
        return out.logits[0]

    def step_inputs(self, step: Step) -> tuple[list[int], list[int], list[Any]]:
        """Slots 0..B-1, the step's contexts, and each row's q tokens (the bench's sequence after c)."""
        if step.batch > self.store.slots:
            raise ParamsError(f"a step of {step.batch} sequences exceeds the store's {self.store.slots} slots")
        chunks = [self.tokens[c:c + q] if c + q <= len(self.tokens) else self.tokens[:q]
                  for q, c in zip(step.qs, step.contexts)]
        return list(range(step.batch)), list(step.contexts), chunks

    def timed(self, step: Step) -> float:
        """Seconds of one step (the contexts must be filled: `fill(max c)`)."""
        if max(step.contexts) > self.filled:
            raise ParamsError(f"step context {max(step.contexts)} is past the filled {self.filled} tokens; fill first")
        slots, contexts, chunks = self.step_inputs(step)
        _sync(self.device)
        start = time.perf_counter()
        self.forward(slots, contexts, chunks)
        _sync(self.device)
        return time.perf_counter() - start


def bench_environment(lm: LoadedModel) -> dict[str, Any]:
    """The columns recorded beside every timed step: device, software, threads, weights, the engine's attention."""
    import torch
    import transformers

    device_name = torch.cuda.get_device_name(lm.device) if lm.device.startswith("cuda") else machine_info()["cpu_model"]
    return {"device_name": device_name, "torch_version": torch.__version__,
            "transformers_version": transformers.__version__, "threads": torch.get_num_threads(),
            "attention": f"{VARLEN_ATTENTION} (packed tokens, per-sequence sdpa over its own KV slot)",
            "weights_note": lm.info.get("weights_note", "")}
