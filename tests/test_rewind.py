"""The static-cache rewind works on inference tensors, as the profiler leaves them on CUDA.

On an H200 every static-cache AR loop failed in `rewind_static` with "Inplace update to inference
tensor outside InferenceMode": StaticLayer moves its position counter to the device inside the first
forward, which the profiler runs under `torch.inference_mode()`, so the counter is an inference tensor;
the rewind then ran outside inference mode. On CPU that move is a no-op, so these tests build the cache
inside inference mode to get the same tensors, then rewind outside it, in the profiler's order."""

import pytest

torch = pytest.importorskip("torch")

from transformers import StaticCache  # noqa: E402

from kernels_profile.models import build_model, cache_kwarg  # noqa: E402
from kernels_profile.profiler import CacheBench, rewind_static  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return build_model("tiny-qwen2", "random", "float32", "cpu", 0)


def filled_cache(lm, context: int, capacity: int):
    ids = torch.arange(context).unsqueeze(0) % lm.config.vocab_size
    with torch.inference_mode():
        cache = StaticCache(config=lm.config, max_cache_len=capacity)
        lm.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{cache_kwarg(lm.model): cache})
    return cache


def test_rewind_outside_inference_mode_updates_inference_counters(tiny):
    cache = filled_cache(tiny, context=6, capacity=16)
    counters = [layer.cumulative_length for layer in cache.layers if layer.is_initialized]
    assert counters and all(c.is_inference() for c in counters)  # the GPU's situation
    assert not torch.is_inference_mode_enabled()
    rewind_static(cache, 3)
    assert [int(c) for c in counters] == [3] * len(counters)
    assert cache.get_seq_length() == 3


def test_static_ar_loop_repeats_from_the_same_state(tiny):
    """The profiler's order: fill the context, time steps (inside inference mode), rewind (outside)."""
    bench = CacheBench(tiny, context=8, n_max=4, seed=0)
    for _ in range(2):
        assert len(bench.ar(4, "static")) == 4
        assert bench.static().get_seq_length() == 8


@pytest.mark.slow
def test_compiled_prefill_gives_the_eager_prefills_logits(tiny):
    """The serving-grade prefill (static cache, static shapes through torch.compile; inductor on CPU,
    CUDA graphs on a GPU) computes what the eager prefill computes, at every N and again after a rewind."""
    bench = CacheBench(tiny, context=5, n_max=8, seed=3)
    for n in (1, 3, 8, 3):
        eager = bench.prefill_output(n, "eager").logits[:, -1]
        compiled = bench.prefill_output(n, "compiled").logits[:, -1].clone()
        bench.dynamic(), bench.static_prefill()
        assert torch.allclose(eager, compiled, atol=1e-5, rtol=1e-4), n
        assert bench.static_prefill().get_seq_length() == 5
    assert bench.timed_prefill(8, "compiled") > 0
