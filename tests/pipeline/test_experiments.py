"""The README's experiment workflow on the analysis stages, in a scratch git + dvc repository with a
few HEvalFix-Py cases: `dvc exp run -S kernel.latency_form=quadratic` reruns only the stages that read
it (bounds, headline), `copydecode experiments` prints the changed param beside the headline
metrics, and `dvc metrics diff` names what moved. The kernel stages are left out of the scratch
dvc.yaml (their committed latency model is a plain input), so nothing here profiles a model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures import ROOT, sources_held, write_scratch_shared

from analysis.present.headline import HEADLINE_DIR
from analysis.layout import LATENCY_MODEL

pytestmark = pytest.mark.slow
STAGES = ("corpora", "programs", "roundtrip", "spans", "bounds", "headline")


def dvc(*args, cwd, columns: int | None = None):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if columns:
        env["COLUMNS"] = str(columns)  # a terminal this wide (rich sizes `dvc exp show` to it)
    env.pop("COPYDECODE_HUMANEVALPACK_DIR", None)
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def git(*args, cwd):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def scratch_dvc_yaml() -> dict:
    """The project's stages that the experiment needs; the headline stage reads only what they write."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    stages = {name: spec["stages"][name] for name in STAGES}
    produced = {next(iter(o)) if isinstance(o, dict) else o
                for s in stages.values() for key in ("outs", "metrics") for o in s.get(key, [])}
    stages["headline"]["deps"] = [d for d in stages["headline"]["deps"]
                                  if d.endswith(".py") or d in produced]
    return {"stages": stages}


@pytest.fixture(scope="module")
def repo(tmp_path_factory, hep_dir):
    top = tmp_path_factory.mktemp("exp")
    write_scratch_shared(top, hep_dir, python_cases=3)
    repo = top / "repo"
    repo.mkdir()
    for name in ("analysis", "kernels_profile"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / LATENCY_MODEL).parent.mkdir(parents=True)
    shutil.copy(ROOT / LATENCY_MODEL, repo / LATENCY_MODEL)
    (repo / "dvc.yaml").write_text(yaml.safe_dump(scratch_dvc_yaml(), sort_keys=False))
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["corpora"]["humanevalpack"].update(languages=["python"], framings=["body"], verify_sha256=False)
    params["corpora"]["probeedit"]["enabled"] = False
    params["corpora"]["commits"] = []
    params["corpora"]["datasets"] = []
    params["spans"]["bootstrap_resamples"] = 20
    params["bounds"]["bootstrap_resamples"] = 20
    sources_held(params, ROOT / LATENCY_MODEL)  # the committed latency model is a plain input here
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    (repo / ".gitignore").write_text("/data/\n__pycache__/\n")
    git("init", "-q", cwd=repo)
    assert dvc("init", "-q", cwd=repo).returncode == 0
    base = dvc("repro", cwd=repo)
    assert base.returncode == 0, base.stdout + base.stderr
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "baseline", cwd=repo)
    return repo


def test_exp_run_reruns_only_the_dependent_stages(repo):
    run = dvc("exp", "run", "-S", "kernel.latency_form=quadratic", cwd=repo)
    assert run.returncode == 0, run.stdout + run.stderr
    ran = {s for s in STAGES if f"Running stage '{s}'" in run.stdout}
    assert ran == {"bounds", "headline"}, run.stdout

    # the README's readable form (`copydecode experiments`, P9): changed params and pooled figures, one column per
    # experiment, no dep hashes or timestamps, within 120 columns
    env = {**os.environ, "PYTHONPATH": str(repo)}
    show = subprocess.run([sys.executable, "-m", "analysis.cli", "experiments"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600)
    assert show.returncode == 0, show.stderr
    lines = show.stdout.splitlines()
    names = [line.split()[0] for line in lines if line.strip()]
    assert "kernel.latency_form" in names and "bound_fit_ideal_x:pooled" in names
    assert not any(n.startswith("cov_line") for n in names) and "Created" not in show.stdout
    assert "shared/data" not in show.stdout
    assert any("quadratic" in line for line in lines) and any("interp" in line for line in lines)
    assert max(len(line) for line in lines) <= 120

    diff = dvc("metrics", "diff", cwd=repo)
    assert diff.returncode == 0, diff.stderr
    assert f"{HEADLINE_DIR}/bound_fit_ideal_x.json" in diff.stdout and f"{HEADLINE_DIR}/cov_line_pct.json" not in diff.stdout
