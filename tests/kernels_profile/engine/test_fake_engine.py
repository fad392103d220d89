"""The engine harness end to end on a fake engine (tests/kernels_profile/engine/fake_driver.py): the driver run as
an external isolated process, the gold and plans made from its output, a resumed run, the records collected and
read back as a frozen run, and the simulator compared with it (analysis.engine.compare)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from analysis.engine import compare
from analysis.engine.frozen import read_frozen, simulation_inputs
from analysis.engine.methods import run_methods
from analysis.engine.requests import DrawSettings, EngineRunError
from analysis.latency.stepcost import MEASURED, StepCostModel, StepRange
from kernels_profile.engine import process, session

FAKE = Path(__file__).with_name("fake_driver.py")


def cases() -> pl.DataFrame:
    rows = [{"case_id": f"{c}-{i}", "corpus": c, "language": "py", "framing": "unit",
             "source": "".join(f"line {j}\n" for j in range(i + 2)), "target": "x\n", "instruction": None}
            for c in ("A", "B") for i in range(4)]
    return pl.DataFrame(rows)


def fake_prompts(requests, model_dir, max_model_len, max_tokens):
    ids = {r.rid: {"rewrite_prompt_ids": [10 + ord(ch) % 50 for ch in r.source],
                   "program_prompt_ids": [11 + ord(ch) % 50 for ch in r.source]} for r in requests}
    return ids, (lambda text: [3 + ord(ch) % 90 for ch in text]), 2


@pytest.fixture
def harness(tmp_path, monkeypatch):
    cases().write_parquet(tmp_path / "cases.parquet")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, venv / "bin" / "python")
    monkeypatch.setattr(session, "DRIVER", FAKE)
    monkeypatch.setattr(session, "prompts", fake_prompts)
    settings = session.EngineRunSettings(
        venv=venv, model_dir=tmp_path / "model", out=tmp_path / "run", cases=tmp_path / "cases.parquet",
        draw=DrawSettings(0, 1, 1, "body", 100), max_tokens=6, concurrency=(1, 2), repeats=2, warmup_requests=1,
        ngram_ks=(5,), lookup_min=1, lookup_max=2, copy=True, suffix=False,
        engine_args={"max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 16},
        kv_cache_gib=1, threads=1, driver_timeout_s=120)
    return settings


def test_a_fake_engine_run_is_collected_read_back_and_compared(harness, monkeypatch):
    s = harness
    facts = session.run_all(s, "not asked", progress=lambda message: None)
    assert facts["methods"] == ["ar", "ngram-k5", "copy"] and facts["requests"] == 4
    methods = run_methods(s.ngram_ks, False, True)
    counts = session.collect(s.out, methods, s.concurrency, s.repeats, {"cpu_model": "test"})
    assert counts == {"runs": 12, "runs_expected": 12, "request_records": 48, "same_text_share": 1.0}
    # a rerun finds every run done and starts no driver
    monkeypatch.setattr(session, "run_driver", lambda *a, **k: pytest.fail("a finished run was run again"))
    session.run_all(s, "not asked", progress=lambda message: None)

    (s.out / "run.json").write_text('{"command": "x", "commit": "c", "started": "s", "ended": "e", "seconds": 1, '
                                    '"machine": {"cpu_model": "test"}, "draw": {"seed": 0}, "settings": {"lookup_min": 1, '
                                    '"lookup_max": 2, "engine_args": {"max_num_batched_tokens": 2048, "max_num_seqs": 16}}}')
    frozen = read_frozen(s.out)
    inp = simulation_inputs(frozen)
    runs = compare.measured(frozen.results)
    # the fake's step cost is 0.05 s + 0.0005 s per token, a form the step-cost model holds exactly
    cost = StepCostModel("fake", 0.05, 0.0, 0.0005, 1.0, 0.0, 0.0, MEASURED, StepRange(16, 2048, 4096))
    predicted = compare.predictions(["ar"], [1, 2], [0, 1], inp, cost, "exact")
    table = compare.comparison(runs, predicted)
    ar1 = table.filter((pl.col("method") == "ar") & (pl.col("concurrency") == 1)).row(0, named=True)
    # the simulator counts one decode step more per request than the fake (its prefill emits nothing)
    assert abs(ar1["output_throughput_error"]) < 0.25
    fitted = compare.fit_engine_steps(frozen.steps, "all steps")
    assert fitted.c0 == pytest.approx(0.05, rel=0.05) and fitted.c_w / fitted.t_star == pytest.approx(0.0005, rel=0.1)
    gains = compare.speedups(frozen.records, runs, 200, 0)
    assert set(gains["method"]) == {"ar", "ngram-k5", "copy"}
    assert gains.filter(pl.col("method") == "ar")["throughput_over_ar"].to_list() == [1.0, 1.0]


def test_a_failing_driver_is_a_named_error_and_leaves_no_process(harness, tmp_path, monkeypatch):
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nprint('engine exploded')\nsys.exit(3)\n")
    monkeypatch.setattr(session, "DRIVER", broken)
    with pytest.raises(process.EngineProcessError, match="exited 3 .*engine exploded"):
        session.run_all(harness, "not asked", progress=lambda message: None)


def test_an_overrunning_driver_is_ended_with_its_group(tmp_path):
    sleeper = tmp_path / "sleeper.py"
    marker = tmp_path / "child.pid"
    sleeper.write_text("import subprocess, sys, time\n"
                       f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                       f"open({str(marker)!r}, 'w').write(str(p.pid))\ntime.sleep(60)\n")
    job = tmp_path / "job.json"
    job.write_text("{}")
    with pytest.raises(process.EngineProcessError, match="ran past"):
        process.run_driver(Path(sys.executable), sleeper, job, tmp_path, dict(os.environ), 3, tmp_path / "log")
    child = int(marker.read_text())
    for _ in range(100):  # the group got SIGTERM: the child is gone (or a zombie) within moments
        if not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the driver's child {child} outlived its group's end")


def test_the_frozen_reader_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(EngineRunError, match="no frozen engine run"):
        read_frozen(tmp_path / "missing")
    (tmp_path / "run").mkdir()
    with pytest.raises(EngineRunError, match="no run record"):
        read_frozen(tmp_path / "run")


RUN_JSON_TEXT = ('{"command": "x", "commit": "c", "started": "s", "ended": "e", "seconds": 1, "machine": {"cpu_model": "test"}, '
                 '"model": {"model": "fake"}, "draw": {"seed": 0}, "suffix_not_run": "not asked", "settings": {"lookup_min": 1, '
                 '"lookup_max": 2, "engine_args": {"max_num_batched_tokens": 2048, "max_num_seqs": 16}}}')


def test_the_summary_stage_reads_a_frozen_run_and_the_claims_row_reads_the_stage(harness, tmp_path, monkeypatch):
    import json
    import shutil

    from analysis.claims.real_engine import engine_claim
    from analysis.claims.verdict import BEYOND, paper_claims
    from analysis.stages import engine as stage

    s = harness
    session.run_all(s, "not asked", progress=lambda message: None)
    session.collect(s.out, run_methods(s.ngram_ks, False, True), s.concurrency, s.repeats, {"cpu_model": "test"})
    (s.out / "run.json").write_text(RUN_JSON_TEXT)
    root = tmp_path / "root"
    shutil.copytree(s.out, root / "reports/engine/frozen/fake", ignore=shutil.ignore_patterns("raw"))
    monkeypatch.chdir(root)
    summary = stage.run(stage.EngineSummarySettings(Path("reports/engine/frozen/fake"), 100, 0, 0.15))
    assert summary["runs"] == 12 and summary["same_text_share"] == 1.0
    metrics = json.loads(Path("reports/metrics/engine.json").read_text())
    assert set(metrics["simulator"]) == {"all steps", "AR steps"}
    assert "C=1:" in metrics["claim"]["ours"] and "median throughput error" in metrics["claim"]["ours"]
    for name in ("runs", "speedups", "vs_simulator", "ranking", "error"):
        assert Path(f"reports/tables/engine_{name}.csv").is_file()
    assert Path("reports/figures/engine_vs_simulator.svg").is_file()
    claim = engine_claim(paper_claims()["real_engine"], Path("reports/tables"), Path("reports/metrics"))
    assert claim.verdict == BEYOND and [sc.scope.split()[1] for sc in claim.scopes] == ["1", "2"]
