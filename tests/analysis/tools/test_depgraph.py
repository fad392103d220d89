"""Which project files a stage's code can reach (analysis.tools.depgraph), on a small project tree; the real
project's dvc.yaml is checked against it in tests/pipeline/test_dvc_deps.py."""

import json

import yaml

from analysis.tools.depgraph import closure, module_file, stage_code_deps, sync_dvc_yaml


def _tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


PROJECT = {
    "analysis/__init__.py": "",
    "analysis/stages/__init__.py": "",
    "analysis/stages/programs.py": "import json\nfrom . import helper\n\ndef run():\n    from analysis import late\n",
    "analysis/stages/helper.py": "from ..base import VALUE\nimport numpy\n",
    "analysis/base.py": "VALUE = 1\nimport analysis.gone\n",  # a module that does not exist is no file
    "analysis/late.py": "LATE = 1\n",
    "analysis/unused.py": "UNUSED = 1\n",
    "analysis/shown.py": "SHOWN = 1\n",
}
EMPTY = {"analysis/__init__.py", "analysis/stages/__init__.py"}  # bare package files: no code


def test_closure_follows_relative_function_level_and_from_package_imports(tmp_path):
    _tree(tmp_path, PROJECT)
    assert closure("analysis.stages.programs", tmp_path) == [
        "analysis/__init__.py", "analysis/base.py", "analysis/late.py", "analysis/stages/__init__.py",
        "analysis/stages/helper.py", "analysis/stages/programs.py"]
    assert module_file("analysis.stages", tmp_path) == tmp_path / "analysis/stages/__init__.py"
    assert module_file("analysis.gone", tmp_path) is None


def test_only_the_reports_stage_adds_what_its_notebooks_import(tmp_path):
    _tree(tmp_path, PROJECT)
    cell = {"cell_type": "code", "source": ["import polars\n", "from analysis import shown\n"]}
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks/t.ipynb").write_text(json.dumps({"cells": [cell, {"cell_type": "markdown", "source": []}]}))
    assert "analysis/shown.py" in stage_code_deps("reports", "analysis.late", tmp_path)
    assert stage_code_deps("programs", "analysis.late", tmp_path) == ["analysis/late.py"]


def test_sync_rewrites_code_deps_keeps_data_deps_and_the_header_and_says_what_changed(tmp_path):
    _tree(tmp_path, PROJECT)
    stage = {"cmd": "copydecode programs", "deps": ["data/corpora/cases.parquet", "analysis/unused.py"],
             "outs": ["data/programs"]}
    spec = yaml.safe_dump({"stages": {"programs": stage}})
    (tmp_path / "dvc.yaml").write_text("# generated deps: see depgraph\n" + spec)
    assert sync_dvc_yaml(tmp_path) == ["programs"]
    text = (tmp_path / "dvc.yaml").read_text()
    deps = yaml.safe_load(text)["stages"]["programs"]["deps"]
    assert text.startswith("# generated deps: see depgraph\n")
    assert deps == ["data/corpora/cases.parquet", *(f for f in closure("analysis.stages.programs", tmp_path)
                                                     if f not in EMPTY)]
    assert sync_dvc_yaml(tmp_path) == []  # nothing left to change


def test_sync_writes_dvc_yaml_atomically_a_failed_write_leaves_the_previous_file(tmp_path, monkeypatch):
    """L6: dvc.yaml (tracked) was rewritten with a plain write_text: a failure half way (a full disk, a kill)
    left it truncated. Now the new text goes to a temporary file renamed over it: a write that fails half way
    leaves the previous dvc.yaml byte for byte and no temporary file; a finished one replaces it whole."""
    import errno
    import pathlib

    _tree(tmp_path, PROJECT)
    stage = {"cmd": "copydecode programs", "deps": ["data/corpora/cases.parquet", "analysis/unused.py"],
             "outs": ["data/programs"]}
    (tmp_path / "dvc.yaml").write_text("# header\n" + yaml.safe_dump({"stages": {"programs": stage}}))
    previous = (tmp_path / "dvc.yaml").read_bytes()
    real_write_text = pathlib.Path.write_text

    def half_then_disk_full(self, text, *args, **kwargs):
        real_write_text(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", half_then_disk_full)
    try:
        sync_dvc_yaml(tmp_path)
    except OSError:
        pass
    else:
        raise AssertionError("the failed write was not raised")
    monkeypatch.setattr(pathlib.Path, "write_text", real_write_text)
    assert (tmp_path / "dvc.yaml").read_bytes() == previous
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["dvc.yaml"]  # no temporary file left
    assert sync_dvc_yaml(tmp_path) == ["programs"]
    assert yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]["programs"]["deps"][1:] == stage_code_deps(
        "programs", "analysis.stages.programs", tmp_path)


def test_an_empty_file_is_no_code_dep_until_it_holds_code(tmp_path):
    """Section 4 of issue 41: `dvc repro` warned "'analysis/xxx/__init__.py' is empty." for every bare package
    file declared as a dep. The import graph still walks through them; the stage's deps leave them out."""
    _tree(tmp_path, PROJECT)
    reached = closure("analysis.stages.programs", tmp_path)
    assert EMPTY <= set(reached)
    deps = stage_code_deps("programs", "analysis.stages.programs", tmp_path)
    assert not EMPTY & set(deps) and set(deps) == set(reached) - EMPTY
    (tmp_path / "analysis/stages/__init__.py").write_text("STAGES = ()\n")  # code: a dep again
    assert "analysis/stages/__init__.py" in stage_code_deps("programs", "analysis.stages.programs", tmp_path)


def test_a_new_kernel_source_in_params_becomes_the_fit_stages_data_deps(tmp_path):
    """Architecture review item 3: a new GPU source is params plus its data files. `copydecode depgraph` writes the
    raw timing files (with their environment sidecars) and the device-time probes params name into the kernel fit's
    deps, in params order, replacing the timing files listed before and keeping the stage's other data."""
    _tree(tmp_path, PROJECT)
    stage = {"cmd": "copydecode kernels fit", "deps": ["data/kernels/old.parquet", "analysis/data/devices.json"],
             "outs": ["reports/kernels/latency_model.json"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"kernels_fit": stage}}))
    params = {"kernels": {"fit": {"raw": [{"source": "fit", "path": "data/kernels/raw.parquet"},
                                          {"source": "h100", "path": "reports/kernels/frozen/h100/gpu.parquet"}]}},
              "kernel": {"device_time": [{"source": "h100-devtime", "path": "reports/kernels/frozen/h100/devtime.jsonl",
                                          "dtype": "bfloat16", "device": "cuda", "weights": "random"}]}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert "kernels_fit" in sync_dvc_yaml(tmp_path)
    deps = yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]["kernels_fit"]["deps"]
    data = [d for d in deps if not d.endswith(".py")]
    assert data == ["data/kernels/raw.parquet", "data/kernels/raw.environment.json",
                    "reports/kernels/frozen/h100/gpu.parquet", "reports/kernels/frozen/h100/gpu.environment.json",
                    "reports/kernels/frozen/h100/devtime.jsonl", "analysis/data/devices.json"]
