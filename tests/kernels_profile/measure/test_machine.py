"""Machine description and reference workload; the threads check. (Drift, other processes' CPU use and the
contention rule: test_contention.py; the interleaving: test_interleave.py; the per-pair ratios: tests/analysis/test_stats.py.)"""

import json

import pytest

from analysis.errors import ParamsError
from analysis.pipeline.cpuinfo import parse_cpuinfo  # noqa: E402
from analysis.pipeline.params import check_threads  # noqa: E402
from kernels_profile.measure.machine import (  # noqa: E402
    CPU_FLAGS,
    machine_info,
    matmul_throughput,
    reference_workload,
    stream_bandwidth,
)

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_tile
processor\t: 1
model name\t: something else
flags\t\t: fpu
"""


# ---------------------------------------------------------------- machine

def test_cpuinfo_flags_that_matter_are_read_from_the_first_processor():
    model = parse_cpuinfo(CPUINFO).model
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    info = machine_info(CPUINFO)
    assert info["cpu_model"] == model
    assert info["cpu_avx2"] and info["cpu_avx512f"] and info["cpu_avx512_bf16"] and info["cpu_amx_tile"]
    assert info["cpu_amx_bf16"] is False
    assert info["cpu_flags"] == "avx2 avx512f avx512_bf16 amx_tile"


def test_machine_info_of_this_machine_is_plain_json():
    info = machine_info()
    assert {f"cpu_{f}" for f in CPU_FLAGS} <= set(info)
    assert info["logical_cores"] >= info["usable_cores"] >= 1
    assert info["torch_threads"] >= 1
    assert json.loads(json.dumps(info)) == info


def test_measurements_are_positive_and_bounded():
    seconds = reference_workload(budget_s=0.01, repeats=3, size=64, inner=4)
    assert 0 < seconds < 5
    assert stream_bandwidth(megabytes=4, repeats=2) > 0
    with pytest.raises(ParamsError, match="megabytes"):
        stream_bandwidth(megabytes=0)


def test_matmul_size_shrinks_to_fit_the_budget():
    tight = matmul_throughput("float32", size=1024, budget_s=1e-9, repeats=3)
    assert tight.size == 64 and tight.gflops > 0
    with pytest.raises(ParamsError, match="float32 or bfloat16"):
        matmul_throughput("float16")




@pytest.mark.parametrize("value, ok", [(1, True), (None, True), (0, False), (True, False), (1.5, False), ("2", False)])
def test_threads_are_a_positive_integer_or_null(value, ok):
    if ok:
        assert check_threads(value) == value
    else:
        with pytest.raises(ParamsError, match="positive integer or null"):
            check_threads(value)
