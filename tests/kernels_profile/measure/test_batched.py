"""kernels_profile.measure.batched and batched_session: the packed forward over per-sequence KV slots gives the
logits of each sequence run alone; timed steps restore the cache; units are ordered, flagged and resumed."""

import pytest

torch = pytest.importorskip("torch")

from analysis.errors import ParamsError  # noqa: E402
from kernels_profile.measure.batched import BatchedBench, BatchedSpec, Step  # noqa: E402
from kernels_profile.measure.batched_session import StepSet, run_step_sets  # noqa: E402
from kernels_profile.measure.timing import NoiseRules, Timing  # noqa: E402
from kernels_profile.runtime.models import build_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return build_model("tiny-qwen2", "random", "float32", "cpu", 0)


def test_a_ragged_packed_step_gives_each_sequences_own_logits(tiny):
    bench = BatchedBench(tiny, slots=3, capacity=48, seed=0)
    generator = torch.Generator().manual_seed(1)
    seqs = [torch.randint(0, tiny.config.vocab_size, (40,), generator=generator) for _ in range(3)]
    contexts, qs = [10, 20, 5], [1, 7, 3]
    bench.forward([0, 1, 2], [0, 0, 0], [s[:c] for s, c in zip(seqs, contexts)])  # each slot's own context
    logits = bench.forward([0, 1, 2], contexts, [s[c:c + q] for s, c, q in zip(seqs, contexts, qs)])
    tiny.model.config._attn_implementation = "sdpa"
    try:
        with torch.inference_mode():
            for i, (c, q) in enumerate(zip(contexts, qs)):
                alone = tiny.model(input_ids=seqs[i][None, :c + q]).logits[0, -1]
                assert torch.allclose(alone, logits[i], atol=1e-5), i
    finally:
        tiny.model.config._attn_implementation = "copydecode_varlen"


def test_timed_steps_need_a_filled_context_and_fit_the_store(tiny):
    bench = BatchedBench(tiny, slots=2, capacity=40, seed=0)
    with pytest.raises(ParamsError, match="past the filled"):
        bench.timed(Step.uniform(2, 4, 16))
    bench.fill(32)
    assert bench.timed(Step.uniform(2, 4, 16)) > 0 and bench.timed(Step((1, 8), (32, 0))) > 0
    with pytest.raises(ParamsError, match="exceeds the store's 2 slots"):
        bench.timed(Step.uniform(3, 1, 8))
    with pytest.raises(ParamsError, match="does not fit the store"):
        bench.timed(Step((16,), (32,)))
    with pytest.raises(ParamsError, match="q must be >= 1"):
        Step((0,), (4,))


def spec(**changes):
    values = dict(model="tiny-qwen2", weights="random", dtype="float32", device="cpu", batch_sizes=(1, 2), qs=(1, 4),
                  contexts=(8,), repeats=2, warmup=1, seed=0, threads=None, order_seed=0, noisy_drift=0.15,
                  reference_budget_s=0.05, contention_slack=0.5, holdout_batch_sizes=(), holdout_qs=())
    return BatchedSpec(**{**values, **changes})


@pytest.mark.parametrize("changes, message", [({"qs": (1, 1)}, "twice"), ({"batch_sizes": (0,)}, ">= 1"),
                                              ({"holdout_qs": (16,)}, "not in the grid"),
                                              ({"holdout_batch_sizes": (1,)}, "fewer than two"),
                                              ({"device": "tpu"}, "device must be"), ({"repeats": 0}, "repeats")])
def test_bad_grids_are_named(changes, message):
    with pytest.raises(ParamsError, match=message):
        spec(**changes).validate()


def test_units_run_in_a_seeded_order_are_flagged_and_resume_from_checkpoints(tiny, tmp_path):
    from kernels_profile.measure.batched import bench_environment

    s = spec().validate()
    sets = [StepSet("c8", {f"b{b}-q{q}": Step.uniform(b, q, 8) for b, q in s.points})]
    timing = Timing(2, 1, 0, NoiseRules(0.15, 0.05, 0.5))
    built = []
    samples = iter([0.010, 0.010, 0.010, 0.020, 0.020, 0.020])

    def build():
        built.append(1)
        return tiny

    def go():
        return run_step_sets(build, {"model": "tiny-qwen2", "weights": "random", "dtype": "float32", "device": "cpu"},
                             sets, timing, tmp_path, lambda *parts: s.key(*parts), bench_environment, progress=False,
                             reference=lambda: next(samples), load=lambda: (0.1, 0.1, 0.1), other=lambda: 0.0)
    first = go()
    assert first.raw.height == 2 * 4 and built == [1]
    orders = [first.raw.filter(first.raw["repeat"] == r).sort("order_index")["step_id"].to_list() for r in (0, 1)]
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])
    assert first.environment["noisy_units"] == ["c8/r1"]  # its reference moved 10 ms -> 20 ms
    again = go()
    assert built == [1] and again.raw.drop("noisy").equals(first.raw.drop("noisy"))  # nothing measured again
