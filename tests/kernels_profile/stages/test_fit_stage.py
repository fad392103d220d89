"""kernels_profile.stages.fit: the raw timing files of kernels.fit.raw and the kernel source each is
fitted as; a file that is not a profile, lacks AR or prefill timings, or measures what another file of
its source measures is a named ParamsError; the speedup range of no rows is None."""

from pathlib import Path

import polars as pl
import pytest
from fixtures import ROOFLINE, kernel_speedups, params_with, run_environment_sidecar

from analysis.errors import ParamsError
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.latency.sources import RawSource, raw_sources
from kernels_profile.stages.fit import RAW_COLUMNS, by_source, speedup_range


def raw_params(value) -> dict:
    return params_with(**{"kernels.fit.raw": value})


def raw_frame(repeats=(0,), methods=("ar", "prefill")) -> pl.DataFrame:
    rows = [{"model": "m", "weights": "random", "dtype": "float32", "device": "cpu", "method": method,
             "baseline": "eager", "context": 0, "n": 8, "repeat": r, "seconds": 0.01} for method in methods
            for r in repeats]
    return pl.DataFrame(rows).select(RAW_COLUMNS)


def test_a_plain_path_is_this_runs_profile_and_entries_name_their_source():
    assert raw_sources(raw_params("data/kernels/raw.parquet")) == (RawSource(FIT_SOURCE, Path("data/kernels/raw.parquet")),)
    both = raw_sources(raw_params(["a.parquet", {"source": "h200-x", "path": "b.parquet"}]))
    assert [(r.source, str(r.path)) for r in both] == [(FIT_SOURCE, "a.parquet"), ("h200-x", "b.parquet")]


@pytest.mark.parametrize("value, message", [
    ([], "must name at least one raw timing file"),
    ([{"source": "x"}], "'kernels.fit.raw\\[0\\]' must be a path or a mapping with exactly 'source' and 'path'"),
    ([{"source": "x", "path": "p", "extra": 1}], "exactly 'source' and 'path'"),
    ([{"source": PAPER_SOURCE, "path": "p"}], f"'kernels.fit.raw\\[0\\].source' must be .*not '{PAPER_SOURCE}'"),
    ([{"source": "H200", "path": "p"}], "must be a lower-case name"),
    ([{"source": "x", "path": " "}], "'kernels.fit.raw\\[0\\].path' must be a non-empty path"),
    (["a.parquet", {"source": "x", "path": "a.parquet"}], "lists \\['a.parquet'\\] more than once"),
])
def test_bad_raw_entries_are_named(value, message):
    with pytest.raises(ParamsError, match=message):
        raw_sources(raw_params(value))


def test_files_of_one_source_are_stacked_and_labelled(tmp_path):
    raw_frame((0,)).write_parquet(tmp_path / "a.parquet")
    raw_frame((1,)).write_parquet(tmp_path / "b.parquet")
    stacked = by_source((RawSource("s", tmp_path / "a.parquet"), RawSource("s", tmp_path / "b.parquet"),
                         RawSource("t", tmp_path / "a.parquet")))
    assert set(stacked) == {"s", "t"} and stacked["s"].height == 4 and stacked["t"].height == 2
    assert set(stacked["s"]["raw_file"]) == {str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")}
    assert set(stacked["s"]["source"]) == {"s"}


def test_a_timing_two_files_of_one_source_hold_is_refused(tmp_path):
    raw_frame((0, 1)).write_parquet(tmp_path / "a.parquet")
    raw_frame((1,)).write_parquet(tmp_path / "b.parquet")
    messages = set()
    for _ in range(5):  # the clash named must not depend on a parallel group-by's order
        with pytest.raises(ParamsError, match="kernel source 's': .* both hold ar timings of m/eager at c=0, N=8, repeat 1") as err:
            by_source((RawSource("s", tmp_path / "a.parquet"), RawSource("s", tmp_path / "b.parquet")))
        messages.add(str(err.value))
    assert len(messages) == 1


def test_a_file_that_is_not_a_profile_or_lacks_a_method_is_named(tmp_path):
    raw_frame().drop("seconds").write_parquet(tmp_path / "cols.parquet")
    with pytest.raises(ParamsError, match="cols.parquet: not a kernel profile \\(no \\['seconds'\\] columns\\)"):
        by_source((RawSource("s", tmp_path / "cols.parquet"),))
    raw_frame(methods=("ar",)).write_parquet(tmp_path / "ar.parquet")
    with pytest.raises(ParamsError, match="ar.parquet: holds no AR timings or no prefill timings"):
        by_source((RawSource("s", tmp_path / "ar.parquet"),))
    with pytest.raises(ParamsError, match="absent.parquet"):
        by_source((RawSource("s", tmp_path / "absent.parquet"),))


def test_speedup_range_is_none_without_rows():
    speedups = pl.DataFrame({"baseline": ["eager", "eager", "static"], "speedup": [2.0, 5.0, 9.0]})
    assert speedup_range(speedups, pl.col("baseline") == "eager") == [2.0, 5.0]
    assert speedup_range(speedups, pl.col("baseline") == "compiled") is None


def test_fit_writes_the_roofline_ceiling_of_the_profiled_dtype():
    from analysis.latency.roofline import copy_speedup_ceiling
    from kernels_profile.measure.session import session_environment_metrics
    from kernels_profile.stages.fit import roofline_metrics

    assert roofline_metrics(None, kernel_speedups(10.0)) == "not recorded"
    roof = roofline_metrics(run_environment_sidecar([0.01, 0.01], roofline=ROOFLINE), kernel_speedups(10.0))
    assert roof["ceiling"] == copy_speedup_ceiling(512, ROOFLINE["stream_gbps"], ROOFLINE["matmul_f32_gflops"], 4)
    assert roof["ridge_flops_per_byte"] == pytest.approx(ROOFLINE["matmul_f32_gflops"] / ROOFLINE["stream_gbps"])
    assert (roof["measured_at_n_max"], roof["n_max"], roof["dtype"]) == (10.0, 512, "float32")
    env = session_environment_metrics(run_environment_sidecar([0.010, 0.013]))
    assert env["noisy"] is True and env["noisy_pairs"] == 1 and env["machine"]["cpu_model"] == "Test CPU"
    assert session_environment_metrics(None) == "not recorded"
