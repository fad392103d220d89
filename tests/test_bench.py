"""The throughput benchmark's arithmetic and argument checks (the benchmark itself is a command, not a test)."""

import pytest
from conftest import params_with

from analysis import bench
from analysis.cli import STAGES, TOOLS, build_parser
from analysis.errors import ParamsError


def test_extrapolation_is_linear_and_efficiency_scaled():
    table = bench.extrapolation(0.036, 0.5)
    rows = {r["cores"]: r for r in table.iter_rows(named=True)}
    assert rows[1]["hours_linear_estimate"] == pytest.approx(10.0)
    assert rows[16]["hours_linear_estimate"] == pytest.approx(10.0 / 16, abs=0.01)
    assert rows[16]["hours_at_measured_efficiency_estimate"] == pytest.approx(10.0 / 8.5, abs=0.01)
    assert bench.extrapolation(0.036, None)["hours_at_measured_efficiency_estimate"].null_count() == 3
    assert bench.extrapolation(0.036, -0.2)["hours_at_measured_efficiency_estimate"].null_count() == 3


@pytest.mark.parametrize("args, match", [
    (dict(cases=0), "--cases"), (dict(jobs="2"), "including 1"), (dict(jobs="1,0"), "--jobs"),
    (dict(backend="spark"), "backend"),
])
def test_bad_arguments_are_named(args, match):
    with pytest.raises(ParamsError, match=match):
        bench.settings(params_with(), **{"cases": 10, "jobs": "1,2", "backend": "loky", "out": None, **args})


def test_bench_is_a_command_not_a_pipeline_stage():
    args = build_parser().parse_args(["bench", "throughput", "--cases", "12"])
    assert (args.stage, args.module, args.cases) == ("bench throughput", "analysis.bench", 12)
    assert "bench throughput" in TOOLS and "bench throughput" not in STAGES
