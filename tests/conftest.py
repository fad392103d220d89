import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_HEP = ROOT.parent / "shared" / "data" / "humanevalpack"

# The tests mirror the package tree; a few share helpers across folders (`from test_decoder import toy`).
# Test file names are unique, so every test folder goes on the path, whatever order pytest collects in.
for _folder in sorted(p for p in (ROOT / "tests").rglob("*") if p.is_dir() and p.name != "__pycache__"):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

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


def sources_held(params: dict, model_path: Path) -> dict:
    """`params` with kernel.sources cut to those the latency model at `model_path` holds: tests that copy
    the committed model as a plain input may meet a source params.yaml names before `kernels fit` reran."""
    from analysis.kernel_sources import FIT_SOURCE, PAPER_SOURCE, load_fitted_models, measured_names

    held = set(measured_names(load_fitted_models(model_path))) | {FIT_SOURCE, PAPER_SOURCE}
    params["kernel"]["sources"] = [s for s in params["kernel"]["sources"] if s in held]
    return params


# ---------------------------------------------------------------- the one toy tokenizer

class ToyTokenizer:
    """The toy tokenizer every test builds on: token ids spell `pieces` (bytes); `eos` spells nothing.

    It offers the slice of a tokenizer that the FSM uses (`vocab_size`, `piece`, `added_token_ids`) and
    the HF-style call the e2e stage uses (`tok(text)["input_ids"]`, one id per byte: the first 256
    pieces must then be the bytes themselves, as in `ToyTokenizer.bytes_then`).
    """

    added_token_ids = frozenset()

    def __init__(self, pieces: list[bytes], eos: int):
        if not 0 <= eos < len(pieces) or pieces[eos] != b"":
            raise ValueError(f"toy tokenizer: the EOS id {eos} must hold an empty piece")
        self.pieces, self.eos = list(pieces), eos
        self.vocab_size = len(self.pieces)

    @classmethod
    def words_then_eos(cls, words: list[bytes]) -> "ToyTokenizer":
        """A hand-made vocabulary; the last id is EOS."""
        return cls([*words, b""], eos=len(words))

    @classmethod
    def bytes_then(cls, extra: list[bytes] = ()) -> "ToyTokenizer":
        """Byte level: ids 0..255 are the bytes, 256 is EOS, then the multi-byte `extra` pieces."""
        return cls([bytes([b]) for b in range(256)] + [b""] + list(extra), eos=256)

    def piece(self, token_id: int) -> bytes:
        return self.pieces[token_id]

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": self.encode(text)}


def toy_model_tokenizer(extra: list[bytes] = (b'"/><', b'"/>')):
    """The byte-level toy as a kernels_profile ModelTokenizer (the decoder's and the pilot's tests).
    The default `extra` pieces: one closes a directive and starts the next op at once."""
    from kernels_profile.sequence import ModelTokenizer

    tok = ToyTokenizer.bytes_then(list(extra))
    return ModelTokenizer("toy", tok, tok.encode, None, (tok.eos,))


# ---------------------------------------------------------------- the FSM tests' vocabulary and oracle

FSM_LINES = 12  # the line count the FSM tests' programs may copy from


def fsm_reference(data, limits=None) -> bool:
    """The parser's verdict, with the copy-range check; bytes that are not UTF-8 are rejected."""
    from analysis.errors import ProgramError
    from analysis.program import parse

    limits = {"lines": FSM_LINES} if limits is None else limits
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    try:
        program = parse(data)
    except ProgramError:
        return False
    return all(op.unit in limits and 1 <= op.start <= op.end <= limits[op.unit] for op in program.copies)


FSM_WORDS = ["<", "copy", " lines=\"", "<copy lines=\"", "1", "2", "0", "12", "-", "\"/>", "\"", "/>", "<gen>",
         "</gen>", "</", "gen", ">", "a", " b", "\n", "&lt;", "&", "x</gen>", "<g", "<c", "e", "n", "&amp;",
         "lt;", "&lt;copy", "é", "中"]
# every single byte is a token too, as in byte-level BPE, so no live state is stuck
FSM_VOCAB = [w.encode() for w in FSM_WORDS] + [bytes([b]) for b in range(256)
                                               if bytes([b]) not in {w.encode() for w in FSM_WORDS}]
FSM_EOS = len(FSM_VOCAB)  # ToyTokenizer.words_then_eos(FSM_VOCAB) puts EOS last


def profile_spec(**changes):
    """The kernel profile's ProfileSpec as params.yaml gives it, with `changes`; torch's own thread count
    unless `threads` is given (what the tests measured with before the spec lost its code defaults)."""
    from dataclasses import replace

    import yaml

    from kernels_profile.stages.profile import settings

    spec = settings(yaml.safe_load((ROOT / "params.yaml").read_text())).spec
    return replace(spec, **{"threads": None, **changes})


def write_scratch_shared(top: Path, hep_dir: Path, python_cases: int) -> None:
    """A `shared/data` beside a scratch repository: the first `python_cases` HumanEvalPack Python records
    and an empty git folder (declared by the corpora stage; no bundle mined)."""
    data = top / "shared" / "data" / "humanevalpack"
    data.mkdir(parents=True)
    lines = (hep_dir / "python.jsonl").read_text().splitlines()[:python_cases]
    (data / "python.jsonl").write_text("\n".join(lines) + "\n")
    (top / "shared" / "data" / "git").mkdir()
    (top / "shared" / "data" / "git" / "README").write_text("empty\n")
