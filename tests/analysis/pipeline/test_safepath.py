"""analysis.pipeline.safepath: inside `safe_imports`, neither the process nor a child it starts imports from the
working folder (the CLI enters it first thing; tests/pipeline/test_probes.py runs the stages' workers on
planted packages)."""

import os
import subprocess
import sys
from pathlib import Path

from analysis.pipeline.safepath import safe_imports, safe_pythonpath


def test_only_absolute_pythonpath_entries_are_kept_after_the_lead():
    value = os.pathsep.join(["", ".", "rel/dir", "/abs/a", "/abs/a", "/abs/b"])
    assert safe_pythonpath(value, ["/lead"]).split(os.pathsep) == ["/lead", "/abs/a", "/abs/b"]
    assert safe_pythonpath(None) == ""


def test_the_environment_and_sys_path_are_set_inside_and_restored_after(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", "/abs"]))
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    monkeypatch.setattr(sys, "path", ["", "relative", *sys.path])
    before = list(sys.path)
    with safe_imports():
        assert os.environ["PYTHONSAFEPATH"] == "1" and os.environ["PYTHONPATH"] == "/abs"
        assert "" not in sys.path and "relative" not in sys.path
    assert sys.path == before and "PYTHONSAFEPATH" not in os.environ
    assert os.environ["PYTHONPATH"] == os.pathsep.join([".", "/abs"])


def test_a_child_started_in_a_folder_with_a_planted_module_does_not_import_it(tmp_path, monkeypatch):
    (tmp_path / "planted_here.py").write_text("import pathlib; pathlib.Path('PWNED').write_text('x')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", ".")
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('planted_here') is not None)"
    with safe_imports():
        for argv in ([sys.executable, "-c", probe], [sys.executable, "-m", "this"]):
            subprocess.run(argv, check=True, capture_output=True)
    assert not Path("PWNED").exists()
    # the same child outside the block does find it (the check above can fail)
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 1
