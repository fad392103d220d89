"""`--out DIR` one-off runs (analysis.pipeline.oneoff): input paths follow the run root, the root is checked,
and a root a failed run left empty is removed."""

import os
from pathlib import Path

import pytest

from analysis.errors import ParamsError
from analysis.layout import LATENCY_MODEL
from analysis.pipeline.oneoff import absolute_params, check_out_root, discard_unused_root, from_root


def test_out_rebases_repos_folders_in_the_params(tmp_path):
    (tmp_path / "qa/git").mkdir(parents=True)
    params = {"corpora": {"commits": [{"repos": "qa/git", "name": "team"}, {"repo": "qa/git/x.bundle"}]}}
    moved = absolute_params(params, tmp_path)
    assert moved["corpora"]["commits"][0]["repos"] == str(tmp_path / "qa/git")
    assert params["corpora"]["commits"][0]["repos"] == "qa/git"  # the caller's copy is untouched


def test_from_root_is_relative_to_the_root_or_absolute_without_one(tmp_path):
    (tmp_path / "runs/x").mkdir(parents=True)
    assert from_root(tmp_path / "a.jsonl", tmp_path / "runs/x") == os.path.join("..", "..", "a.jsonl")
    assert from_root(tmp_path / "a.jsonl", None) == str(tmp_path / "a.jsonl")


def test_relative_inputs_follow_the_root_while_names_and_absolute_paths_stay(tmp_path):
    (tmp_path / "hep").mkdir()
    (tmp_path / "runs/x").mkdir(parents=True)
    params = {"corpora": {"humanevalpack": {"local_dir": "hep"}, "pairs": [{"path": "/abs/p.jsonl"}]},
              "tokenizer": {"spec": "qwen2.5"}}
    moved = absolute_params(params, tmp_path, tmp_path / "runs/x")
    assert moved["corpora"]["humanevalpack"]["local_dir"] == os.path.join("..", "..", "hep")
    assert moved["corpora"]["pairs"][0]["path"] == "/abs/p.jsonl" and moved["tokenizer"]["spec"] == "qwen2.5"


@pytest.mark.parametrize("out, message", [
    ("file.txt", "exists and is not a folder"),
    ("..", "a folder above the current one"),
    ("reports/x", "lies in the project's own reports/ folder"),
])
def test_a_bad_output_root_is_a_named_error(tmp_path, out, message):
    project = tmp_path / "project"
    project.mkdir()
    (project / "dvc.yaml").write_text("stages: {}\n")
    (project / "file.txt").write_text("x")
    with pytest.raises(ParamsError, match=message):
        check_out_root(out, project / out, project)
    check_out_root("runs/x", project / "runs/x", project)  # a separate folder is fine


def test_only_a_root_holding_nothing_but_the_model_copy_is_discarded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "empty"
    (empty / LATENCY_MODEL).parent.mkdir(parents=True)
    (empty / LATENCY_MODEL).write_text("{}")
    (empty / "data/corpora").mkdir(parents=True)
    kept = tmp_path / "kept"
    (kept / "reports").mkdir(parents=True)
    (kept / "reports/t.csv").write_text("a\n")
    assert discard_unused_root(empty) and not empty.exists()
    assert not discard_unused_root(kept) and (kept / "reports/t.csv").is_file()
    assert not discard_unused_root(tmp_path / "missing")
    (tmp_path / "link").symlink_to(kept)
    assert not discard_unused_root(Path(tmp_path / "link"))


def test_a_one_off_root_gets_the_committed_models_the_serving_stages_read(tmp_path, monkeypatch):
    """L6 (round 6): `--out DIR` copied only the latency model, so `serving simulate --out DIR` could not run
    and the serving page lacked its step-cost tables; a copy already in DIR is kept, a failed run's discarded."""
    from types import SimpleNamespace

    from analysis.pipeline.config import Config
    from analysis.pipeline.oneoff import COPIED_MODELS, enter_out_root

    monkeypatch.chdir(tmp_path)
    for committed in COPIED_MODELS:
        (tmp_path / committed).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / committed).write_text(f"committed {committed.name}")
    (tmp_path / "run/reports/kernels").mkdir(parents=True)
    (tmp_path / "run/reports/kernels/step_cost.json").write_text("the run's own")
    enter_out_root("run", Config({}, tmp_path / "params.yaml"), SimpleNamespace())
    assert {str(c) for c in COPIED_MODELS} >= {"reports/kernels/step_cost.json", "reports/tables/step_cost_terms.csv"}
    assert Path("reports/kernels/step_cost.json").read_text() == "the run's own"
    assert Path("reports/tables/step_cost_terms.csv").read_text() == "committed step_cost_terms.csv"
    assert Path(LATENCY_MODEL).read_text() == "committed latency_model.json"
    Path("reports/kernels/step_cost.json").unlink()
    assert discard_unused_root(tmp_path / "run") and not (tmp_path / "run").exists()
