"""The settings layer of the analysis stages: `settings(params)` builds a frozen dataclass, and no
dataclass default disagrees with params.yaml (a default that changed a result would be a second,
silent source of that setting)."""

import dataclasses
import importlib
from pathlib import Path

import pytest
from fixtures import params_with

from analysis.cli import stage_settings
from analysis.pipeline.commands import STAGES, TOOLS
from analysis.pipeline.config import Config
from analysis.errors import ParamsError

ANALYSIS_STAGES = ("corpora", "programs", "roundtrip", "spans", "bounds", "optimal", "perturb", "formats",
                   "headline", "reports", "bench throughput")
COMMANDS = sorted(ANALYSIS_STAGES)


def _module(command: str):
    return importlib.import_module({**STAGES, **TOOLS}[command])


def _args(command: str):
    """The command line of a plain run (`copydecode <command>` with no options)."""
    from analysis.cli import build_parser

    return build_parser().parse_args(command.split())


def built(command: str, params: dict):
    return stage_settings(_module(command), _args(command), Config(params, Path("params.yaml")))


def dataclasses_in(value, seen=None):
    """Every dataclass instance reachable from `value` (fields, tuples, lists, dict values)."""
    seen = [] if seen is None else seen
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        seen.append(value)
        for field in dataclasses.fields(value):
            dataclasses_in(getattr(value, field.name), seen)
    elif isinstance(value, (tuple, list)):
        for item in value:
            dataclasses_in(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            dataclasses_in(item, seen)
    return seen


def test_every_analysis_stage_has_the_settings_contract():
    import inspect

    assert set(ANALYSIS_STAGES) <= {**STAGES, **TOOLS}.keys(), "the CLI builds every analysis stage's settings"
    for command in COMMANDS:
        module = _module(command)
        run = inspect.signature(module.run)
        assert list(run.parameters) == ["s"], f"{command}: run takes one settings argument, has {list(run.parameters)}"
        s = built(command, params_with())
        assert dataclasses.is_dataclass(s) and type(s).__dataclass_params__.frozen, f"{command}: settings not frozen"


# Settings dataclasses that still carry a default in code, each with its reason (issue 30, change 8):
# their modules are another change's this round; the rule below holds for every other one.
STILL_DEFAULTED = {
    "HeadlineSettings": "analysis/present/headline.py: gets the shared `kernel:` params group (change 3)",
    "PairsSettings": "analysis/corpora/pairs.py: a --pairs FILE entry has no params group of entry defaults",
    "HFDatasetSettings": "analysis/corpora/hfdataset.py: reachable since the default run reads CanItEdit and EditEval; "
                         "a corpora.datasets entry, like a pairs entry, has no params group of entry defaults (its "
                         "defaults mean absent: no config, revision, pin or mapping; a local file's one split)",
}

# Defaults that name a column of a table, not a value of params: only these fields may keep one.
COLUMN_DEFAULTS = {
    "CostSettings": {"prompt_column", "prefill_tokens"},  # analysis/bounds.py: spans columns (the gold
    # tokenization's sensitivity swaps prefill_tokens); context, step_cost, steady_max_n come from params
    # analysis/rivals/methods.py: a method value in a settings tuple; an unset field is one its family has not
    "Method": {"level", "directives", "policy", "k", "cache", "fmt"},
}

# every command's argv for a plain run (bench busy and compare need their two run folders)
ARGV = {"bench busy": "bench busy QUIET BUSY", "compare": "compare A B"}


def _defaulted(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]


def settings_classes() -> dict[str, set[type]]:
    """command -> every dataclass type reachable from its built settings (nested ones, and the LoRA
    and training settings the pilot builds from its own)."""
    from analysis.cli import build_parser

    found = {}
    for command in {**STAGES, **TOOLS}:
        args = build_parser().parse_args(ARGV.get(command, command).split())
        built_settings = stage_settings(_module(command), args, Config(params_with(), Path("params.yaml")))
        values = [built_settings]
        if command == "pilot":
            values += [built_settings.lora(), built_settings.training(0)]
        found[command] = {type(d) for d in dataclasses_in(values)}
    return found


def test_no_settings_dataclass_has_a_default_in_code():
    """Every settings dataclass of every command, in both packages: params.yaml is the one source of a
    value that changes a result, so no field has a default (the named exceptions wait on their change)."""
    classes = settings_classes()
    assert set(classes) == {**STAGES, **TOOLS}.keys() and {"corpora", "pilot", "kernels profile", "e2e"} <= set(classes)
    seen = set().union(*classes.values())
    names = {c.__name__ for c in seen}
    assert {"CommitSettings", "HumanEvalPackSettings", "ProbeEditParams", "PilotSettings", "LoraSettings",
            "TrainSettings", "ParallelSettings", "ProfileSpec", "MaskBenchSettings"} <= names
    assert "CostSettings" in names  # the bounds' price, in the bounds, optimal and e2e settings
    defaulted = {f"{c.__module__}.{c.__name__}": sorted(set(_defaulted(c)) - COLUMN_DEFAULTS.get(c.__name__, set()))
                 for c in seen if c.__name__ not in STILL_DEFAULTED}
    defaulted = {k: v for k, v in defaulted.items() if v}
    assert not defaulted, f"settings fields with a default in code (put the value in params.yaml): {defaulted}"


def test_the_rule_sees_a_default():
    @dataclasses.dataclass(frozen=True)
    class Toy:
        n: int
        inner: tuple = (None,)

    assert _defaulted(Toy) == ["inner"] and dataclasses_in((Toy(1), [Toy(2)])) == [Toy(1), Toy(2)]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "bench throughput"])
def test_settings_read_only_their_params(command):
    """settings(params) takes the params mapping, not the Config or argparse namespace."""
    module = _module(command)
    with pytest.raises((ParamsError, AttributeError, TypeError)):
        module.settings(Config(params_with(), Path("params.yaml")))
