"""The llguidance engine's mask is the suite engine's mask at every step, on the Qwen2.5 vocabulary (no model).

The byte-identity tests (test_llg_engine.py) compare whole decodes on the toy vocabulary and on one real
case; this compares the two masks themselves on a real 151k-token vocabulary, along random walks through
the grammar: random tokens chosen among those both engines allow (grammar-ish ones preferred, EOS only
late), directives closed and their copies fast-forwarded, and budgets that bring in the forced ending.
Where llguidance alone would narrow a forced run to its canonical first token (after '<c' only 'opy'),
analysis.grammar.llg.StepMasks widens it back; this is the check that nothing else differs."""

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from analysis.grammar.fsm import ProgramFSM  # noqa: E402
from analysis.grammar.program import Program  # noqa: E402
from analysis.grammar.resolver import resolve  # noqa: E402
from kernels_profile.decode.decoder import last_copy  # noqa: E402
from kernels_profile.decode.masks import MaskTable  # noqa: E402
from kernels_profile.decode.llg_engine import LlgVocabulary, LlguidanceEngine  # noqa: E402
from kernels_profile.runtime.hf import ModelTokenizer  # noqa: E402

EOS = 151643
WIDTH = 151_936  # Qwen2.5's logits rows (more than its tokenizer's ids)
SOURCE = "".join(f"item_{k} = load({k!r})  # <tag> & co\n" for k in range(1, 13))
PIECES = ["<", "<c", "<copy", " lines", '="', "1", "12", "-", "-1", '"/>', '"', "/>", "<gen>", "<g", "gen", ">",
          "</", "</gen>", "&", "&lt;", "&amp;", "lt;", "copy", "x", " ", "\n", "é"]


@pytest.fixture(scope="module")
def qwen_tok(qwen):
    return ModelTokenizer("qwen2.5", qwen, lambda text: list(qwen.encode_program(text).ids), None, (EOS,))


@pytest.fixture(scope="module")
def vocab(qwen_tok):
    return LlgVocabulary.build(qwen_tok, WIDTH)


@pytest.fixture(scope="module")
def table(qwen):
    return MaskTable(ProgramFSM(qwen, {"lines": 12}, eos_ids=(EOS,)), WIDTH)


def _bits(engine) -> np.ndarray:
    return np.unpackbits(engine.bitmask.view(np.uint8), bitorder="little")[:WIDTH].astype(bool)


def walk(qwen, qwen_tok, vocab, table, seed: int, picks: list[int]) -> tuple[int, int]:
    """One walk, asserting equal masks at each step; returns (directives closed, steps under forcing)."""
    rng = random.Random(seed)
    budget = [None, 40, 60, 80][seed % 4]
    engine = LlguidanceEngine(vocab, SOURCE, budget, None, (EOS,))
    walker = table.fsm.walker(budget=budget)
    program, closed, forced = b"", 0, 0
    for step in range(120):
        engine.fill()
        ours = table.allowed(walker)
        theirs = _bits(engine)
        differ = np.flatnonzero(ours != theirs[:ours.shape[0]])
        assert differ.size == 0, (seed, step, program[-30:], [qwen.piece(int(i)) for i in differ[:8]])
        assert not theirs[ours.shape[0]:].any()  # rows past the tokenizer's ids stay blocked
        allowed = [int(t) for t in np.flatnonzero(ours) if t != EOS or step > 90]
        preferred = [t for t in picks if t in set(allowed)]
        token = EOS if not allowed else rng.choice(preferred) if preferred and rng.random() < 0.7 else rng.choice(allowed)
        forced += walker.forcing
        closing = engine.closing(token)
        walker.advance(token)
        engine.advance(token)
        if token == EOS:
            break
        program += qwen.piece(token)
        if closing:
            op = last_copy(program)
            engine.copy_ids(op, resolve(Program((op,)), SOURCE), qwen_tok)
            closed += 1
    assert engine.generated == walker.generated
    return closed, forced


@pytest.mark.slow
def test_random_walks_see_the_same_mask_under_both_engines(qwen, qwen_tok, vocab, table):
    picks = sorted({t for piece in PIECES for t in qwen.encode_program(piece).ids})
    seen = [walk(qwen, qwen_tok, vocab, table, seed, picks) for seed in range(8)]
    # the walks closed directives and ran into the budget's forced ending, not only gen text
    assert sum(c for c, _ in seen) >= 5 and sum(f for _, f in seen) >= 10, seen
