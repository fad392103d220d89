"""The profiler and its cache discipline, and the latency summaries of its timings. (The models: test_models.py;
copy-by-prefill's losslessness: test_equivalence.py.)"""


import numpy as np
import polars as pl
import pytest

torch = pytest.importorskip("torch")

from analysis.errors import ParamsError  # noqa: E402
from analysis.kernel_tables import speedup_table, summarize  # noqa: E402
from analysis.latency import QuadraticAR, QuadraticPrefill  # noqa: E402
from kernels_profile.profiler import CacheBench  # noqa: E402
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


def synthetic_raw(a=2e-3, b=1e-6, p=(1e-3, 1e-4, 1e-8, 1e-7), noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    ar, prefill = QuadraticAR(a, b), QuadraticPrefill(*p)
    for c in (0, 256, 1024):
        for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
            for r in range(3):
                jitter = 1 + noise * rng.standard_normal()
                rows.append(("m", "random", "float32", "cpu", "ar", "eager", c, n, r, float(ar.evaluate(n, c)) * jitter))
                rows.append(("m", "random", "float32", "cpu", "prefill", "eager", c, n, r, float(prefill.evaluate(n, c)) * jitter))
    return pl.DataFrame(rows, orient="row", schema=["model", "weights", "dtype", "device", "method", "baseline",
                                                    "context", "n", "repeat", "seconds"])


def test_speedup_table_pairs_repeats_and_marks_the_strongest():
    raw = synthetic_raw()
    static = raw.filter(pl.col("method") == "ar").with_columns(baseline=pl.lit("static"), seconds=pl.col("seconds") * 0.5)
    table = speedup_table(pl.concat([raw, static]))
    row = table.filter((pl.col("n") == 64) & (pl.col("context") == 0) & (pl.col("baseline") == "static")).row(0, named=True)
    ar, prefill = QuadraticAR(2e-3, 1e-6), QuadraticPrefill(1e-3, 1e-4, 1e-8, 1e-7)
    assert row["speedup"] == pytest.approx(0.5 * float(ar.evaluate(64, 0)) / float(prefill.evaluate(64, 0)))
    assert row["is_strongest"] and row["overhead_share"] == pytest.approx(0.5)
    assert summarize(raw)["repeats"].unique().to_list() == [3]


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
