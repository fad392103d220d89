"""The settings layer of the analysis stages: `settings(params)` builds a frozen dataclass, and no
dataclass default disagrees with params.yaml (a default that changed a result would be a second,
silent source of that setting)."""

import dataclasses
import importlib
from pathlib import Path

import pytest
from conftest import params_with

from analysis.cli import SETTINGS_OPTIONS, STAGES, TOOLS, stage_settings
from analysis.config import Config
from analysis.errors import ParamsError

ANALYSIS_STAGES = ("corpora", "programs", "roundtrip", "spans", "bounds", "optimal", "perturb", "formats",
                   "headline", "reports", "bench throughput")
COMMANDS = sorted(ANALYSIS_STAGES)


def _module(command: str):
    return importlib.import_module({**STAGES, **TOOLS}[command][0])


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

    assert set(ANALYSIS_STAGES) <= set(SETTINGS_OPTIONS), "the CLI builds every analysis stage's settings"
    for command in COMMANDS:
        module = _module(command)
        run = inspect.signature(module.run)
        assert list(run.parameters) == ["s"], f"{command}: run takes one settings argument, has {list(run.parameters)}"
        s = built(command, params_with())
        assert dataclasses.is_dataclass(s) and type(s).__dataclass_params__.frozen, f"{command}: settings not frozen"


def _default(field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def entry_defaults() -> dict[type, str | None]:
    """Settings of one entry of a params list (`corpora.commits[i]`, `corpora.pairs[i]`): entries differ
    from one another by design, so their defaults are held against the params group of entry defaults
    (None: params has no such group)."""
    from analysis.corpora.commits import CommitSettings
    from analysis.corpora.pairs import PairsSettings

    return {CommitSettings: "corpora.commit_defaults", PairsSettings: None}


def differing_defaults(settings, params: dict) -> list[str]:
    entries = entry_defaults()
    differing = []
    for instance in dataclasses_in(settings):
        kind = type(instance)
        if kind in entries:
            group = params
            for part in (entries[kind] or "").split("."):
                group = group.get(part, {}) if part else {}
            compare = {f.name: group[f.name] for f in dataclasses.fields(kind) if f.name in group}
        else:
            compare = {f.name: getattr(instance, f.name) for f in dataclasses.fields(kind)}
        for field in dataclasses.fields(kind):
            default = _default(field)
            if default is dataclasses.MISSING or field.name not in compare:
                continue
            value = compare[field.name]
            if isinstance(default, tuple) and isinstance(value, list):
                value = tuple(value)
            if value != default:
                differing.append(f"{kind.__name__}.{field.name}: default {default!r}, params.yaml {value!r}")
    return differing


@pytest.mark.parametrize("command", COMMANDS)
def test_no_settings_default_differs_from_params_yaml(command):
    params = params_with()
    differing = differing_defaults(built(command, params), params)
    assert not differing, f"{command}: settings defaults that disagree with params.yaml: {differing}"


@dataclasses.dataclass(frozen=True)
class Toy:
    n: int = 3
    inner: tuple = (None,)


def test_the_defaults_check_sees_a_disagreeing_default():
    """The check above could fail: a default that is not the built value is reported, nested too, and
    an entry default is held against its params group of defaults."""
    from analysis.corpora.commits import CommitSettings

    assert differing_defaults(Toy(3), {}) == []
    assert differing_defaults(Toy(4), {}) == ["Toy.n: default 3, params.yaml 4"]
    assert differing_defaults((Toy(3), Toy(5)), {}) == ["Toy.n: default 3, params.yaml 5"]  # reached inside a tuple
    entry = CommitSettings(repo="x", name="mine", min_lines=5)  # an entry's own values are its business
    assert differing_defaults(entry, {"corpora": {"commit_defaults": {"min_lines": 20}}}) == []
    assert differing_defaults(entry, {"corpora": {"commit_defaults": {"min_lines": 7}}}) == [
        "CommitSettings.min_lines: default 20, params.yaml 7"]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "bench throughput"])
def test_settings_read_only_their_params(command):
    """settings(params) takes the params mapping, not the Config or argparse namespace."""
    module = _module(command)
    with pytest.raises((ParamsError, AttributeError, TypeError)):
        module.settings(Config(params_with(), Path("params.yaml")))
