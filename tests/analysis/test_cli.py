"""The console script: one `copydecode` with every command, and no other `__main__` in the packages."""

import argparse
import ast

import pytest
from fixtures import ROOT

from analysis.cli import build_parser, main
from analysis.pipeline.commands import MAINTENANCE, STAGES, TOOLS, settings_options


def _has_main_guard(path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__":
            return True
    return False


def test_the_cli_is_the_only_module_with_a_main():
    mains = sorted(str(p.relative_to(ROOT)) for package in ("analysis", "kernels_profile")
                   for p in (ROOT / package).rglob("*.py") if _has_main_guard(p))
    # the engine driver is the one program another interpreter runs (the engine venv's `python -I driver.py JOB
    # OUT`, docs/engine.md); nothing of the project imports it, and vLLM's spawned processes need its guard
    assert mains == ["analysis/cli.py", "kernels_profile/engine/driver.py"]


@pytest.mark.parametrize("line, module", [
    ("readme --check", "analysis.tools.readme"),
    ("moves", "analysis.tools.moves"),
    ("depgraph", "analysis.tools.depgraph"),
    ("pilot-sweep --from-checkpoints", "kernels_profile.tools.pilot_sweep"),
])
def test_the_maintenance_tools_are_copydecode_subcommands(line, module):
    args = build_parser().parse_args(line.split())
    assert args.module == module and args.maintenance and MAINTENANCE[args.stage] == module


def test_readme_check_on_a_folder_without_a_readme_is_a_named_error(tmp_path, capsys):
    assert main(["readme", "--check", str(tmp_path)]) == 2
    assert "copydecode readme: error: cannot read" in capsys.readouterr().err


def test_a_maintenance_command_refuses_a_one_off_output_root(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "moves"]) == 2
    assert "not supported" in capsys.readouterr().err


def test_pilot_sweep_needs_a_job_and_names_a_bad_setting(capsys):
    from kernels_profile.tools.pilot_sweep import parse_config

    assert main(["pilot-sweep"]) == 2 and "name at least one CONFIG" in capsys.readouterr().err
    from analysis.errors import ParamsError

    with pytest.raises(ParamsError, match="unknown setting 'depth'"):
        parse_config("a:depth=3")
    assert parse_config("a:steps=8,lr=0.5") == ("a", {"steps": 8, "lr": 0.5})


def test_every_stage_and_benchmark_is_on_the_settings_layer():
    import importlib
    import inspect

    for command, module in {**STAGES, **TOOLS}.items():
        run = inspect.signature(importlib.import_module(module).run)
        assert len(run.parameters) == 1, f"{command}: run takes its settings alone, has {list(run.parameters)}"
        parser = build_parser()
        for word in command.split():  # the command's own parser (a variant's flag is on its command's)
            if not word.startswith("--"):
                parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        dests = {a.dest for a in parser._actions} | {"out"}  # a stage's own --out is read as raw_out (OWN_OUT)
        options = set(settings_options(importlib.import_module(module))) - {"params_path"}
        assert options <= dests, f"{command}: settings options {sorted(options - dests)} without a command-line option"


def test_the_cli_builds_the_pilot_settings_with_its_preset():
    from pathlib import Path

    from fixtures import params_with

    from analysis.cli import stage_settings
    from analysis.pipeline.config import Config
    from kernels_profile.stages import pilot

    cfg = Config(params_with(), Path("params.yaml"))
    plain = stage_settings(pilot, build_parser().parse_args(["pilot"]), cfg)
    long = stage_settings(pilot, build_parser().parse_args(["pilot", "--preset", "pilot-long"]), cfg)
    assert plain.preset is None and long.preset == "pilot-long"
    assert long.steps == cfg.params["pilot"]["presets"]["pilot-long"]["steps"] != plain.steps
    assert long.lora_dropout == plain.lora_dropout == cfg.params["pilot"]["lora"]["dropout"]  # merged key by key
