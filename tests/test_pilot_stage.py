"""The pilot stage: settings, case sampling, budgets, tables, and a whole run on a tiny random model
(resumable: a second run decodes nothing and trains nothing)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis import pilotreport
from analysis.config import Config
from analysis.errors import CorpusError, ParamsError
from kernels_profile.stages import pilot as stage
from conftest import ROOT, params_with


def cfg(**changes) -> Config:
    return Config(params_with(**changes), ROOT / "params.yaml")


# ---------------------------------------------------------------- settings

def test_defaults_validate_and_a_preset_overlays_them():
    s = stage.settings(cfg())
    assert s.model == "smollm2-135m" and s.seeds == (0, 1, 2) and s.data.n_heldout == 33
    gpu = stage.settings(cfg(), type("A", (), {"preset": "pilot-gpu"})())
    assert gpu.model == "qwen2.5-coder-1.5b" and gpu.device == "cuda"
    assert gpu.data.n_train == 500 and gpu.data.n_heldout == s.data.n_heldout  # nested groups merge key by key


@pytest.mark.slow
@pytest.mark.parametrize("preset", [None, "pilot-gpu"])
def test_the_default_and_preset_data_can_be_drawn(preset):
    from analysis.pilotdata import build_pilot_cases, with_split

    s = stage.settings(cfg(), type("A", (), {"preset": preset})())
    cases = build_pilot_cases(s.data, s.probeedit)
    assert len(with_split(cases, "train")) == s.data.n_train and len(with_split(cases, "heldout")) == 33


@pytest.mark.parametrize("dotted, value, message", [
    ("pilot.model", "gpt-9", "unknown model 'gpt-9'"),
    ("pilot.weights", "random", "fine-tuning random weights"),
    ("pilot.seeds", [], "non-empty list"),
    ("pilot.seeds", [0, 0], "repeats a seed"),
    ("pilot.humaneval_seeds", [5], r"\[5\] are not program seeds"),
    ("pilot.lr", 0, "'pilot.lr' must be a number > 0"),
    ("pilot.steps", 0, "pilot.steps"),
    ("pilot.level", "token", "pilot.level"),
    ("pilot.data.kinds", ["nope"], "pilot.data.kinds"),
    ("pilot.data.max_lines", 3, "is below min_lines"),
    ("pilot.threads", 0, "pilot.threads"),
])
def test_bad_params_name_the_field(dotted, value, message):
    with pytest.raises(ParamsError, match=message):
        stage.settings(cfg(**{dotted: value}))


def test_unknown_preset_is_named():
    with pytest.raises(ParamsError, match="unknown pilot preset 'nope'"):
        stage.settings(cfg(), type("A", (), {"preset": "nope"})())


# ---------------------------------------------------------------- cases and budgets

def _cases_frame(n: int, corpus: str = "HEvalFix-Py", instruction: str = "Fix bugs.") -> pl.DataFrame:
    return pl.DataFrame({"case_id": [f"{corpus}/{i}" for i in range(n)], "corpus": [corpus] * n,
                         "framing": ["body"] * n, "source": [f"x = {i}\n" for i in range(n)],
                         "target": [f"x = {i + 1}\n" for i in range(n)], "instruction": [instruction] * n})


def test_humaneval_sample_is_seeded_ordered_and_refuses_what_it_cannot_give():
    frame = _cases_frame(50)
    a, b = stage.humaneval_sample(frame, 10, 0), stage.humaneval_sample(frame, 10, 0)
    assert a == b and len({c.case_id for c in a}) == 10
    numbers = [int(c.case_id.split("/")[1]) for c in a]
    assert numbers == sorted(numbers)
    assert [c.case_id for c in stage.humaneval_sample(frame, 10, 1)] != [c.case_id for c in a]
    with pytest.raises(CorpusError, match="fewer than pilot.humaneval_cases=60"):
        stage.humaneval_sample(frame, 60, 0)
    with pytest.raises(CorpusError, match="has no instruction"):
        stage.humaneval_sample(_cases_frame(5, instruction=" "), 2, 0)


def test_budget_covers_the_longer_of_target_and_program():
    from conftest import toy_model_tokenizer as toy

    tok = toy()
    case = stage.EvalCase("c/0", "heldout", "k", "a\n", "b" * 10, "do it", "<gen>" + "b" * 30 + "</gen>")
    assert stage.case_budget(tok, case, 5) == len(case.program) + 5 + 1
    short = stage.EvalCase("c/1", "heldout", "k", "a\n", "b" * 40, "do it", "")
    assert stage.case_budget(tok, short, 5) == 40 + 5 + 1


def test_jobs_pair_the_seeds_that_have_both_adapters():
    s = stage.settings(cfg(**{"pilot.seeds": [0, 1], "pilot.rewrite_seeds": [1, 3], "pilot.humaneval_seeds": [0]}))
    jobs = stage.evaluation_jobs(s, n_humaneval=4)
    assert jobs[0] == {"phase": "before", "seed": None, "split": "heldout", "modes": ["program"]}
    modes = {(j["seed"], j["split"]): j["modes"] for j in jobs[1:]}
    assert modes == {(0, "heldout"): ["program"], (1, "heldout"): ["program", "rewrite"],
                     (3, "heldout"): ["rewrite"], (0, "HEvalFix-Py"): ["program"]}
    assert all(j["split"] == "heldout" for j in stage.evaluation_jobs(s, n_humaneval=0))


# ---------------------------------------------------------------- tables

def _record(**kw) -> dict:
    base = {"phase": "after", "seed": 0, "split": "heldout", "mode": "program", "case_id": "c/0", "kind": "k",
            "position": 0, "paired": True, "budget": 10, "error": None, "exact_match": True, "valid": True,
            "copy_coverage": 0.5, "seconds": 1.0, "program_tokens": 5}
    return {**base, **kw}


def test_speed_is_a_per_case_ratio_and_failed_cases_are_left_out_of_it():
    records = stage.records_frame([
        _record(case_id="c/0", seconds=1.0), _record(case_id="c/0", mode="rewrite", seconds=4.0),
        _record(case_id="c/1", seconds=2.0, exact_match=False), _record(case_id="c/1", mode="rewrite", seconds=2.0),
        _record(case_id="c/2", seconds=1.0), _record(case_id="c/2", mode="rewrite", error="too long",
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


def test_examples_show_right_and_wrong_programs():
    records = stage.records_frame([_record(case_id=f"c/{i}", exact_match=i % 2 == 0, program=f"p{i}")
                                   for i in range(6)])
    shown = pilotreport.examples(records, seed=0, n=2)
    assert shown["result"].to_list() == ["right", "right", "wrong", "wrong"]
    assert shown["program"].to_list() == ["p0", "p2", "p1", "p3"]


# ---------------------------------------------------------------- a whole run on a tiny model

@pytest.fixture()
def tiny_run(tmp_path, monkeypatch):
    pytest.importorskip("peft")
    from kernels_profile.models import build_model
    from kernels_profile.pilot import add_lora
    from conftest import toy_model_tokenizer as toy

    monkeypatch.chdir(tmp_path)
    loads = []

    def load_models(s):
        lm = build_model("tiny-qwen2", "random", "float32", "cpu")
        loaded = stage.Loaded(lm, toy())
        loaded.peft = add_lora(lm, s.lora(), seed=s.seeds[0])
        lm.model = loaded.peft
        loads.append(1)
        return loaded

    monkeypatch.setattr(stage, "load_models", load_models)
    config = cfg(**{"pilot.data.n_train": 6, "pilot.data.n_heldout": 2, "pilot.data.heldout_files": 2,
                    "pilot.data.max_lines": 10, "pilot.steps": 3, "pilot.checkpoint_every": 2, "pilot.seeds": [0, 1],
                    "pilot.rewrite_seeds": [0], "pilot.humaneval_seeds": [], "pilot.max_tokens": 4000,
                    "pilot.budget_margin": 4, "pilot.lora.targets": ["q_proj", "v_proj"]})
    return config, loads


@pytest.mark.slow
def test_a_run_writes_every_output_and_a_rerun_reuses_adapters_and_evaluations(tiny_run, monkeypatch):
    from analysis.layout import (
        METRICS,
        PILOT_CHECKPOINTS,
        PILOT_LOSSES,
        PILOT_RECORDS,
        TABLES,
    )

    config, loads = tiny_run
    metrics = stage.run(config)
    records = pl.read_parquet(PILOT_RECORDS)
    # before (2 cases) + seed 0 program and rewrite (2 x 2) + seed 1 program (2)
    assert records.height == 8 and set(records["phase"]) == {"before", "after"}
    seed0 = records.filter((pl.col("seed") == 0))
    assert seed0["paired"].all() and sorted(seed0["position"].to_list()) == [0, 0, 1, 1]
    assert pl.read_parquet(PILOT_LOSSES).height == 3 * 3
    assert json.loads((METRICS / "pilot.json").read_text())["before"]["cases"] == 2
    assert (TABLES / "pilot_em.csv").is_file() and (TABLES / "pilot_speed.md").is_file()
    assert metrics["after_program_em_range"] is not None and len(metrics["after_program"]) == 2
    assert len(list(PILOT_CHECKPOINTS.glob("*.pt"))) == 3 and len(list(PILOT_CHECKPOINTS.glob("eval-*.json"))) == 3

    def refuse(*args, **kwargs):
        raise AssertionError("a finished step ran again")

    monkeypatch.setattr(stage, "decode_case", refuse)
    monkeypatch.setattr("torch.optim.AdamW.step", refuse)
    from analysis.layout import TIMINGS

    first = json.loads((TIMINGS / "pilot.json").read_text())
    again = stage.run(config)
    assert pl.read_parquet(PILOT_RECORDS).equals(records)
    assert again["before"] == metrics["before"] and loads == [1, 1]
    resumed = json.loads((TIMINGS / "pilot.json").read_text())
    # the resumed run still states what the work cost from scratch: its checkpoints' recorded seconds
    assert first["from_scratch_s"] > 0 and resumed["from_scratch_s"] >= first["from_scratch_s"] - first["seconds"]
    assert resumed["from_scratch_s"] > resumed["seconds"] - 30


def test_a_case_that_cannot_run_is_recorded_with_its_error_and_no_output():
    from kernels_profile.models import build_model
    from kernels_profile.pilot import program_record, rewrite_record
    from conftest import toy_model_tokenizer as toy

    lm, tok = build_model("tiny-qwen2", "random", "float32", "cpu"), toy()
    case = stage.EvalCase("pilot-heldout/7", "heldout", "k", "a = 1\n", "a = 2\n", "on line 1, change 1 to 2", "")
    small = program_record(lm, tok, case, budget=2, masks={})
    assert "pilot-heldout/7" in small["error"] and "too small" in small["error"] and "output" not in small
    empty = stage.EvalCase("pilot-heldout/8", "heldout", "k", "a = 1\n", "a = 2\n", "  ", "")
    for record in (program_record(lm, tok, empty, budget=40, masks={}), rewrite_record(lm, tok, empty, budget=40)):
        assert "pilot-heldout/8" in record["error"] and "instruction is empty" in record["error"]
        assert record["exact_match"] is False and "output" not in record
    frame = stage.records_frame([{**small, "phase": "after", "seed": 0, "split": "heldout", "kind": "k"}])
    assert frame["output"].to_list() == [None] and frame["error"].to_list() == [small["error"]]
