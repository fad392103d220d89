"""The profiler and its cache discipline, and the latency summaries of its timings. (The models: test_models.py;
copy-by-prefill's losslessness: test_equivalence.py.)"""


import polars as pl
import pytest

torch = pytest.importorskip("torch")

from analysis.errors import ParamsError  # noqa: E402
from kernels_profile.profile_session import profile_run  # noqa: E402
from kernels_profile.profiler import CacheBench, ProfileSpec  # noqa: E402
from fixtures import profile_spec  # noqa: E402


def profile(spec, root, progress=False):
    """The raw timings, with no other load injected: each real contention sample sleeps 1 s."""
    return profile_run(spec, root, progress, other=lambda: 0.0).raw


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
def test_profile_grid_shape_and_resume(tmp_path):
    spec = profile_spec(models=("tiny-qwen2",), dtype="float32", contexts=(0, 16), ns=(1, 2, 4),
                       baselines=("eager", "static"), repeats=2, warmup=0, roofline=False, reference_budget_s=0.02)
    raw = profile(spec, tmp_path, progress=False)
    assert raw.height == 2 * 3 * (2 * 2) * 2  # contexts x ns x (2 baselines x [AR, prefill] pairs) x repeats
    assert (raw["ref_before_s"] > 0).all() and raw["noisy"].dtype == pl.Boolean
    assert (raw["seconds"] > 0).all()
    assert {"torch_version", "transformers_version", "threads", "config", "weights_note", "device_name"} <= set(raw.columns)
    assert raw["weights_note"][0].startswith("random weights")
    # prefix mode: T_ar grows with N within a repeat
    ar = raw.filter((pl.col("method") == "ar") & (pl.col("baseline") == "eager") & (pl.col("repeat") == 0) & (pl.col("context") == 0))
    assert ar.sort("n")["seconds"].is_sorted()
    # a second run finds every part checkpointed and measures nothing again
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = profile(spec, tmp_path, progress=False)
    assert again.equals(raw)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps


@pytest.mark.slow
def test_preset_shape_runs_on_cpu(tmp_path):
    from fixtures import ROOT

    from analysis.params import load_params
    from kernels_profile.stages.profile import settings

    params = load_params(ROOT / "params.yaml")
    gpu, gpu_out = settings(params, "paper-gpu").spec, settings(params, "paper-gpu").out
    tiny_spec = settings(params, "tiny-cpu").spec
    assert gpu.models == ("qwen2.5-1.5b", "qwen2.5-7b") and gpu.device == "cuda" and gpu.dtype == "bfloat16"
    assert gpu.contexts == tiny_spec.contexts and gpu.ns == tiny_spec.ns == tuple(2 ** k for k in range(10))
    assert "frozen" in str(gpu_out)
    default = settings(params).spec
    assert default.threads == 1 and default.contention_slack == 0.5  # one measuring thread (issue 15)
    assert gpu.threads is None and tiny_spec.threads is None
    small = ProfileSpec(**{**tiny_spec.__dict__, "ns": (1, 8, 64), "repeats": 1, "warmup": 0,
                           "roofline": False, "reference_budget_s": 0.02})
    raw = profile(small, tmp_path, progress=False)
    assert set(raw["context"].unique()) == set(gpu.contexts)
    with pytest.raises(ParamsError, match="unknown preset"):
        settings(params, "paper-tpu")


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
