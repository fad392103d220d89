"""The pilot stage: settings, case sampling, budgets, tables, and a whole run on a tiny random model
(resumable: a second run decodes nothing and trains nothing)."""

from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

from analysis.pilot import report as pilotreport
from analysis.pipeline.config import Config
from analysis.errors import CorpusError
from kernels_profile.pilot import settings as pilot_settings
from kernels_profile.pilot import jobs as pilot_jobs
from kernels_profile.stages import pilot as stage
from fixtures import PILOT_RUN, ROOT, params_with, pilot_frozen_metrics, pilot_record


def cfg(**changes) -> Config:
    return Config(params_with(**changes), ROOT / "params.yaml")


# ---------------------------------------------------------------- cases and budgets

def _cases_frame(n: int, corpus: str = "HEvalFix-Py", decl: str = "import os\n\n\ndef helper():\n    pass\n\n\n"
                 "def fix_me_{i}(x):\n") -> pl.DataFrame:
    rows = []
    for i in range(n):
        body, fixed = f"    return x + {i}\n", f"    return x - {i}\n"
        head = decl.format(i=i)
        for framing, source, target in (("body", body, fixed), ("decl", head + body, head + fixed)):
            rows.append({"case_id": f"{corpus}/{i}", "corpus": corpus, "framing": framing, "source": source,
                         "target": target, "instruction": "Write a Python function to solve the problem."})
    return pl.DataFrame(rows)


def test_humaneval_sample_is_seeded_ordered_and_asks_for_a_bug_fix_of_the_named_function():
    frame = _cases_frame(50)
    a, b = pilot_jobs.humaneval_sample(frame, 10, 0, "decl"), pilot_jobs.humaneval_sample(frame, 10, 0, "decl")
    assert a == b and len({c.case_id for c in a}) == 10
    numbers = [int(c.case_id.split("/")[1]) for c in a]
    assert numbers == sorted(numbers)
    # HumanEvalFix's own instruction names the function the body belongs to (not the helper before it)
    assert [c.instruction for c in a] == [f"Fix bugs in fix_me_{i}." for i in numbers]
    assert a[0].source.startswith("import os") and a[0].source.endswith(f"return x + {numbers[0]}\n")
    body = pilot_jobs.humaneval_sample(frame, 10, 0, "body")
    assert [c.case_id for c in body] == [c.case_id for c in a] and body[0].source == f"    return x + {numbers[0]}\n"
    assert [c.case_id for c in pilot_jobs.humaneval_sample(frame, 10, 1, "decl")] != [c.case_id for c in a]
    with pytest.raises(CorpusError, match="fewer than pilot.humaneval_cases=60"):
        pilot_jobs.humaneval_sample(frame, 60, 0)
    with pytest.raises(CorpusError, match="no top-level def"):
        pilot_jobs.humaneval_sample(_cases_frame(5, decl="x = {i}\n"), 2, 0)
    with pytest.raises(CorpusError, match="no decl framing"):
        pilot_jobs.humaneval_sample(frame.filter(pl.col("framing") == "body"), 2, 0)


def test_budget_covers_the_longer_of_target_and_program():
    from fixtures import toy_model_tokenizer as toy

    tok = toy()
    case = pilot_jobs.EvalCase("c/0", "heldout", "k", "a\n", "b" * 10, "do it", "<gen>" + "b" * 30 + "</gen>")
    assert pilot_jobs.case_budget(tok, case, 5) == len(case.program) + 5 + 1
    short = pilot_jobs.EvalCase("c/1", "heldout", "k", "a\n", "b" * 40, "do it", "")
    assert pilot_jobs.case_budget(tok, short, 5) == 40 + 5 + 1


def test_jobs_pair_the_seeds_that_have_both_adapters():
    s = pilot_settings.settings(cfg(**{"pilot.seeds": [0, 1, 2], "pilot.decode_seeds": [0, 1], "pilot.rewrite_seeds": [1, 3],
                              "pilot.humaneval_seeds": [0]}).params)
    jobs = pilot_jobs.evaluation_jobs(s, n_humaneval=4)
    assert jobs[0] == pilot_jobs.EvalJob("before", None, "heldout", ("program",))
    assert jobs[1] == pilot_jobs.EvalJob("before", None, "HEvalFix-Py", ("program",))
    modes = {(j.seed, j.split): j.modes for j in jobs[2:]}
    # seed 2 is trained (teacher-forced metrics) but not decoded
    assert modes == {(0, "heldout"): ("program",), (1, "heldout"): ("program", "rewrite"),
                     (3, "heldout"): ("rewrite",), (0, "HEvalFix-Py"): ("program",)}
    assert all(j.split == "heldout" for j in pilot_jobs.evaluation_jobs(s, n_humaneval=0))
    # the checkpoint key part is the dict the jobs were keyed by before they were typed: finished jobs stay valid
    assert jobs[3].key() == {"phase": "after", "seed": 1, "split": "heldout", "modes": ["program", "rewrite"]}


# ---------------------------------------------------------------- tables

def test_speed_is_a_per_case_ratio_and_failed_cases_are_left_out_of_it():
    records = pilot_jobs.records_frame([
        pilot_record(case_id="c/0", seconds=1.0), pilot_record(case_id="c/0", mode="rewrite", seconds=4.0),
        pilot_record(case_id="c/1", seconds=2.0, exact_match=False), pilot_record(case_id="c/1", mode="rewrite", seconds=2.0),
        pilot_record(case_id="c/2", seconds=1.0), pilot_record(case_id="c/2", mode="rewrite", error="too long",
                                                      exact_match=False, seconds=None),
    ])
    pairs = pilotreport.paired(records)
    assert sorted(pairs["ratio"].to_list()) == [1.0, 4.0]
    speed = pilotreport.speed_table(records)
    both = speed.filter(pl.col("subset") == "both exact").row(0, named=True)
    everything = speed.filter(pl.col("subset") == "all cases").row(0, named=True)
    assert both["cases"] == 1 and both["ratio_median"] == 4.0
    assert everything["cases"] == 2 and everything["ratio_median"] == pytest.approx(2.5)
    em = pilotreport.em_table(records).filter(pl.col("mode") == "rewrite").row(0, named=True)
    assert em["cases"] == 3 and em["errors"] == 1 and em["em"] == pytest.approx(2 / 3)


def test_a_cut_off_program_is_not_counted_as_stopped():
    records = pilot_jobs.records_frame([
        pilot_record(case_id="c/0"), pilot_record(case_id="c/1", stopped="forced", valid=False, exact_match=False),
        pilot_record(case_id="c/2", mode="rewrite", stopped="budget", valid=False),
        pilot_record(case_id="c/3", error="too long", stopped=None, valid=False, exact_match=False)])
    em = pilotreport.em_table(records)
    program = em.filter(pl.col("mode") == "program").row(0, named=True)
    assert (program["stopped"], program["cut_off"], program["errors"]) == (1, 1, 1)
    assert em.filter(pl.col("mode") == "rewrite").row(0, named=True)["cut_off"] == 1
    counts = {(r["mode"], r["seed"]): r for r in pilotreport.stopped_counts(records)}
    assert counts[("program", 0)]["stopped"] == 1 and counts[("program", 0)]["cut_off"] == 1


def test_before_after_table_and_headline_read_the_plain_metrics():
    m = {"steps": 64, "heldout_cases": 33, "heldout_em_before": 0, "heldout_em_after": {"0": 4},
         "humaneval_cases": 33, "humaneval_em_before": 0, "humaneval_em_after": {"0": 1},
         "teacher_forced_before": {"program": {"loss": 2.0, "directive_accuracy": 0.5, "copy_exact": 0.1,
                                               "gen_exact": 0.0, "all_exact": 0.0}},
         "teacher_forced_after": {"program": {
             "0": {"loss": 0.2, "directive_accuracy": 0.9, "copy_exact": 0.8, "gen_exact": 0.4, "all_exact": 0.1},
             "1": {"loss": 0.3, "directive_accuracy": 0.8, "copy_exact": 0.7, "gen_exact": 0.3, "all_exact": 0.0}}},
         "before": {"cases": 33, "exact_match": 0}, "after_program": {"0": {"cases": 33, "exact_match": 4}},
         "humaneval_before": {"cases": 33, "exact_match": 0}, "humaneval": {"0": {"cases": 33, "exact_match": 1}},
         "speed": [{"seed": 0, "subset": "both exact", "cases": 0}]}
    table = pilotreport.before_after_table(m)
    assert table["seed"].to_list() == [0, 1] and table["heldout_em_after"].to_list() == [4, None]
    assert table["loss_before"].to_list() == [2.0, 2.0] and table["loss_after"].to_list() == [0.2, 0.3]
    assert table["humaneval_em_after"].to_list() == [1, None]
    rows = dict(pilotreport.headline(m))
    assert rows["held-out EM after 64 steps (seed 0)"].startswith("0 / 33 -> 4 / 33 (after 12.1%, 95% CI [")
    assert rows["HEvalFix-Py EM, bug-fix instruction (seed 0)"].startswith("0 / 33 -> 1 / 33 (after 3.0%")
    assert "McNemar exact p = 1, not significant" in rows["HEvalFix-Py EM, bug-fix instruction (seed 0)"]
    assert rows["held-out loss per supervised token, teacher-forced (seed 1)"] == "2.00 -> 0.30"
    assert not any("wall-clock" in k for k in rows)  # no both-exact case: no speed figure in the lead


def _write_frozen(root, name: str, metrics: dict, run: dict | None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    if run is not None:
        (folder / "run.json").write_text(json.dumps(run))


def test_frozen_runs_are_read_labelled_and_a_broken_one_is_refused(tmp_path):
    assert pilotreport.read_frozen(tmp_path / "absent") == {}
    _write_frozen(tmp_path, "pilot-long", pilot_frozen_metrics(384, 5, 1), PILOT_RUN)
    runs = pilotreport.read_frozen(tmp_path)
    assert list(runs) == ["pilot-long"] and runs["pilot-long"]["run"]["commit"] == "abc1234"
    _write_frozen(tmp_path, "half", pilot_frozen_metrics(8, 0, None), None)
    with pytest.raises(CorpusError, match="half lacks run.json"):
        pilotreport.read_frozen(tmp_path)


def test_steps_and_runs_tables_put_the_frozen_run_beside_the_default(tmp_path):
    m = pilot_frozen_metrics(64, 0, None)
    _write_frozen(tmp_path, "pilot-long", pilot_frozen_metrics(384, 5, 1), PILOT_RUN)
    m["frozen"] = pilotreport.read_frozen(tmp_path)
    steps = pilotreport.steps_table(m)
    default = steps.filter(pl.col("run") == "default (this run)")
    assert default["step"].to_list() == [0, 32, 64] and default["heldout_em"].to_list() == [0, None, 0]
    long = steps.filter(pl.col("run").str.starts_with("pilot-long"))
    assert "abc1234" in long["run"][0] and long["step"].to_list() == [0, 192, 384]
    assert long["heldout_em"].to_list() == [0, None, 5] and long["forced_exact_cases"].to_list() == [0, 1, 3]
    assert long["loss"].to_list() == [2.0, 0.5, 0.2]
    runs = pilotreport.runs_table(m)
    assert runs["steps"].to_list() == [64, 384] and runs["heldout_em_after"].to_list() == [0, 5]
    assert runs["humaneval_em_after"].to_list() == [None, 1] and runs["seconds"].to_list() == [None, 2400.0]
    rows = dict(pilotreport.frozen_headline(m))
    key = next(k for k in rows if "held-out EM after 384 steps" in k)
    assert rows[key].startswith("0 / 33 -> 5 / 33 (after 15.2%, 95% CI") and "pilot-long" in key and "abc1234" in key and "40 min" in key


def test_the_decoding_plan_says_what_decodes_and_what_does_not():
    s = pilot_settings.settings(cfg(**{"pilot.seeds": [0, 1], "pilot.decode_seeds": [0], "pilot.rewrite_seeds": [],
                              "pilot.humaneval_seeds": []}).params)
    plan = pilotreport.decoding_plan(s)
    assert "base model and program seed 0" in plan and "no rewrite adapter" in plan
    assert "no HEvalFix-Py decoding" in plan and "program seed 1: teacher-forced metrics only" in plan
    s = pilot_settings.settings(cfg(**{"pilot.seeds": [0], "pilot.decode_seeds": [0], "pilot.rewrite_seeds": [0],
                              "pilot.humaneval_seeds": [0], "pilot.humaneval_cases": 33}).params)
    plan = pilotreport.decoding_plan(s)
    assert "rewrite seed 0" in plan and "HEvalFix-Py (33 cases): base model and program seed 0" in plan


def test_examples_show_right_and_wrong_programs():
    records = pilot_jobs.records_frame([pilot_record(case_id=f"c/{i}", exact_match=i % 2 == 0, program=f"p{i}")
                                   for i in range(6)])
    shown = pilotreport.examples(records, seed=0, n=2)
    assert shown["result"].to_list() == ["right", "right", "wrong", "wrong"]
    assert shown["program"].to_list() == ["p0", "p2", "p1", "p3"]


# ---------------------------------------------------------------- a whole run on a tiny model

@pytest.fixture()
def tiny_run(tmp_path, monkeypatch):
    pytest.importorskip("peft")
    from kernels_profile.runtime.models import build_model
    from kernels_profile.pilot.train import add_lora
    from fixtures import toy_model_tokenizer as toy

    monkeypatch.chdir(tmp_path)
    loads = []

    def load_models(s):
        lm = build_model("tiny-qwen2", "random", "float32", "cpu")
        loaded = pilot_settings.Loaded(lm, toy())
        loaded.peft = add_lora(lm, s.lora(), seed=s.seeds[0])
        lm.model = loaded.peft
        loads.append(1)
        return loaded

    monkeypatch.setattr(stage, "load_models", load_models)
    config = cfg(**{"pilot.data.n_train": 6, "pilot.data.n_heldout": 2, "pilot.data.heldout_files": 2,
                    "pilot.data.max_lines": 10, "pilot.steps": 3, "pilot.checkpoint_every": 2, "pilot.seeds": [0, 1],
                    "pilot.decode_seeds": [0, 1], "pilot.warmup": 1,
                    "pilot.rewrite_seeds": [0], "pilot.humaneval_seeds": [], "pilot.max_tokens": 4000,
                    "pilot.budget_margin": 4, "pilot.lora.targets": ["q_proj", "v_proj"]})
    return config, loads


@pytest.mark.slow
def test_a_run_writes_every_output_and_a_rerun_reuses_adapters_and_evaluations(tiny_run, monkeypatch):
    from analysis.layout import (
        METRICS,
        PILOT_CHECKPOINTS,
        PILOT_CURVE,
        PILOT_LOSSES,
        PILOT_RECORDS,
        TABLES,
    )

    config, loads = tiny_run
    from analysis.layout import PILOT_FROZEN

    _write_frozen(PILOT_FROZEN, "pilot-long", pilot_frozen_metrics(384, 5, 1), PILOT_RUN)
    metrics = stage.run(pilot_settings.settings(config.params))
    assert metrics["frozen"]["pilot-long"]["run"]["commit"] == "abc1234"
    runs = pl.read_csv(TABLES / "pilot_runs.csv")
    assert runs["run"].to_list()[0] == "default (this run)" and runs["heldout_em_after"].to_list()[-1] == 5
    steps = pl.read_csv(TABLES / "pilot_steps.csv")
    assert steps.filter(pl.col("run") == "default (this run)")["step"].to_list() == [0, 2, 3] * 2  # seeds 0 and 1
    assert metrics["steps_table"] and "no HEvalFix-Py decoding" in metrics["method"]
    records = pl.read_parquet(PILOT_RECORDS)
    # before (2 cases) + seed 0 program and rewrite (2 x 2) + seed 1 program (2)
    assert records.height == 8 and set(records["phase"]) == {"before", "after"}
    seed0 = records.filter((pl.col("seed") == 0))
    assert seed0["paired"].all() and sorted(seed0["position"].to_list()) == [0, 0, 1, 1]
    assert pl.read_parquet(PILOT_LOSSES).height == 3 * 3
    assert json.loads((METRICS / "pilot.json").read_text())["before"]["cases"] == 2
    assert (TABLES / "pilot_em.csv").is_file() and (TABLES / "pilot_speed.md").is_file()
    # the teacher-forced curve: the base model at step 0, then steps 2 and 3 (the last) of each adapter
    curve = pl.read_parquet(PILOT_CURVE)
    assert curve.filter(pl.col("mode") == "program", pl.col("seed") == 1)["step"].to_list() == [0, 2, 3]
    assert curve.filter(pl.col("mode") == "rewrite")["step"].to_list() == [0, 3]  # the rewrite adapter: its end
    assert (curve["sequences"] == 2).all() and curve["loss"].is_not_null().all()
    assert metrics["heldout_cases"] == 2 and set(metrics["heldout_em_after"]) == {"0", "1"}
    assert metrics["teacher_forced_before"]["program"]["step"] == 0
    assert metrics["teacher_forced_after"]["program"]["1"]["step"] == 3 and len(metrics["curve"]) == curve.height
    assert metrics["humaneval_em_before"] is None and metrics["stopped_counts"]
    assert pl.read_csv(TABLES / "pilot_before_after.csv")["seed"].to_list() == [0, 1]
    assert (TABLES / "pilot_curve.md").is_file()
    from analysis.layout import PILOT_DIAGNOSIS

    diagnosis = PILOT_DIAGNOSIS.with_suffix(".md").read_text()  # counted from this run, naming it
    assert f"task bugfix, 3 steps; {metrics['method']}" in diagnosis and "program seed 1, 2 held-out programs" in diagnosis
    assert pl.read_csv(PILOT_DIAGNOSIS.with_suffix(".csv")).height == 4
    assert metrics["task"] == "bugfix" and metrics["data"]["not_applied"] == dict(sorted(
        metrics["data"]["not_applied"].items()))
    assert metrics["after_program_em_range"] is not None and len(metrics["after_program"]) == 2
    assert len(list(PILOT_CHECKPOINTS.glob("*.pt"))) == 3 and len(list(PILOT_CHECKPOINTS.glob("eval-*.json"))) == 3
    # the edit-format check (UX review M3): the base model writes each format, each program adapter the program, on
    # both held-out cases without the grammar; the pilot's own decodes of them under the grammar join the table
    from analysis.layout import PILOT_FORMATS

    formats = pl.read_parquet(PILOT_FORMATS)
    free = formats.filter(pl.col("decoding") == "free")
    assert free.group_by("variant", "format").len().sort("variant", "format").rows() == [
        ("base model", "program", 2), ("base model", "search_replace", 2), ("base model", "unified_diff", 2),
        ("program adapter, seed 0", "program", 2), ("program adapter, seed 1", "program", 2)]
    assert formats.filter(pl.col("decoding") == "under the grammar").height == 2 + 2 * 2
    assert free["well_formed"].is_not_null().all() and (free["budget"] > 0).all()
    assert metrics["formats"]["cases"] == 2 and pl.read_csv(TABLES / "pilot_formats.csv").height == 5 + 3
    assert len(list(PILOT_CHECKPOINTS.glob("format-*.json"))) == 10
    from kernels_profile.runtime.checkpoints import KEY_FIELD, SECONDS_FIELD

    for path in PILOT_CHECKPOINTS.glob("*.json"):  # runtime JSON checkpoints: keyed as named, with their seconds
        payload = json.loads(path.read_text())
        assert path.stem.endswith(payload[KEY_FIELD]) and payload[SECONDS_FIELD] > 0 and "complete" not in payload

    def refuse(*args, **kwargs):
        raise AssertionError("a finished step ran again")

    monkeypatch.setattr(stage, "decode_case", refuse)
    monkeypatch.setattr("torch.optim.AdamW.step", refuse)
    monkeypatch.setattr("kernels_profile.pilot.formats.decode_rewrite", refuse)
    from analysis.layout import TIMINGS

    first = json.loads((TIMINGS / "pilot.json").read_text())
    again = stage.run(pilot_settings.settings(config.params))
    assert pl.read_parquet(PILOT_RECORDS).equals(records)
    assert again["before"] == metrics["before"] and loads == [1, 1]
    resumed = json.loads((TIMINGS / "pilot.json").read_text())
    # the resumed run still states what the work cost from scratch: its checkpoints' recorded seconds
    assert first["from_scratch_s"] > 0 and resumed["from_scratch_s"] >= first["from_scratch_s"] - first["seconds"]
    assert resumed["from_scratch_s"] > resumed["seconds"] - 30
    assert pl.read_parquet(PILOT_FORMATS).equals(formats)  # every format decode read back


@pytest.mark.slow
def test_formats_only_asks_the_base_model_alone_in_a_folder_of_its_own(tiny_run, monkeypatch):
    """`copydecode pilot --formats-only`: no adapter is trained; the base model's three formats without the grammar
    and its program under it, written under data/pilot/formats-default/, never over the stage's outputs."""
    from analysis.layout import PILOT_DIR, PILOT_FORMATS, TABLES, TIMINGS

    config, loads = tiny_run

    def refuse(*args, **kwargs):
        raise AssertionError("--formats-only trained an adapter")

    monkeypatch.setattr("torch.optim.AdamW.step", refuse)
    result = stage.run(pilot_settings.settings(config.params, formats_only=True))
    folder = PILOT_DIR / "formats-default"
    frame = pl.read_parquet(folder / PILOT_FORMATS.name)
    assert sorted(set(frame["variant"])) == ["base model"] and frame.height == 3 * 2 + 2
    assert json.loads((folder / "metrics.json").read_text())["formats"]["cases"] == 2
    assert (folder / "pilot_formats.md").is_file() and result["run_name"] == "pilot-formats-default"
    assert not PILOT_FORMATS.exists() and not (TABLES / "pilot_formats.csv").exists()
    assert (TIMINGS / "pilot-formats-default.json").is_file() and not (TIMINGS / "pilot.json").exists()


def test_a_case_that_cannot_run_is_recorded_with_its_error_and_no_output():
    from kernels_profile.runtime.models import build_model
    from kernels_profile.decode.masks import MaskTables
    from kernels_profile.pilot.train import program_record, rewrite_record
    from fixtures import toy_model_tokenizer as toy

    lm, tok = build_model("tiny-qwen2", "random", "float32", "cpu"), toy()
    case = pilot_jobs.EvalCase("pilot-heldout/7", "heldout", "k", "a = 1\n", "a = 2\n", "on line 1, change 1 to 2", "")
    small = program_record(lm, tok, case, budget=2, masks=MaskTables.for_model(lm, tok))
    assert "pilot-heldout/7" in small["error"] and "too small" in small["error"] and "output" not in small
    empty = pilot_jobs.EvalCase("pilot-heldout/8", "heldout", "k", "a = 1\n", "a = 2\n", "  ", "")
    for record in (program_record(lm, tok, empty, budget=40, masks=MaskTables.for_model(lm, tok)),
                   rewrite_record(lm, tok, empty, budget=40)):
        assert "pilot-heldout/8" in record["error"] and "instruction is empty" in record["error"]
        assert record["exact_match"] is False and "output" not in record
    frame = pilot_jobs.records_frame([{**small, "phase": "after", "seed": 0, "split": "heldout", "kind": "k"}])
    assert frame["output"].to_list() == [None] and frame["error"].to_list() == [small["error"]]




def test_forced_metrics_are_a_runtime_checkpoint_a_stray_key_is_measured_again(tmp_path, monkeypatch, capsys):
    import contextlib
    from types import SimpleNamespace

    from analysis.layout import PILOT_CHECKPOINTS
    from kernels_profile.pilot import train as measure
    from kernels_profile.runtime.checkpoints import KEY_FIELD, FromScratch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pilot_jobs, "fingerprint", lambda model, weights: {"model": model})
    calls = []
    metrics = measure.ForcedMetrics(2, 10, 0.5, 0.5, 0.5, 0.5, 1.0, 0.5)
    monkeypatch.setattr(stage, "teacher_forced", lambda model, seqs: calls.append(1) or metrics)  # as the stage calls it
    loaded = SimpleNamespace(peft=SimpleNamespace(disable_adapter=contextlib.nullcontext))
    s = pilot_settings.settings(cfg().params)
    first = stage.before_metrics(s, loaded, "program", [], FromScratch())
    scratch = FromScratch()
    again = stage.before_metrics(s, loaded, "program", [], scratch)
    assert first == again == dataclasses.asdict(metrics) and calls == [1] and scratch.recorded > 0  # read back
    (path,) = PILOT_CHECKPOINTS.glob("forced-before-program-*.json")
    payload = json.loads(path.read_text())
    path.write_text(json.dumps({**payload, KEY_FIELD: "another", "complete": True}))
    stage.before_metrics(s, loaded, "program", [], FromScratch())
    assert calls == [1, 1] and "keyed 'another'" in capsys.readouterr().err
