"""The command line's own conveniences: --version, --set KEY=VALUE for one run (params.yaml untouched,
validated, named errors), and a --help for every command that says what it reads and writes."""

from __future__ import annotations

import json
import argparse
import subprocess
import sys
import tomllib

import pytest
from fixtures import ROOT

from analysis.cli import build_parser, main
from analysis.pipeline.params import apply_overrides
from analysis.errors import ParamsError


def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "analysis.cli", "--version"], capture_output=True, text=True, cwd=ROOT)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert done.returncode == 0 and done.stdout.strip() == f"copydecode {version}"


def _commands(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                has_sub = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                if has_sub:
                    yield from _commands(sub, (*path, name))
                else:
                    yield (*path, name), sub


def test_every_command_help_says_what_it_reads_and_writes():
    commands = dict(_commands(build_parser()))
    assert len(commands) >= 18 and ("kernels", "profile") in commands and ("bench", "mask") in commands
    for path, parser in commands.items():
        text = " ".join(parser.format_help().split())
        assert " reads " in text and "writes " in text, " ".join(path)


def test_set_overrides_nested_keys_with_yaml_values_without_touching_the_input():
    params = {"bounds": {"latency_form": "interp", "context": 256}, "perturb": {"rates": [0.0, 0.5]}}
    out = apply_overrides(params, ["bounds.latency_form=quadratic", "perturb.rates=[0.0, 1.0]", "bounds.context=2048"])
    assert out == {"bounds": {"latency_form": "quadratic", "context": 2048}, "perturb": {"rates": [0.0, 1.0]}}
    assert params["bounds"]["latency_form"] == "interp"


@pytest.mark.parametrize("item, message", [
    ("bounds.latency_fom=quadratic", "no such setting in the params file; did you mean 'bounds.latency_form'"),
    ("bounds", "--set expects KEY=VALUE"),
    ("=3", "--set expects KEY=VALUE"),
    ("bounds.context.deeper=1", "no such setting"),
    ("bounds.context=[1, 2", "is not valid YAML"),
])
def test_set_errors_are_named(item, message):
    with pytest.raises(ParamsError, match=message.replace("(", "\\(").replace("[", "\\[")):
        apply_overrides({"bounds": {"latency_form": "interp", "context": 256}}, [item])


def test_a_set_value_is_validated_by_the_stage_and_params_yaml_is_not_written(tmp_path, capsys):
    params = ROOT / "params.yaml"
    before = params.read_bytes()
    for where in (["--set", "kernel.latency_form=cubic", "bounds"], ["bounds", "--set", "kernel.latency_form=cubic"]):
        assert main(["--params", str(params), *where]) == 2
        err = capsys.readouterr().err
        assert "'kernel.latency_form' must be one of" in err and "cubic" in err
    assert params.read_bytes() == before


def test_a_stage_ends_with_one_line_and_its_summary_in_a_file(tmp_path, monkeypatch):
    """Section 4 of issue 41: stage summaries were JSON dumps on stdout (most of a `dvc repro` log)."""
    from analysis.pipeline.console import summary_lines

    monkeypatch.chdir(tmp_path)
    result = {"cases": 1082, "seconds": 3.8354, "corpora": {"HEvalFix-Py": 164}, "note": "x" * 80,
              "add_to_kernels_fit_raw": {"source": "m-cpu", "path": "data/kernels/m-cpu.parquet"}}
    lines = summary_lines("kernels profile", result)
    assert lines[0] == "copydecode kernels profile: done; cases 1,082, seconds 3.835 (summary: data/summaries/kernels_profile.json)"
    assert lines[1] == 'add to params kernels.fit.raw: {"source": "m-cpu", "path": "data/kernels/m-cpu.parquet"}'
    assert len(lines) == 2
    assert json.loads((tmp_path / "data/summaries/kernels_profile.json").read_text()) == result


def test_the_summary_path_printed_is_one_the_user_can_open(tmp_path, monkeypatch):
    """UX review P2: under --out the summary line said "data/summaries/corpora.json", relative to the run root the
    process had moved into; it names the file as the user reaches it. A one-off run (RUN_NAME_KEY) files its summary
    under its own name, never over the stage's."""
    from analysis.pipeline.console import RUN_NAME_KEY, summary_lines

    monkeypatch.chdir(tmp_path)
    assert summary_lines("corpora", {"cases": 3}, "runs/express")[0].endswith(
        "(summary: runs/express/data/summaries/corpora.json)")
    line = summary_lines("kernels profile", {"rows": 2, RUN_NAME_KEY: "kernels_profile-my"})[0]
    assert line.endswith("(summary: data/summaries/kernels_profile-my.json)")
    assert not (tmp_path / "data/summaries/kernels_profile.json").exists()


def test_every_stage_help_lists_every_file_the_stage_writes():
    """P6: each dvc.yaml out of a stage matches a path its `--help` names after "writes" (globs and {a,b}
    expanded), so the help never names a file the stage does not write or leaves one out."""
    import fnmatch
    import re

    import yaml

    from analysis.cli import build_parser

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    parser = build_parser()
    for name, stage in stages.items():
        words = stage["cmd"].split()[1:]
        sub = parser
        for word in words:
            if word.startswith("-"):  # `kernels profile --batched`: an option of the command, not a subcommand
                break
            sub = next(a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction").choices[word]
        text = " ".join((sub.description or "").split())
        assert " writes " in text, name
        patterns = []
        for token in re.findall(r"[\w./*{},-]*/[\w./*{},-]*", text.split(" writes ", 1)[1]):
            token = token.rstrip(",.")
            alt = re.search(r"\{([^}]*)\}", token)
            patterns += ([token[:alt.start()] + x + token[alt.end():] for x in alt.group(1).split(",")] if alt
                         else [token])
        for out in stage.get("outs", []):
            path = out if isinstance(out, str) else next(iter(out))
            assert any(fnmatch.fnmatch(path, p) or path.startswith(p.rstrip("/") + "/") or fnmatch.fnmatch(path + "/", p)
                       for p in patterns), f"{name}: --help does not name {path} (names {patterns})"


# P5 (issue 41): --params and --set on every command; a command that reads no params says so by name
NO_PARAMS = {"readme": ["readme", "--check"], "moves": ["moves"], "depgraph": ["depgraph"],
             "grammar": ["grammar", "--source", "edit_me.py"], "bench busy": ["bench", "busy", "q", "b"]}


@pytest.mark.parametrize("command", sorted(NO_PARAMS))
@pytest.mark.parametrize("where", ["before", "after"])
def test_a_command_that_reads_no_params_refuses_set_and_params_by_name(command, where, tmp_path, monkeypatch, capsys):
    import importlib

    from analysis.pipeline.commands import MAINTENANCE, TOOLS

    module = importlib.import_module({**MAINTENANCE, **TOOLS}[command])
    assert module.READS_PARAMS is False
    monkeypatch.chdir(tmp_path)  # nothing it could write (depgraph: dvc.yaml) is here to be written
    argv = NO_PARAMS[command]
    for given, named in ((["--set", "spans.seed=1"], "--set would be ignored"),
                         (["--params", "mine.yaml"], "--params would be ignored")):
        assert main([*given, *argv] if where == "before" else [*argv, *given]) == 2
        err = capsys.readouterr().err
        assert f"copydecode {command}: error: `{command}` reads no params" in err and named in err, err
    assert list(tmp_path.iterdir()) == []


def test_every_command_takes_params_and_set():
    """Every command's parser takes --params and --set after its name (none fails on argparse's 'unrecognized
    arguments' with the top-level usage)."""
    for path, parser in _commands(build_parser()):
        options = {s for a in parser._actions for s in a.option_strings}
        assert {"--params", "--set"} <= options, " ".join(path)


def test_pilot_sweep_applies_set_to_the_params_it_reads(monkeypatch, capsys):
    from analysis.errors import ParamsError
    from kernels_profile.tools import pilot_sweep as sweep

    seen = {}

    def settings(params):
        seen.update(params["pilot"])
        raise ParamsError("stopped after the settings")

    monkeypatch.setattr(sweep, "settings", settings)
    assert main(["pilot-sweep", "--set", "pilot.steps=7", "--diagnose", "records.parquet"]) == 2
    err = capsys.readouterr().err
    assert seen["steps"] == 7 and "this run overrides pilot.steps=7" in err and "stopped after the settings" in err
    assert main(["--set", "pilot.stepz=7", "pilot-sweep", "a:steps=1"]) == 2
    assert "did you mean 'pilot.steps'" in capsys.readouterr().err
    # --freeze and --from-checkpoints copy a finished run: they read no params, so a --set is refused
    assert main(["pilot-sweep", "--from-checkpoints", "--set", "pilot.steps=7"]) == 2
    assert "pilot-sweep --from-checkpoints reads no params" in capsys.readouterr().err


def test_report_applies_set_to_the_params_it_reads(monkeypatch, capsys):
    from analysis.errors import ParamsError
    from analysis.tools import report

    seen = {}

    def settings(params, *args):
        seen.update(params["reports"])
        raise ParamsError("stopped after the settings")

    monkeypatch.setattr(report, "settings", settings)
    assert main(["report", "summary", "--set", "reports.parameters.summary={}"]) == 2
    assert seen["parameters"]["summary"] == {} and "stopped after the settings" in capsys.readouterr().err


def test_an_unknown_option_is_named_by_its_command_with_a_suggestion(capsys):
    """UX review P8: `copydecode bounds --outt x` printed the top-level usage and no hint."""
    from analysis.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["bounds", "--outt", "x"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: copydecode bounds ")
    assert "copydecode bounds: error: unrecognized arguments: --outt x; did you mean '--out'?" in err
    with pytest.raises(SystemExit):
        main(["kernels", "profile", "--modle=x"])
    assert "did you mean '--model'?" in capsys.readouterr().err
