"""The kernels stages' settings (profile, fit, e2e, decode): each `settings(params)` is the only reader
of its params group and returns a frozen dataclass with no default in code, so every value that
changes a result comes from params.yaml; the CLI builds the settings and calls `run(settings)`."""

import dataclasses
import inspect
from types import SimpleNamespace

import pytest
import yaml
from fixtures import ROOT

from analysis.cli import build_parser, run_stage
from analysis.pipeline.config import Config
from analysis.errors import ParamsError
from analysis.pipeline.params import merge_preset
from kernels_profile.e2e import settings as e2e
from kernels_profile.measure.profiler import ProfileSpec
from kernels_profile.stages import decode, e2e as e2e_stage, fit, profile

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
DATACLASSES = (ProfileSpec, profile.ProfileSettings, fit.FitSettings, fit.RawSource, e2e_stage.E2ESettings,
               e2e.E2EModel, e2e.DraftSettings, e2e.DraftBudgets, e2e.CurveSettings, e2e.CheckSettings, e2e.EnvironmentSettings,
               e2e.MaskSettings, e2e.MethodPlan, decode.DecodeSettings)


@pytest.mark.parametrize("cls", DATACLASSES, ids=lambda c: c.__name__)
def test_no_settings_field_has_a_default_in_code(cls):
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    defaulted = [f.name for f in dataclasses.fields(cls)
                 if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]
    assert not defaulted, f"{cls.__name__} fields with a default in code: {defaulted} (put the value in params.yaml)"


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def test_the_profile_spec_is_params_yaml_field_for_field():
    spec = profile.settings(PARAMS).spec
    assert {f: _plain(v) for f, v in dataclasses.asdict(spec).items()} == PARAMS["kernels"]["profile"]
    gpu = profile.settings(PARAMS, "paper-gpu")
    preset = PARAMS["kernels"]["presets"]["paper-gpu"]
    assert all(_plain(getattr(gpu.spec, k)) == v for k, v in preset.items() if k != "out")
    assert str(gpu.out) == preset["out"] and profile.settings(PARAMS, "paper-gpu", "x.parquet").out.name == "x.parquet"


def test_the_decode_settings_are_params_yaml_and_the_command_line_only_replaces_what_it_names():
    s = decode.settings(PARAMS)
    group = PARAMS["decode"]
    assert {k: getattr(s, k) for k in ("case_id", "framing", "model", "weights", "dtype", "budget", "unit", "template")} \
        == {k: group[k] for k in ("case_id", "framing", "model", "weights", "dtype", "budget", "unit", "template")}
    assert (s.mask_programs, s.mask_lines, s.mask_apply_repeats, list(s.mask_models)) == (
        group["mask_benchmark"]["programs"], group["mask_benchmark"]["lines"], group["mask_benchmark"]["apply_repeats"],
        group["mask_benchmark"]["models"])
    assert s.from_command_line is False
    other = decode.settings(PARAMS, case_id="X/1")
    assert other.from_command_line and other.case_id == "X/1" and other.model == s.model


def test_the_fit_and_e2e_settings_read_params_yaml():
    f = fit.settings(PARAMS)
    assert [str(r.path) for r in f.raw] == [r["path"] for r in PARAMS["kernels"]["fit"]["raw"]]
    assert list(f.forms) == PARAMS["kernels"]["fit"]["forms"] and list(f.holdout_ns) == PARAMS["kernels"]["fit"]["holdout_ns"]
    s = e2e_stage.settings(PARAMS)
    group = PARAMS["e2e"]
    assert (s.seed, s.repeats, s.environment.threads, s.framing) == (group["seed"], group["repeats"], group["threads"], group["framing"])
    assert list(s.budgets.k) == group["pld"]["k"] and list(s.budgets.suffix_k) == group["suffix"]["k"]
    assert s.tokenizer == PARAMS["tokenizer"]["spec"] and len(s.models) == len(group["models"])


def test_one_preset_merge_overlays_nested_groups_and_names_an_unknown_preset():
    params = {"g": {"a": 1, "nested": {"x": 1, "y": 2}, "items": [1, 2]},
              "presets": {"p": {"a": 5, "nested": {"y": 3}, "items": [9]}, "bad": 3}}
    assert merge_preset(params, "g", "presets", "p") == {"a": 5, "nested": {"x": 1, "y": 3}, "items": [9]}
    assert merge_preset(params, "g", "presets", None) == params["g"]
    merged = merge_preset(params, "g", "presets", None)
    merged["nested"]["x"] = 7
    assert params["g"]["nested"]["x"] == 1  # a copy: the params dict is never changed
    with pytest.raises(ParamsError, match="unknown preset 'q' in 'presets'; known: p, bad"):
        merge_preset(params, "g", "presets", "q")
    with pytest.raises(ParamsError, match="must be a mapping"):
        merge_preset(params, "g", "presets", "bad")


def test_the_cli_builds_the_settings_from_params_and_its_options():
    seen = {}

    def recording(real):  # the real settings' options (its signature), recorded instead of built
        def settings(params, **options):
            return "settings", options
        settings.__signature__ = inspect.signature(real.settings)
        return SimpleNamespace(settings=settings, run=lambda s: seen.setdefault("run", s))

    args = build_parser().parse_args(["decode", "--case-id", "HEvalFix-Py/3"])
    run_stage(recording(decode), args, Config(PARAMS, ROOT / "params.yaml"))
    assert seen["run"] == ("settings", {"case_id": "HEvalFix-Py/3", "model": None, "framing": None})
    args = build_parser().parse_args(["kernels", "profile", "--preset", "tiny-cpu"])
    args.out = getattr(args, "raw_out", None)
    seen.clear()
    run_stage(recording(profile), args, Config(PARAMS, ROOT / "params.yaml"))
    assert seen["run"] == ("settings", {"preset": "tiny-cpu", "out": None, "model": None, "device": None,
                                        "dtype": None, "contexts": None, "ns": None, "weights": None})
