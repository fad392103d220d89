"""Copy by prefill is lossless: one forward of N tokens leaves the same KV cache and next-token logits
as N one-token steps over the same tokens, up to floating-point reassociation.

The two paths differ only in how matrix products are batched, so they agree to within a tolerance
set by the dtype: the maximum absolute difference relative to the largest magnitude compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels_profile.runtime.models import LoadedModel, cache_kwarg

# relative tolerance per dtype: |a - b|_max / max(|a|_max, |b|_max)
TOLERANCE = {"float32": 1e-4, "bfloat16": 3e-2, "float16": 5e-3}


@dataclass(frozen=True)
class Equivalence:
    n: int
    context: int
    dtype: str
    kv_rel_diff: float
    logits_rel_diff: float
    argmax_equal: bool
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.kv_rel_diff <= self.tolerance and self.logits_rel_diff <= self.tolerance and self.argmax_equal


def rel_diff(a, b) -> float:
    """Largest absolute difference, relative to the largest magnitude of either tensor."""
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-12)
    return float((a.float() - b.float()).abs().max()) / scale


@dataclass(frozen=True)
class LogitsCheck:
    rel_diff: float
    argmax_equal: bool
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.rel_diff <= self.tolerance and self.argmax_equal


def compare_logits(a, b, tolerance: float) -> LogitsCheck:
    """The one losslessness criterion: the same logits (within `tolerance`, relative) and the same argmax."""
    return LogitsCheck(rel_diff(a, b), bool((a.argmax(-1) == b.argmax(-1)).all()), tolerance)


def _layers(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


def prefill_vs_steps(lm: LoadedModel, context_ids, copy_ids) -> Equivalence:
    """Compare the cache and last logits after prefilling `copy_ids` vs stepping through them."""
    import torch
    from transformers import DynamicCache

    kw = cache_kwarg(lm.model)
    caches, logits = [], []
    with torch.inference_mode():
        for stepwise in (False, True):
            cache = DynamicCache(config=lm.config)
            if context_ids.shape[1]:
                lm.model(input_ids=context_ids, use_cache=True, **{kw: cache})
            if stepwise:
                for k in range(copy_ids.shape[1]):
                    out = lm.model(input_ids=copy_ids[:, k:k + 1], use_cache=True, **{kw: cache})
            else:
                out = lm.model(input_ids=copy_ids, use_cache=True, logits_to_keep=1, **{kw: cache})
            caches.append(_layers(cache))
            logits.append(out.logits[:, -1, :])
    kv = max(
        max(rel_diff(ka, kb), rel_diff(va, vb))
        for (ka, va), (kb, vb) in zip(caches[0], caches[1])
    )
    check = compare_logits(logits[0], logits[1], TOLERANCE[lm.dtype])
    return Equivalence(
        n=int(copy_ids.shape[1]), context=int(context_ids.shape[1]), dtype=lm.dtype,
        kv_rel_diff=kv, logits_rel_diff=check.rel_diff, argmax_equal=check.argmax_equal,
        tolerance=check.tolerance,
    )
