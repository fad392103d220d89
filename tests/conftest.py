"""The pytest fixtures and hooks shared by every test folder. The helpers that tests import live in
tests/fixtures.py (`from fixtures import ...`); nothing imports this file as a library."""

import os
from pathlib import Path

import pytest
from hypothesis import settings

from fixtures import SHARED_HEP

settings.register_profile("ci", max_examples=150, deadline=None)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def qwen():
    from analysis.tokenization import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def hep_dir() -> Path:
    if not (SHARED_HEP / "python.jsonl").is_file():
        pytest.skip(f"HumanEvalPack files not found at {SHARED_HEP}")
    return SHARED_HEP


@pytest.fixture(scope="module")
def tiny():
    """The tiny random Qwen2 (float32, CPU, seed 0) of the kernels_profile tests; a module may define its own."""
    from kernels_profile.models import build_model

    return build_model("tiny-qwen2", "random", "float32", "cpu", seed=0)
