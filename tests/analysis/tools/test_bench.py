"""The throughput benchmark's arithmetic and argument checks (the benchmark itself is a command, not a test)."""

import json

import pytest
from fixtures import params_with

from analysis.tools import bench
from analysis.cli import build_parser
from analysis.pipeline.commands import STAGES, TOOLS
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
    (dict(backend="spark"), "backend"), (dict(backend="loky,loky"), "distinct"),
    (dict(memory_sizes="0"), "memory-sizes"), (dict(memory_sizes="a,4"), "memory-sizes"),
])
def test_bad_arguments_are_named(args, match):
    with pytest.raises(ParamsError, match=match):
        bench.settings(params_with(), **{"cases": 10, "jobs": "1,2", "backend": "loky", "bench_out": None, **args})


def test_bench_is_a_command_not_a_pipeline_stage():
    args = build_parser().parse_args(["bench", "throughput", "--cases", "12"])
    assert (args.stage, args.module, args.cases) == ("bench throughput", "analysis.tools.bench", 12)
    assert "bench throughput" in TOOLS and "bench throughput" not in STAGES
    # the subcommand's --out is its report folder, not the one-off output root (`copydecode --out DIR ...`)
    args = build_parser().parse_args(["bench", "throughput", "--out", "x/bench"])
    assert (args.out, args.bench_out) == (None, "x/bench")
    assert build_parser().parse_args(["--out", "runs/b", "bench", "throughput"]).out == "runs/b"


def test_bench_size_comes_from_params_unless_given():
    def size(cases=None, **changes):
        return bench.settings(params_with(**changes), cases=cases, jobs="1,2", backend="loky")

    assert size(**{"bench.cases": 7, "parallel.shard_cases": 3}).cases == 7
    assert size(**{"parallel.shard_cases": 3}).shard_cases == 3
    assert size(5, **{"bench.cases": 7}).cases == 5
    plain = bench.settings(params_with(**{"bench.jobs": [1, 3], "bench.backends": ["threading"]}), None, None, None)
    assert (plain.jobs, plain.backend) == ((1, 3), "threading")  # no --jobs/--backend: params bench.*
    with pytest.raises(ParamsError, match="must be an integer"):
        size(**{"bench.cases": "many"})


def test_backends_and_memory_sizes_come_from_params_unless_given():
    shipped = bench.settings(params_with(), cases=None, jobs="1,2", backend=None)
    assert shipped.backends == ("loky", "dask") and shipped.backend == "loky"
    assert shipped.memory_sizes == (400, 4000, 20000)
    given = bench.settings(params_with(), cases=3, jobs="1,2", backend="threading", memory_sizes="9,3")
    assert given.backends == ("threading",) and given.memory_sizes == (3, 9)
    assert bench.settings(params_with(), cases=3, jobs="1", backend="loky", memory_sizes="none").memory_sizes == ()
    args = build_parser().parse_args(["bench", "throughput", "--backend", "loky,dask", "--memory-sizes", "4,8"])
    assert (args.backend, args.memory_sizes) == ("loky,dask", "4,8")


def test_tree_peak_counts_a_child_process():
    import subprocess
    import sys

    with bench.TreePeak(interval=0.01) as alone:
        pass
    child = "x = b'x' * (200 * 2**20); import time; time.sleep(0.5)"  # 200 MiB written, so resident
    with bench.TreePeak(interval=0.01) as tree:
        subprocess.run([sys.executable, "-c", child], check=True)
    assert tree.peak_mb > alone.peak_mb + 150  # the child's 200 MiB are in the sum


@pytest.mark.slow
def test_bench_runs_at_a_tiny_size(tmp_path):
    """The command end to end on 6 cases in shards of 4, 1 and 2 workers: its report and the README sentence."""
    from analysis.pipeline.config import Config
    from analysis.present.readme import _throughput_sentence

    out = tmp_path / "reports/bench"
    summary = bench.run(bench.settings(params_with(**{"parallel.shard_cases": 4}), cases=6, jobs="1,2",
                                       backend="loky,threading", bench_out=str(out), memory_sizes="2,6"))
    result = json.loads((out / "throughput.json").read_text())
    assert result["cases"] == 6 and result["shard_cases"] == 4 and summary["cases"] == 6
    assert [r["n_jobs"] for r in result["runs"]] == [1, 2]
    for r in result["runs"]:
        assert set(r["seconds"]) == set(bench.STEPS) and all(v > 0 for v in r["seconds"].values())
        assert r["peak_rss_mb_tree_sampled"] > 0
    one, two = result["runs"]
    assert two["peak_rss_mb_tree_sampled"] > one["peak_rss_mb_tree_sampled"]  # the two workers' memory counts
    assert [row["cores"] for row in result["extrapolation_estimate"]] == list(bench.EXTRAPOLATE_CORES)
    assert all(v >= 0 for v in one["cpu_seconds_main"].values()) and one["cases_per_cpu_second_main"] > 0
    other, = result["backend_runs"]  # the second backend at 2 workers, beside the first's
    assert (other["backend"], other["n_jobs"]) == ("threading", 2)
    assert other["overhead_vs_first"] == pytest.approx(other["total_seconds"] / two["total_seconds"], abs=1e-3)
    assert [m["cases"] for m in result["memory_by_size"]] == [2, 6] and all(m["peak_rss_mb"] > 50 for m in result["memory_by_size"])
    assert result["memory_growth_largest_vs_previous"] > 0
    assert "Peak memory by corpus size" in (out / "throughput.md").read_text()
    assert "ESTIMATE" in (out / "throughput.md").read_text()
    sentence = _throughput_sentence(tmp_path)
    assert "6 synthetic CommitEdits cases" in sentence and "ESTIMATE for 1,000,000 cases" in sentence


def test_a_small_synthetic_corpus_spreads_over_every_repository(monkeypatch):
    from types import SimpleNamespace

    from analysis.corpora import registry
    from analysis.corpora.cases import Case
    from analysis.stages import corpora as corpora_stage

    base = [Case(f"CommitEdits-{repo}/{i}", f"CommitEdits-{repo}", "python", "file", "a\n", "b\n")
            for repo in ("x", "y") for i in range(10)]
    monkeypatch.setattr(registry, "build_corpus", lambda kind, s: SimpleNamespace(cases=base))
    one_build = corpora_stage.settings(params_with(**{"corpora.commits": [{"repo": "one.bundle"}]}))
    small = bench.synthetic_cases(one_build, 4)
    assert [c.case_id for c in small] == ["CommitEdits-x/0#0", "CommitEdits-x/5#0", "CommitEdits-y/0#0", "CommitEdits-y/5#0"]
    large = bench.synthetic_cases(one_build, 45)
    assert len({c.case_id for c in large}) == 45 and large[20].case_id == "CommitEdits-x/0#1"


def test_a_spawned_child_reports_its_own_peak_not_its_parents():
    """The memory-by-size runs measure fresh processes: a child's peak must not inherit this process's."""
    import multiprocessing

    ballast = bytearray(300 * 2**20)  # this process: >= 300 MiB resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_report_peak, args=(queue,))
    child.start()
    child_peak = queue.get()
    child.join()
    assert bench.own_peak_mb() >= 300
    assert 0 < child_peak < 250, child_peak


def _report_peak(queue):
    queue.put(bench.own_peak_mb())
