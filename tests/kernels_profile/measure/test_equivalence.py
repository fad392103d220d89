"""kernels_profile.measure.equivalence: copy by prefill leaves the same cache and next-token logits as one
step per token, within the dtype's relative tolerance (the check, prefill_vs_steps, is test code: no stage
runs it); the criterion itself (relative difference, argmax) on hand-made tensors."""

import pytest

torch = pytest.importorskip("torch")

from dataclasses import dataclass  # noqa: E402

from kernels_profile.measure.equivalence import compare_logits, rel_diff  # noqa: E402
from kernels_profile.runtime.models import DTYPES, LoadedModel, build_model, cache_kwarg  # noqa: E402

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


def _layers(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


def prefill_vs_steps(lm: LoadedModel, context_ids, copy_ids) -> Equivalence:
    """Compare the cache and last logits after prefilling `copy_ids` vs stepping through them."""
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


def test_rel_diff_is_relative_to_the_larger_magnitude():
    a = torch.tensor([1.0, -4.0])
    assert rel_diff(a, torch.tensor([1.0, -3.0])) == pytest.approx(0.25)
    assert rel_diff(a * 1000, torch.tensor([1.0, -3.0]) * 1000) == pytest.approx(0.25)  # scale-free
    assert rel_diff(torch.zeros(3), torch.zeros(3)) == 0.0  # no division by zero
    half = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert rel_diff(half, half.float()) == 0.0  # dtypes compared in float32


def test_compare_logits_needs_both_the_tolerance_and_the_same_argmax():
    a = torch.tensor([[1.0, 2.0, 3.0]])
    assert compare_logits(a, a + 1e-6, 1e-4).ok
    assert not compare_logits(a, a + torch.tensor([[0.0, 0.0, 0.1]]), 1e-4).ok  # over the tolerance
    flipped = compare_logits(a, torch.tensor([[1.0, 3.0, 2.99]]), 1.0)
    assert flipped.rel_diff <= 1.0 and not flipped.argmax_equal and not flipped.ok


def test_equivalence_ok_needs_cache_logits_and_argmax():
    good = Equivalence(4, 0, "float32", 1e-6, 1e-6, True, TOLERANCE["float32"])
    assert good.ok
    for field, value in (("kv_rel_diff", 1e-3), ("logits_rel_diff", 1e-3), ("argmax_equal", False)):
        assert not Equivalence(**{**good.__dict__, field: value}).ok, field
    assert set(TOLERANCE) == set(DTYPES)


@pytest.mark.parametrize("context, n", [(0, 1), (0, 7), (9, 16)])
def test_prefill_is_lossless_on_a_tiny_model(tiny, context, n):
    gen = torch.Generator().manual_seed(context + n)
    ctx = torch.randint(0, 512, (1, context), generator=gen)
    copy = torch.randint(0, 512, (1, n), generator=gen)
    result = prefill_vs_steps(tiny, ctx, copy)
    assert result.ok, result


@pytest.mark.model
def test_prefill_is_lossless_on_smollm2():
    lm = build_model("smollm2-135m", "gguf", "float32", "cpu")
    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, lm.config.vocab_size, (1, 24), generator=gen)
    copy = torch.randint(0, lm.config.vocab_size, (1, 12), generator=gen)
    result = prefill_vs_steps(lm, ctx, copy)
    assert result.ok, result
    assert result.logits_rel_diff < result.tolerance


