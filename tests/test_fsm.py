"""The grammar FSM accepts exactly what parse (plus the range check) accepts, at byte and token level."""


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import ProgramError
from analysis.fsm import OPS, ProgramFSM
from analysis.program import Copy, Gen, Program, parse, render
from kernels_profile.constrained import ProgramLogitsProcessor, completion

L = 12


def reference(text: str, limit: int = L) -> bool:
    try:
        program = parse(text)
    except ProgramError:
        return False
    return all(op.unit == "lines" and 1 <= op.start <= op.end <= limit for op in program.copies)


class TinyTokenizer:
    """The slice of analysis.tokenization.Tokenizer that the FSM uses, over a hand-made vocabulary."""

    def __init__(self, pieces):
        self.pieces = [p.encode() for p in pieces]
        self._added = {}
        self.vocab_size = len(self.pieces) + 1  # the last id is EOS

    def piece(self, token_id):
        return self.pieces[token_id]


VOCAB = ["<", "copy", " lines=\"", "<copy lines=\"", "1", "2", "0", "12", "-", "\"/>", "\"", "/>", "<gen>",
         "</gen>", "</", "gen", ">", "a", " b", "\n", "&lt;", "&", "x</gen>", "<g", "<c", "e", "n"]
# every single byte of the grammar is a token too, as in byte-level BPE, so no live state is stuck
VOCAB += sorted(set('<copy lines="3456789-/>gen') - set(VOCAB))
EOS = len(VOCAB)


@pytest.fixture(scope="module")
def tiny_fsm():
    return ProgramFSM(TinyTokenizer(VOCAB), {"lines": L}, eos_ids=(EOS,))


TAGGY = st.text(alphabet=st.sampled_from(list("<>/&;ltampgencopy \n\"=-01239x")), max_size=12)
ops = st.one_of(
    st.builds(lambda a, b: Copy(a, b), st.integers(1, 15), st.integers(1, 15)),
    st.builds(Gen, TAGGY.filter(bool)),
)


@given(st.lists(ops, max_size=5))
def test_rendered_programs_accepted_iff_in_range(tiny_fsm, op_list):
    text = render(Program(tuple(op_list)))
    assert tiny_fsm.accepts(text) == reference(text)


@given(st.lists(st.sampled_from(VOCAB + ["<copy lines=\"3-2\"/>", "<gen></gen>", "<copy tokens=\"1-2\"/>"]), max_size=10))
def test_arbitrary_strings_accepted_iff_parse_accepts(tiny_fsm, parts):
    text = "".join(parts)
    assert tiny_fsm.accepts(text) == reference(text)


@given(st.lists(st.integers(0, len(VOCAB) - 1), max_size=12))
def test_token_walk_agrees_with_masks_and_parse(tiny_fsm, ids):
    state = OPS
    for token in ids:
        allowed = tiny_fsm.allowed(state)[token]
        if not allowed:
            with pytest.raises(ProgramError):
                tiny_fsm.advance(state, token)
            return
        state = tiny_fsm.advance(state, token)
    text = "".join(VOCAB[i] for i in ids)
    assert tiny_fsm.is_accepting(state) == reference(text)
    assert tiny_fsm.allowed(state)[EOS] == reference(text)


@given(st.lists(st.integers(0, len(VOCAB) - 1), max_size=12))
def test_every_live_state_can_be_completed(tiny_fsm, ids):
    state = OPS
    for token in ids:
        if not tiny_fsm.allowed(state)[token]:
            break
        state = tiny_fsm.advance(state, token)
    assert tiny_fsm.automaton.walk(state, completion(state)) == OPS


def test_adapter_never_lets_an_invalid_program_out(tiny_fsm):
    torch = pytest.importorskip("torch")
    for seed in range(40):
        gen = torch.Generator().manual_seed(seed)
        budget = 6 + seed % 40  # from budgets too small for any op to ones with room for several
        ids = torch.zeros((1, 3), dtype=torch.long)  # a 3-token "prompt"
        proc = ProgramLogitsProcessor(tiny_fsm, 3, budget)
        for _ in range(budget):
            scores = proc(ids, torch.randn(1, tiny_fsm.vocab_size, generator=gen))
            token = int(scores.argmax())
            if token == EOS:
                break
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        text = "".join(VOCAB[i] for i in ids[0, 3:].tolist())
        assert reference(text), (seed, text)


def test_real_vocabulary_walks_rendered_oracle_programs(qwen, hep_dir):
    import json

    from analysis.oracle import line_oracle
    from analysis.text import split_lines

    records = [json.loads(line) for line in (hep_dir / "python.jsonl").read_text().splitlines()[:25]]
    pairs = [(r["buggy_solution"], r["canonical_solution"]) for r in records]
    limit = max(len(split_lines(source)) for source, _ in pairs)
    fsm = ProgramFSM(qwen, {"lines": limit}, eos_ids=(151643,))  # built once: ~1 s over 151k tokens
    for source, target in pairs:
        text = render(line_oracle(source, target))
        state = fsm.initial
        for token in qwen.encode(text).ids:
            assert fsm.allowed(state)[token]
            state = fsm.advance(state, token)
        assert fsm.is_accepting(state) and fsm.allowed(state)[151643]
        assert fsm.accepts(text) == reference(text, limit)


def test_real_vocabulary_rejects_out_of_range_lines(qwen):
    fsm = ProgramFSM(qwen, {"lines": 9}, eos_ids=(151643,))
    assert fsm.accepts('<copy lines="2-9"/><gen>ok\n</gen>')
    assert not fsm.accepts('<copy lines="2-10"/>')
    assert not fsm.accepts('<copy lines="5-3"/>')
    state = fsm.initial
    for token in qwen.encode('<copy lines="').ids:
        state = fsm.advance(state, token)
    allowed = [qwen.piece(int(i)) for i in np.flatnonzero(fsm.allowed(state))]
    assert sorted(allowed) == [str(d).encode() for d in range(1, 10)]


def test_empty_source_allows_no_copy(qwen):
    fsm = ProgramFSM(qwen, {"lines": 0}, eos_ids=(151643,))
    assert not fsm.accepts('<copy lines="1-1"/>')
    assert fsm.accepts("<gen>new\n</gen>")
