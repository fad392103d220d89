"""The quiet-vs-busy benchmark: the same (context, N, loop) kernel pairs and the same e2e cases of two
runs, compared within pairs, judged against issue 15's tolerances and written as .md and .json."""

import json

import polars as pl
import pytest
from fixtures import ROOT

from analysis.cli import build_parser, main as copydecode
from analysis.errors import ParamsError
from analysis.layout import E2E_MEASUREMENTS, KERNELS_RAW
from kernels_profile.tools import bench_busy as busybench
from kernels_profile.tools.bench_busy import compare, compare_e2e, e2e_medians
from kernels_profile.measure.sidecar import environment_path
from kernels_profile.measure.profiler import RAW_SCHEMA


def raw(ar_scale: float, ns=(8, 128, 512), contexts=(256,)) -> pl.DataFrame:
    """Kernel raw rows with the profiler's columns: one AR run and one prefill grid per pair."""
    rows = []
    for context in contexts:
        for n in ns:
            for repeat in range(2):
                base = ("m", "random", "float32", "cpu")
                rows.append((*base, "ar", "eager", context, n, repeat, 0.01 * n * ar_scale, "eager", 2))
                rows.append((*base, "prefill", "eager", context, n, repeat, 0.05 + 0.001 * n, "eager", 2))
    return pl.DataFrame(rows, orient="row", schema={**RAW_SCHEMA, "pair_baseline": pl.String, "threads": pl.Int64})


def measurements(line_scale: dict[str, float], cases_per_corpus: int = 2, repeats: int = 2) -> pl.DataFrame:
    """e2e rows with the stage's columns: per case and repeat, AR 8 s, a PLD run and the line program
    at 2 s times its corpus's scale (so the corpus's AR / line-program ratio is 4 / scale)."""
    rows = []
    for corpus, scale in line_scale.items():
        for case in range(cases_per_corpus):
            for repeat in range(repeats):
                for index, (method, seconds) in enumerate((("ar", 8.0), ("pld-latest-k10", 4.0),
                                                           ("copy-line-ideal", 2.0 * scale), ("copy-token-ideal", 1.0))):
                    rows.append({"model": "smollm2-135m", "weights": "gguf", "dtype": "float32", "corpus": corpus,
                                 "case_id": f"{corpus}/{case}", "method": method, "repeat": repeat,
                                 "order_index": index, "seconds": seconds, "forwards": 8, "tokens": 8,
                                 "run_id": "r1"})
    return pl.DataFrame(rows)


def test_busy_over_quiet_change_per_point():
    table = compare(raw(1.0), raw(1.5))
    assert table["n"].to_list() == [8, 128, 512]
    assert table["change"].to_list() == pytest.approx([0.5, 0.5, 0.5])
    assert not table["passed"].any()
    row = table.filter(pl.col("n") == 8).row(0, named=True)
    assert row["quiet"] == pytest.approx(0.08 / 0.058) and row["quiet_pairs"] == 2


def test_kernel_change_passes_at_the_tolerance_and_fails_past_it():
    assert compare(raw(1.0), raw(1.15))["passed"].all()
    assert not compare(raw(1.0), raw(0.84))["passed"].any()


def test_a_kernel_grid_missing_a_point_is_named_not_dropped():
    with pytest.raises(ParamsError, match=r"busy kernel profile has no N = \[512\]"):
        compare(raw(1.0), raw(1.0, ns=(8, 128)))
    with pytest.raises(ParamsError, match="different kernel points"):
        compare(raw(1.0, contexts=(256, 2048)), raw(1.0))


def test_e2e_line_program_medians_per_corpus_and_over_every_case():
    medians = e2e_medians(measurements({"HEvalFix-Py": 1.0, "ProbeEdit-S": 2.0}))
    by = {(r["model"], r["corpus"]): r for r in medians.iter_rows(named=True)}
    assert by[("smollm2-135m", "HEvalFix-Py")]["ratio"] == pytest.approx(4.0)
    assert by[("smollm2-135m", "ProbeEdit-S")]["ratio"] == pytest.approx(2.0)
    overall = by[("all", "all")]
    assert overall["ratio"] == pytest.approx(3.0) and overall["cases"] == 4 and overall["pairs"] == 8


def test_e2e_ratios_are_taken_within_one_repeat():
    frame = measurements({"HEvalFix-Py": 1.0}, cases_per_corpus=1)
    # the whole second repeat runs 3x slower: within-repeat ratios do not move
    frame = frame.with_columns(seconds=pl.when(pl.col("repeat") == 1).then(pl.col("seconds") * 3).otherwise(pl.col("seconds")))
    assert e2e_medians(frame)["ratio"].to_list() == pytest.approx([4.0, 4.0])


def test_e2e_change_is_judged_against_twenty_percent():
    quiet = measurements({"HEvalFix-Py": 1.0, "ProbeEdit-S": 1.0})
    busy = measurements({"HEvalFix-Py": 1.2, "ProbeEdit-S": 1.1})  # ratios 3.33 and 3.64 against 4
    table = compare_e2e(quiet, busy)
    by = {r["corpus"]: r for r in table.iter_rows(named=True)}
    assert by["HEvalFix-Py"]["change"] == pytest.approx(1 / 1.2 - 1) and by["HEvalFix-Py"]["passed"]
    assert by["ProbeEdit-S"]["change"] == pytest.approx(1 / 1.1 - 1) and by["ProbeEdit-S"]["passed"]
    worse = compare_e2e(quiet, measurements({"HEvalFix-Py": 1.3, "ProbeEdit-S": 1.0}))
    assert worse.filter(pl.col("corpus") == "HEvalFix-Py")["passed"].to_list() == [False]
    assert worse.filter(pl.col("corpus") == "all")["change"][0] == pytest.approx((8 / 2.6 + 4) / 2 / 4 - 1)


def test_e2e_runs_of_different_corpora_are_an_error():
    with pytest.raises(ParamsError, match="different e2e model x corpus groups"):
        compare_e2e(measurements({"HEvalFix-Py": 1.0}), measurements({"HEvalFix-JS": 1.0}))
    with pytest.raises(ParamsError, match="'copy-line-ideal'"):
        e2e_medians(measurements({"HEvalFix-Py": 1.0}).filter(pl.col("method") != "copy-line-ideal"))


def _repository(root, ar_scale: float, line_scale: float, kernels_env: dict | None, e2e_env: dict | None):
    for path, frame, env in ((KERNELS_RAW, raw(ar_scale), kernels_env),
                             (E2E_MEASUREMENTS, measurements({"HEvalFix-Py": line_scale}), e2e_env)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(root / path)
        if env is not None:
            environment_path(root / path).write_text(json.dumps(env))
    return root


def bench(*args) -> int:
    """`copydecode bench busy ARGS` (it reads no params: the two runs carry their own settings)."""
    return copydecode(["bench", "busy", *map(str, args)])


def test_main_writes_markdown_and_json_with_both_environments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its run summary goes to ./data/summaries: never the checkout's (UX review P1)
    quiet = _repository(tmp_path / "quiet", 1.0, 1.0,
                        {"threads": [1], "noisy": False, "contended": False, "other_busy_cores": [0.1],
                         "noisy_reasons": [], "machine": {"cpu_model": "Test CPU"}},
                        {"threads": 1, "noisy": False, "contended": False, "noisy_reasons": [],
                         "contention": {"other_busy_cores": 0.05}, "drift": {"drift": 0.02}})
    busy = _repository(tmp_path / "busy", 1.1, 1.3,
                       {"threads": [1], "noisy": True, "contended": True, "other_busy_cores": [1.6],
                        "noisy_reasons": ["run r: other load 1.6 busy cores > 1 free core + 0.5"]},
                       None)
    stem = tmp_path / "out" / "bench"
    (stem.parent).mkdir()
    assert bench(quiet, busy, "--out", stem) == 0
    result = json.loads(stem.with_name("bench.json").read_text())
    assert result["kernel"]["max_abs_change"] == pytest.approx(0.1) and result["kernel"]["passed"] is True
    assert result["e2e"]["max_abs_change"] == pytest.approx(1 - 1 / 1.3)
    assert result["e2e"]["passed"] is False and result["passed"] is False
    assert len(result["kernel"]["rows"]) == 3 and len(result["e2e"]["rows"]) == 2  # one corpus + all
    runs = result["runs"]
    assert runs["quiet"]["kernels"]["threads"] == [1] and runs["busy"]["kernels"]["contended"] is True
    assert runs["quiet"]["e2e"]["other_busy_cores"] == 0.05 and runs["busy"]["e2e"]["sidecar"] is False
    text = stem.with_name("bench.md").read_text()
    assert "**FAIL** (kernel PASS, e2e FAIL)" in text
    assert "other load 1.6 busy cores > 1 free core + 0.5" in text and "no environment sidecar" in text
    assert text.count("| PASS |") == 3 and text.count("| FAIL |") == 2


def test_main_names_a_missing_run_and_its_stage(tmp_path, capsys):
    assert bench(tmp_path / "nowhere", tmp_path, "--out", tmp_path / "x") == 2
    err = capsys.readouterr().err
    assert "copydecode bench busy: error:" in err and "copydecode kernels profile" in err
    with pytest.raises(SystemExit) as exit_:
        bench("only-one")
    assert exit_.value.code == 2


def test_busy_and_mask_are_copydecode_commands_not_pipeline_stages():
    from analysis.pipeline.commands import STAGES, TOOLS

    args = build_parser().parse_args(["bench", "busy", "q", "b"])
    assert (args.stage, args.module, args.quiet, args.busy) == ("bench busy", "kernels_profile.tools.bench_busy",
                                                                "q", "b") and not hasattr(args, "raw_out")
    args = build_parser().parse_args(["bench", "mask", "--programs", "3"])
    assert (args.stage, args.module, args.programs, args.lines) == ("bench mask", "kernels_profile.tools.bench_mask", 3,
                                                                                    None)
    assert {"bench busy", "bench mask"} <= set(TOOLS) and not {"bench busy", "bench mask"} & set(STAGES)
    assert not hasattr(busybench, "main")


def test_the_default_report_sits_beside_the_kernel_reports():
    assert busybench.DEFAULT_STEM.name == "benchmark_busy" and busybench.DEFAULT_STEM.parent.name == "kernels"


def test_bench_output_files_are_named_by_out_and_the_old_names_still_work(tmp_path, capsys):
    """P5 (issue 41): an output file is `--out FILE` (or `--out STEM` for a report's .md and .json) on every
    benchmark; `bench busy --stem` and `bench mask --json`, the old names, still parse to the same option."""
    for argv in (["bench", "busy", "q", "b", "--out", "x/busy"], ["bench", "busy", "q", "b", "--stem", "x/busy"]):
        assert build_parser().parse_args(argv).raw_out == "x/busy"
    for argv in (["bench", "mask", "--out", "m.json"], ["bench", "mask", "--json", "m.json"]):
        assert build_parser().parse_args(argv).raw_out == "m.json"
    for command, metavar in (("busy", "--out STEM"), ("mask", "--out FILE")):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["bench", command, "--help"])
        assert metavar in capsys.readouterr().out, command


def test_bench_busy_reads_no_params_and_refuses_set_and_params_by_name(tmp_path, capsys):
    """P5: --set on a command that reads no params is a named error, not silently ignored."""
    assert bench(tmp_path, tmp_path, "--set", "spans.seed=1") == 2
    err = capsys.readouterr().err
    assert "`bench busy` reads no params" in err and "--set would be ignored" in err
    assert copydecode(["--params", str(ROOT / "params.yaml"), "bench", "busy", str(tmp_path), str(tmp_path)]) == 2
    assert "--params would be ignored" in capsys.readouterr().err
