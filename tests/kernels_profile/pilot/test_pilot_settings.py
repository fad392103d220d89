"""kernels_profile.pilot.settings: the pilot's params group and its presets as one validated PilotSettings (each
bad field named), the task's kinds, and the models it loads. Params come from params.yaml with dotted changes."""

from __future__ import annotations

import pytest
from fixtures import ROOT, params_with

from analysis.pipeline.config import Config
from analysis.errors import ParamsError
from kernels_profile.pilot import settings as pilot_settings


def cfg(**changes) -> Config:
    return Config(params_with(**changes), ROOT / "params.yaml")


# ---------------------------------------------------------------- settings

def test_defaults_validate_and_a_preset_overlays_them():
    s = pilot_settings.settings(cfg().params)
    group = cfg().params["pilot"]
    assert s.model == group["model"] and s.seeds == tuple(group["seeds"]) and s.data.n_heldout == group["data"]["n_heldout"]
    gpu = pilot_settings.settings(cfg().params, "pilot-gpu")
    assert gpu.model == "qwen2.5-coder-1.5b" and gpu.device == "cuda"
    assert gpu.data.n_train == 500 and gpu.data.n_heldout == s.data.n_heldout  # nested groups merge key by key
    long = pilot_settings.settings(cfg().params, "pilot-long")
    assert long.steps > s.steps and long.decode_seeds == long.seeds == (0,) and long.lr == s.lr


@pytest.mark.slow
@pytest.mark.parametrize("preset", [None, "pilot-gpu"])
def test_the_default_and_preset_data_can_be_drawn(preset):
    from analysis.pilot.data import build_pilot_cases, with_split

    s = pilot_settings.settings(cfg().params, preset)
    cases = build_pilot_cases(s.data, s.probeedit)
    assert len(with_split(cases, "train")) == s.data.n_train and len(with_split(cases, "heldout")) == 33


@pytest.mark.parametrize("dotted, value, message", [
    ("pilot.model", "gpt-9", "unknown model 'gpt-9'"),
    ("pilot.weights", "random", "fine-tuning random weights"),
    ("pilot.seeds", [], "'pilot.seeds' must not be empty"),
    ("pilot.seeds", [0, 0], "'pilot.seeds' lists a value twice"),
    ("pilot.lora.dropout", 1.5, "'pilot.lora.dropout' must lie in"),
    ("pilot.humaneval_cases", -1, "'pilot.humaneval_cases' must be >= 0"),
    ("pilot.humaneval_seeds", [5], r"\[5\] are not program seeds"),
    ("pilot.decode_seeds", [7], r"'pilot.decode_seeds' \[7\] are not program seeds"),
    ("pilot.schedule", "step", "pilot.schedule"),
    ("pilot.warmup", 10_000, "'pilot.warmup' .* must be below steps"),
    ("pilot.warmup", -1, "'pilot.warmup' must be >= 0"),
    ("pilot.batch", 0, "pilot.batch"),
    ("pilot.humaneval_framing", "whole", "pilot.humaneval_framing"),
    ("pilot.lr", 0, "'pilot.lr' must be a number > 0"),
    ("pilot.steps", 0, "pilot.steps"),
    ("pilot.level", "token", "pilot.level"),
    ("pilot.data.kinds", ["nope"], "pilot.data.kinds"),
    ("pilot.task", "refactor", "'pilot.task'"),
    ("pilot.data.kinds", ["change_literal"], r"'pilot.data.kinds' must be .* \(the kinds of task bugfix\)"),
    ("pilot.data.max_lines", 3, "is below min_lines"),
    ("pilot.threads", 0, "pilot.threads"),
])
def test_bad_params_name_the_field(dotted, value, message):
    with pytest.raises(ParamsError, match=message):
        pilot_settings.settings(cfg(**{dotted: value}).params)


def test_the_task_picks_its_kinds_and_the_frozen_edit_preset_keeps_its_task():
    from analysis.pilot.bugmutate import MUTATION_KINDS
    from analysis.corpora.probeedit import EDIT_KINDS

    assert pilot_settings.settings(cfg(**{"pilot.task": "bugfix"}).params).data.kinds == MUTATION_KINDS
    edit = pilot_settings.settings(cfg(**{"pilot.task": "edit"}).params)
    assert edit.data.task == "edit" and edit.data.kinds == EDIT_KINDS
    assert pilot_settings.settings(cfg().params, "pilot-long").data.task == "edit"
    with pytest.raises(ParamsError, match="the kinds of task edit"):
        pilot_settings.settings(cfg(**{"pilot.task": "edit", "pilot.data.kinds": ["off_by_one"]}).params)


def test_unknown_preset_is_named():
    with pytest.raises(ParamsError, match="unknown preset 'nope' in 'pilot.presets'"):
        pilot_settings.settings(cfg().params, "nope")


def test_seed_lists_are_tuples_and_an_empty_rewrite_list_is_allowed():
    s = pilot_settings.settings(cfg(**{"pilot.seeds": [2, 1], "pilot.decode_seeds": [1], "pilot.humaneval_seeds": [2],
                                           "pilot.rewrite_seeds": []}).params)
    assert s.seeds == (2, 1) and s.decode_seeds == (1,) and s.humaneval_seeds == (2,) and s.rewrite_seeds == ()


def test_the_device_is_checked_against_the_known_ones():
    with pytest.raises(ParamsError, match="tpu"):
        pilot_settings.settings(cfg(**{"pilot.device": "tpu"}).params)
