"""Runs the analysis half of `dvc repro` on a handful of cases in a scratch copy of the project."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures import ROOT, write_scratch_shared

pytestmark = pytest.mark.slow


def dvc(*args, cwd):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("COPYDECODE_HUMANEVALPACK_DIR", None)
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, hep_dir):
    top = tmp_path_factory.mktemp("e2e")
    write_scratch_shared(top, hep_dir, python_cases=5)
    repo = top / "repo"
    repo.mkdir()
    for name in ("dvc.yaml", "analysis", "kernels_profile"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / name)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["corpora"]["humanevalpack"].update(languages=["python"], framings=["body", "decl"], verify_sha256=False)
    params["corpora"]["probeedit"]["n_cases"] = 7
    params["corpora"]["commits"] = []
    params["corpora"]["datasets"] = []
    params["spans"]["bootstrap_resamples"] = 50
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    assert dvc("init", "-q", cwd=repo).returncode == 0
    return repo


def test_dvc_repro_runs_the_analysis_stages(scratch):
    run = dvc("repro", "spans", "roundtrip", cwd=scratch)
    assert run.returncode == 0, run.stdout + run.stderr
    roundtrip = json.loads((scratch / "reports/metrics/roundtrip.json").read_text())
    assert roundtrip["programs"] == 2 * (5 * 2 + 7) and roundtrip["failed"] == 0
    coverage = json.loads((scratch / "reports/metrics/coverage.json").read_text())["coverage"]
    assert 0 < coverage["line/body/HEvalFix-Py"]["coverage"] <= coverage["token/body/HEvalFix-Py"]["coverage"] <= 1
    for name in ("span_histogram_line.png", "span_histogram_token.svg"):
        assert (scratch / "reports/figures" / name).stat().st_size > 1000
    again = dvc("repro", "spans", "roundtrip", cwd=scratch)
    assert again.returncode == 0 and "didn't change" in again.stdout


def test_a_bad_param_stops_the_stage_with_a_clear_error(scratch):
    params = yaml.safe_load((scratch / "params.yaml").read_text())
    params["corpora"]["humanevalpack"]["languages"] = ["cobol"]
    (scratch / "params.yaml").write_text(yaml.safe_dump(params))
    run = dvc("repro", "corpora", cwd=scratch)
    assert run.returncode != 0
    assert "'corpora.humanevalpack.languages' has unknown values ['cobol']" in run.stdout + run.stderr
