"""The profiler and its cache discipline, and the latency summaries of its timings. (The models: test_models.py;
copy-by-prefill's losslessness: test_equivalence.py.)"""


import pytest

torch = pytest.importorskip("torch")

from analysis.errors import ParamsError  # noqa: E402
from kernels_profile.measure.profiler import CacheBench  # noqa: E402
from fixtures import profile_spec  # noqa: E402


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"ns": (0, 4)}, "ns must be integers >= 1"),
        ({"contexts": (-1,)}, "contexts must be integers >= 0"),
        ({"baselines": ("vllm",)}, "baselines"),
        ({"ar_mode": "guess"}, "ar_mode"),
        ({"dtype": "fp8"}, "dtype 'fp8' unknown"),
        ({"threads": 0}, "threads must be a positive integer or null"),
        ({"contention_slack": -0.1}, "contention_slack must be a number of cores >= 0"),
    ],
)
def test_bad_profile_params(kwargs, fragment):
    with pytest.raises(ParamsError, match=fragment):
        profile_spec(**kwargs).validate()


def _state(cache):
    return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]


def test_every_repeat_starts_from_the_identical_cache_state(tiny):
    bench = CacheBench(tiny, context=12, n_max=8, seed=0)
    before = _state(bench.dynamic())
    for baseline in ("eager", "static"):
        bench.ar(8, baseline)
        bench.prefill(8)
    after = _state(bench.dynamic())
    assert bench.dynamic().get_seq_length() == 12
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(before, after))
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(before, after))
    static = bench.static()
    assert int(static.get_seq_length()) == 12


def test_static_loop_computes_what_the_eager_loop_computes(tiny):
    bench = CacheBench(tiny, context=5, n_max=6, seed=1)
    outs = {}
    for baseline in ("eager", "static"):
        step = bench._step_fn(baseline)
        with torch.inference_mode():
            outs[baseline] = torch.cat([step(k).logits[:, -1] for k in range(6)])
        bench.dynamic(), bench.static()
    assert torch.allclose(outs["eager"], outs["static"], atol=1e-5)




@pytest.mark.slow
def test_compiled_static_loop_matches_eager(tiny):
    # torch.compile (inductor on CPU, CUDA graphs on a GPU) behind the static cache: ~20 s to compile
    bench = CacheBench(tiny, context=5, n_max=6, seed=1)
    outs = {}
    for baseline in ("eager", "static_compiled"):
        step = bench._step_fn(baseline)
        with torch.inference_mode():
            outs[baseline] = torch.cat([step(k).logits[:, -1] for k in range(6)])
        bench.dynamic(), bench.static()
    assert torch.allclose(outs["eager"], outs["static_compiled"], atol=1e-5)
