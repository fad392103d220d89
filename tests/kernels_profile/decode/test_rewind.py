"""The static-cache rewind works on inference tensors, as the profiler leaves them on CUDA.

On an H200 every static-cache AR loop failed in `rewind_static` with "Inplace update to inference
tensor outside InferenceMode": StaticLayer moves its position counter to the device inside the first
forward, which the profiler runs under `torch.inference_mode()`, so the counter is an inference tensor;
the rewind then ran outside inference mode. On CPU that move is a no-op, so these tests build the cache
inside inference mode to get the same tensors, then rewind outside it, in the profiler's order."""

import pytest

torch = pytest.importorskip("torch")

from transformers import StaticCache  # noqa: E402

from kernels_profile.runtime.models import cache_kwarg  # noqa: E402
from kernels_profile.measure.profiler import CacheBench, rewind_static  # noqa: E402
from fixtures import profile_spec  # noqa: E402


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


@pytest.mark.slow
def test_profile_times_both_prefill_kinds_in_each_pair(tmp_path):
    """The paper-gpu preset's shape on CPU: each pair holds the AR run and one prefill grid per kind,
    and each kind gets its own latency model and kernel source name."""
    import polars as pl

    from analysis.latency.tables import speedup_table
    from analysis.latency.fit import FitOptions, fit_latency
    from kernels_profile.measure.session import profile_run
    from kernels_profile.measure.profiler import pair_order

    spec = profile_spec(models=("tiny-qwen2",), dtype="float32", contexts=(4,), ns=(1, 2), baselines=("eager",),
                       repeats=2, warmup=1, roofline=False, prefills=("eager", "compiled"), warmup_ar_steps=2)
    assert sorted(pair_order(spec, "tiny-qwen2", 4, "eager", 0)) == ["ar", "prefill", "prefill_compiled"]
    raw = profile_run(spec, tmp_path, progress=False, reference=lambda: 0.01, load=lambda: (0.5, 0.5, 0.5),
                      other=lambda: 0.0, log=lambda m: None).raw
    prefill = raw.filter(pl.col("method") == "prefill")
    assert sorted(set(prefill["baseline"])) == ["compiled", "eager"] and set(prefill["pair_baseline"]) == {"eager"}
    assert raw.height == 2 * 3 * 2  # repeats x (AR + two prefill grids) x N
    table = speedup_table(raw)
    assert sorted(set(table["prefill"])) == ["compiled", "eager"] and table.height == 4
    keys = sorted(m.key.label() for m in fit_latency(raw, FitOptions("interp")))
    assert keys == ["tiny-qwen2/random/float32/cpu/eager", "tiny-qwen2/random/float32/cpu/eager/compiled_prefill"]


def test_gpu_profile_uses_a_gpu_reference_and_records_the_gpu():
    from dataclasses import replace

    from kernels_profile.measure import machine
    from kernels_profile.measure.session import default_reference

    spec = profile_spec(models=("tiny-qwen2",), dtype="float32", device="cuda", prefills=("eager",))
    assert default_reference(spec).__code__.co_names.count("gpu_reference_workload") == 1
    assert default_reference(replace(spec, device="cpu")).__code__.co_names.count("reference_workload") == 1
    assert machine.gpu_info("cpu") is None
