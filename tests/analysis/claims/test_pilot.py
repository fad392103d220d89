"""Claim 7 (analysis.claims.pilot) on small pilot.json files written here: judged by its rule, never
"beyond the paper"; the default run and the frozen preset runs each labelled."""

from __future__ import annotations

import json

import pytest

from analysis.claims import engine
from analysis.claims import pilot as claims
from analysis.claims import verdict as v
from analysis.errors import MissingOutputError
from analysis.layout import METRICS, TABLES
from analysis.results.numbers import fmt_pct

PAPER = v.paper_claims()


# ---------------------------------------------------------------- claim 7: judged by its rule


def _pilot(tmp_path, **extra) -> dict:
    m = {"model": "smollm2-135m", "steps": 32, "method": "LoRA", "before": {"cases": 33, "em": 0.0},
         "after_program": {"0": {"em": 0.0}, "1": {"em": 1 / 33}}, "humaneval": {"0": {"em": 0.0}}, **extra}
    (tmp_path / METRICS).mkdir(parents=True, exist_ok=True)
    (tmp_path / METRICS / "pilot.json").write_text(json.dumps(m))
    return m


def test_claim_7_without_a_lift_is_not_reproduced_at_this_scale_and_names_the_scale(tmp_path):
    _pilot(tmp_path)
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == v.NOT_AT_SCALE
    assert "smollm2-135m" in claim.reason and "32 steps" in claim.reason
    assert "HEvalFix-Py EM before fine-tuning not recorded" in claim.reason  # an older pilot.json, said so
    assert fmt_pct(1 / 33) in claim.ours


@pytest.mark.parametrize("after, verdict", [(0.05, v.NOT_AT_SCALE), (0.15, v.REPRODUCED)])
def test_claim_7_is_reproduced_only_when_the_lift_meets_the_papers(tmp_path, after, verdict):
    seeds = {"0": {"em": after}, "1": {"em": after}}
    _pilot(tmp_path, humaneval=seeds, humaneval_before={"cases": 33, "em": 0.0})  # the pilot stage's keys
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == verdict and claim.verdict != v.BEYOND
    assert fmt_pct(after) in claim.ours


@pytest.mark.parametrize("after, verdict", [(0.03, v.NOT_AT_SCALE), (0.2, v.REPRODUCED)])
def test_claim_7_judges_the_longest_run_with_hevalfix_and_labels_each_run(tmp_path, after, verdict):
    long = {"model": "smollm2-135m", "steps": 384, "method": "LoRA long", "before": {"cases": 33, "em": 0.0},
            "after_program": {"0": {"em": 5 / 33}}, "humaneval_before": {"cases": 33, "em": 0.0},
            "humaneval": {"0": {"em": after}}}
    run = {"commit": "abc1234", "command": "copydecode pilot --preset pilot-long"}
    _pilot(tmp_path, humaneval={}, after_program={"0": {"em": 0.0}}, humaneval_before={"cases": 0},
           frozen={"pilot-long": {"run": run, "metrics": long}})
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == verdict
    assert claim.ours.startswith("default (32 steps): held-out edits EM")
    assert "pilot-long, frozen run of abc1234 (384 steps): HEvalFix-Py EM" in claim.ours
    assert fmt_pct(5 / 33) in claim.ours and fmt_pct(after) in claim.ours
    assert "384 steps (pilot-long, frozen run of abc1234)" in claim.reason
    assert "LoRA long" in claim.method and "default: LoRA" in claim.method


def test_claim_7_gives_every_em_an_interval_and_the_difference_a_paired_test(tmp_path):
    _pilot(tmp_path, heldout_cases=33, heldout_em_before=0, heldout_em_after={"0": 2}, humaneval_cases=33,
           humaneval_em_before=0, humaneval_em_after={"0": 0}, humaneval_before={"cases": 33, "em": 0.0},
           humaneval={"0": {"em": 0.0}})
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert "held-out edits EM 0 / 33 -> 2 / 33 (after 6.1%, 95% CI [0.7%, 20.2%]; McNemar exact p = 0.5, " \
           "not significant)" in claim.ours
    assert "HEvalFix-Py EM 0 / 33 -> 0 / 33 (after 0.0%, 95% CI [0.0%, 10.6%]" in claim.ours
    assert "McNemar exact p = 0.5, not significant" in claim.reason


def test_claim_7_without_the_pilot_is_a_missing_output_and_not_run(tmp_path):
    with pytest.raises(MissingOutputError, match="pilot.json"):
        claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    items = {c.claim: c for c in engine.claims(tmp_path / TABLES, tmp_path / METRICS)}
    assert items[f"7. {PAPER['finetune']['title']}"].verdict == v.NOT_RUN



def test_claim_7_label_reads_model_steps_task_and_data_size_from_the_run(tmp_path):
    _pilot(tmp_path, task="bugfix", train_sequences={"program": {"kept": 158, "too_long": 2}},
           data={"n_train": 160})
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert "smollm2-135m, 32 steps (default), task bugfix on 158 training sequences" in claim.reason
    _pilot(tmp_path, data={"n_train": 160})  # a run written before pilot.task trained on edits
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert "32 steps (default), task edit on 160 training cases" in claim.reason


def test_claim_7_judges_a_bugfix_run_before_a_longer_edit_run(tmp_path):
    long = {"model": "smollm2-135m", "steps": 384, "method": "LoRA long", "before": {"cases": 33, "em": 0.0},
            "after_program": {"0": {"em": 0.0}}, "humaneval_before": {"cases": 33, "em": 0.0},
            "humaneval": {"0": {"em": 0.0}}}
    _pilot(tmp_path, task="bugfix", humaneval={"0": {"em": 0.2}}, humaneval_before={"cases": 33, "em": 0.0},
           frozen={"pilot-long": {"run": {"commit": "abc1234"}, "metrics": long}})
    claim = claims.finetune_claim(PAPER["finetune"], tmp_path / TABLES, tmp_path / METRICS)
    assert claim.verdict == v.REPRODUCED and "32 steps (default), task bugfix" in claim.reason
    assert claim.ours.startswith("default (32 steps): HEvalFix-Py EM") and "held-out bug fixes EM" in claim.ours
    assert "(384 steps): HEvalFix-Py EM 0.0% -> 0.0%; held-out edits EM" in claim.ours


