import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_HEP = ROOT.parent / "shared" / "data" / "humanevalpack"

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


def params_with(**changes) -> dict:
    """The repository's params.yaml with dotted keys replaced (`spans.ci=0.9` as `**{"spans.ci": 0.9}`)."""
    import json

    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for dotted, value in changes.items():
        node = params
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return json.loads(json.dumps(params))
