"""kernels_profile.measure.profiler, the measurement: each pair's seeded alternating order and the spec's checks. (A whole
run, its checkpoints and sidecar: test_profile_session.py; the cache bench and kernels: test_kernels.py.)"""

from dataclasses import replace

import pytest

pytest.importorskip("torch")

from fixtures import profile_spec  # noqa: E402

from kernels_profile.measure.profiler import pair_order  # noqa: E402

SPEC = profile_spec(models=("tiny-qwen2",), dtype="float32", contexts=(0, 8), ns=(1, 2, 4),
                   baselines=("eager", "static"), repeats=3, warmup=0, roofline=False, order_seed=0)


def test_order_is_seed_deterministic():
    orders = lambda spec: [pair_order(spec, "m", 0, b, r) for b in ("eager", "static") for r in range(4)]
    assert orders(SPEC) == orders(replace(SPEC))
    assert any(orders(replace(SPEC, order_seed=s)) != orders(SPEC) for s in range(1, 6))


def test_bad_threads_and_slack_are_named():
    from analysis.errors import ParamsError

    with pytest.raises(ParamsError, match="kernels.profile.threads must be a positive integer or null"):
        replace(SPEC, threads=0).validate()
    with pytest.raises(ParamsError, match="kernels.profile.contention_slack must be a number of cores >= 0"):
        replace(SPEC, contention_slack=-1).validate()
    assert replace(SPEC, threads=None).validate().threads is None
