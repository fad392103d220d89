"""The pytest fixtures and hooks shared by every test folder. The helpers that tests import live in
tests/fixtures.py (`from fixtures import ...`); nothing imports this file as a library."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

from fixtures import SHARED_HEP, write_scratch_params

settings.register_profile("ci", max_examples=150, deadline=None)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def qwen():
    from analysis.text.tokens import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def hep_dir() -> Path:
    if not (SHARED_HEP / "python.jsonl").is_file():
        pytest.skip(f"HumanEvalPack files not found at {SHARED_HEP}")
    return SHARED_HEP


@pytest.fixture(scope="module")
def tiny():
    """The tiny random Qwen2 (float32, CPU, seed 0) of the kernels_profile tests; a module may define its own."""
    from kernels_profile.runtime.models import build_model

    return build_model("tiny-qwen2", "random", "float32", "cpu", seed=0)


@pytest.fixture(scope="session")
def stages_built(tmp_path_factory, hep_dir) -> Path:
    """corpora, programs and spans run once on SCRATCH_STAGE_PARAMS (HumanEvalPack Python body cases);
    each test that uses `stage_scratch` gets a copy of its data/."""
    from analysis.cli import main

    folder = tmp_path_factory.mktemp("stages_built")
    here = os.getcwd()
    os.chdir(folder)
    try:
        write_scratch_params(folder, **{"corpora.humanevalpack.local_dir": str(hep_dir)})
        for stage in ("corpora", "programs", "spans"):
            assert main(["--params", "params.yaml", stage]) == 0, stage
    finally:
        os.chdir(here)
    return folder


@pytest.fixture()
def stage_scratch(stages_built, tmp_path, monkeypatch, hep_dir) -> Path:
    """A scratch output root (the working directory) holding the built cases, programs and spans."""
    import shutil

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COPYDECODE_HUMANEVALPACK_DIR", raising=False)
    shutil.copytree(stages_built / "data", tmp_path / "data")
    write_scratch_params(tmp_path, **{"corpora.humanevalpack.local_dir": str(hep_dir)})
    return tmp_path


# Where a stage run that forgot to move into its temporary folder leaves files in the checkout (UX review P1: the
# quick subset left data/summaries/bench_busy.json holding a pytest temporary path).
CHECKOUT_RUN_FILES = ("data/summaries", "data/timings")


def _run_files() -> dict[Path, int]:
    from fixtures import ROOT

    return {p: p.stat().st_mtime_ns for folder in CHECKOUT_RUN_FILES for p in (ROOT / folder).glob("*.json")}


@pytest.fixture(autouse=True)
def _no_test_writes_run_files_into_the_checkout(request, tmp_path_factory):
    """Fails the test that wrote a summary or run time naming a pytest temporary folder into the checkout's data/
    (a file a user's `dvc repro` wrote there, at the same time, names none)."""
    before = _run_files()
    yield
    temporary = str(tmp_path_factory.getbasetemp())
    leaked = [p for p, stamp in _run_files().items()
              if before.get(p) != stamp and temporary in p.read_text(encoding="utf-8", errors="replace")]
    assert not leaked, (f"{request.node.nodeid} wrote {', '.join(map(str, leaked))} into the checkout; run the command "
                        "inside tmp_path (monkeypatch.chdir)")
