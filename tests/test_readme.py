"""The README's commands are the ones CI runs, and the commands they name exist."""

import re
import subprocess
import sys

from conftest import ROOT

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def blocks():
    return re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def test_setup_is_two_commands_then_repro_and_tests():
    setup, main = blocks()[0].strip().splitlines(), blocks()[1].strip().splitlines()
    assert len(setup) == 2
    assert main == ["dvc repro", "python -m pytest"]


def test_ci_installs_what_the_readme_says_and_runs_its_test_command():
    install = blocks()[0].strip().splitlines()[1]
    for part in install.split(" && "):
        assert part.replace("pip install", "pip install -q") in CI
    assert "python -m pytest" in CI.splitlines()[-1]


def test_console_script_lists_every_dvc_stage_command():
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    help_text = subprocess.run([sys.executable, "-m", "analysis.cli", "--help"], capture_output=True, text=True,
                               cwd=ROOT).stdout
    for stage in stages.values():
        command = stage["cmd"].split()[1]
        assert command in help_text, command


def test_papermill_examples_name_real_templates_and_parameters():
    import nbformat

    for template, names in re.findall(r"papermill (notebooks/\S+) \S+ ((?:-p \S+ \S+ ?)+)", README):
        book = nbformat.read(ROOT / template, as_version=4)
        params = next(c.source for c in book.cells if "parameters" in c.metadata.get("tags", []))
        for name in re.findall(r"-p (\S+) ", names):
            assert re.search(rf"^{name} = ", params, flags=re.M), (template, name)
