"""The grammar FSM accepts exactly what parse (plus the range check) accepts, at byte and token level."""

import random
from collections import deque

import numpy as np
import pytest
from fixtures import FSM_EOS as EOS
from fixtures import FSM_LINES as L
from fixtures import FSM_VOCAB as VOCAB
from fixtures import ToyTokenizer
from fixtures import fsm_reference as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.errors import ProgramError
from analysis.grammar.fsm import END, OPS, ByteAutomaton, FsmWalker, ProgramFSM
from analysis.grammar.program import Copy, Gen, Program, parse, render

@pytest.fixture(scope="module")
def tiny_fsm():
    return ProgramFSM(ToyTokenizer.words_then_eos(VOCAB), {"lines": L}, eos_ids=(EOS,))


# ---------------------------------------------------------------- byte level: FSM == parser

FRAGMENTS = [b"<gen>", b"</gen>", b'<copy lines="', b'<copy tokens="', b'"/>', b"-", b"1", b"2", b"0", b"12",
             b"13", b"&lt;", b"&amp;", b"&", b"<", b"/", b"lt;", b"amp;", b"copy", b"gen", b"/gen", b"</gen",
             b"<gen", b"a", b" ", b"\n", b">", "é".encode(), "中".encode(), "😀".encode(), b"\xe4", b"\xb8",
             b"\x80", b"\xc0", b"\xed\xa0", b"\xf4\x90", b"\xff"]
BODY = st.lists(st.sampled_from(FRAGMENTS[5:]), min_size=1, max_size=6).map(b"".join)
OP_BYTES = st.one_of(
    st.builds(lambda body: b"<gen>" + body + b"</gen>", BODY),
    st.builds(lambda u, i, j: b'<copy ' + u + b'="' + i + b"-" + j + b'"/>', st.sampled_from([b"lines", b"tokens"]),
              st.sampled_from([b"1", b"2", b"12", b"0", b"01", b"13"]), st.sampled_from([b"1", b"3", b"0", b"25"])),
)
GRAMMAR_BYTES = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=14).map(b"".join),
    st.lists(OP_BYTES, max_size=4).map(b"".join),  # whole ops, so that bodies are walked often
)
AUTOMATA = {
    "lines": ByteAutomaton({"lines": L}),
    "tokens": ByteAutomaton({"tokens": 7}),
    "both": ByteAutomaton({"lines": 3, "tokens": 25}),
}
LIMITS = {"lines": {"lines": L}, "tokens": {"tokens": 7}, "both": {"lines": 3, "tokens": 25}}


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=40), st.sampled_from(sorted(AUTOMATA)))
def test_random_bytes_accepted_iff_parser_accepts(data, config):
    assert AUTOMATA[config].accepts(data) == reference(data, LIMITS[config])


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(GRAMMAR_BYTES, st.sampled_from(sorted(AUTOMATA)))
def test_grammar_fragments_accepted_iff_parser_accepts(data, config):
    accepted = AUTOMATA[config].accepts(data)
    assert accepted == reference(data, LIMITS[config])
    if accepted:
        text = data.decode("utf-8")
        assert render(parse(text)) == text


def test_fragment_strings_exercise_acceptance():
    rng = random.Random(0)
    texts = [b"".join(b"<gen>" + b"".join(rng.choice(FRAGMENTS[5:]) for _ in range(rng.randrange(1, 6))) + b"</gen>"
                      for _ in range(rng.randrange(1, 4))) for _ in range(4000)]
    accepted = sum(AUTOMATA["lines"].accepts(t) for t in texts)
    assert 400 < accepted < 3600, accepted  # the property above is not just 'both reject'


TAGGY = st.text(alphabet=st.sampled_from(list("<>/&;ltampgencopy \n\"=-01239xé")), max_size=12)
ops = st.one_of(
    st.builds(lambda a, b, u: Copy(a, b, u), st.integers(1, 15), st.integers(1, 15), st.sampled_from(["lines", "tokens"])),
    st.builds(Gen, TAGGY.filter(bool)),
)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(st.lists(ops, max_size=5), st.sampled_from(sorted(AUTOMATA)))
def test_rendered_programs_accepted_iff_in_range(op_list, config):
    text = render(Program(tuple(op_list)))
    assert AUTOMATA[config].accepts(text.encode()) == reference(text, LIMITS[config])


@pytest.mark.parametrize(
    "body, ok",
    [
        (b"\xe4", False),  # a lead byte without its continuations
        (b"\xe4\xb8", False),
        (b"\xe4\xb8\xad", True),
        (b"\x80", False),  # a continuation byte alone
        (b"\xc0\x80", False),  # overlong
        (b"\xe0\x80\x80", False),  # overlong
        (b"\xed\xa0\x80", False),  # a UTF-16 surrogate
        (b"\xf4\x90\x80\x80", False),  # past U+10FFFF
        (b"\xf0\x9f\x98\x80", True),
        (b"\xe4<", False),  # an ASCII byte while a character is pending
        (b"a\xff", False),
    ],
)
def test_body_bytes_must_be_utf8(body, ok):
    data = b"<gen>" + body + b"</gen>"
    assert AUTOMATA["lines"].accepts(data) is ok
    assert reference(data) is ok


@pytest.mark.parametrize("text", ["<gen>&lt;</gen>", "<gen>&amp;</gen>", "<gen>&lt;&lt;gen</gen>", "<gen>&amp;x</gen>"])
def test_non_canonical_escapes_are_rejected_like_the_parser_does(text):
    assert not AUTOMATA["lines"].accepts(text.encode())
    with pytest.raises(ProgramError, match="non-canonical"):
        parse(text)


# ---------------------------------------------------------------- completion: every live state, exhaustively

def reachable_states(automaton):
    """Every live byte state reachable from OPS, with the byte edges between them."""
    edges, seen, todo = {}, {OPS}, deque([OPS])
    while todo:
        state = todo.popleft()
        edges[state] = []
        for byte in range(256):
            nxt = automaton.step(state, byte)
            if nxt is not None:
                edges[state].append(nxt)
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    return edges


def distances_to_accept(edges):
    reverse = {s: [] for s in edges}
    for s, nexts in edges.items():
        for t in nexts:
            reverse[t].append(s)
    dist, todo = {OPS: 0}, deque([OPS])
    while todo:
        t = todo.popleft()
        for s in reverse[t]:
            if s not in dist:
                dist[s] = dist[t] + 1
                todo.append(s)
    return dist


@pytest.mark.parametrize("config", sorted(AUTOMATA))
def test_completion_is_the_shortest_way_to_acceptance_from_every_live_state(config):
    automaton = AUTOMATA[config]
    edges = reachable_states(automaton)
    dist = distances_to_accept(edges)
    assert set(dist) == set(edges)  # no live state is a dead end
    assert any(s[0] == "body" and s[3] for s in edges)  # multi-byte states are covered
    for state in edges:
        rest = automaton.completion(state)
        assert automaton.walk(state, rest) == OPS, (state, rest)
        assert len(rest) == dist[state], (state, rest, dist[state])
    assert automaton.max_completion() == max(dist.values())


def test_completion_uses_only_the_allowed_units():
    tokens_only = ByteAutomaton({"tokens": 5})
    rest = tokens_only.completion(("tag", b"<copy "))
    assert rest == b'tokens="1-1"/>'
    assert tokens_only.walk(("tag", b"<copy "), rest) == OPS
    assert ByteAutomaton({"lines": 5}).completion(("tag", b"<copy ")) == b'lines="1-1"/>'


# ---------------------------------------------------------------- errors

def test_a_token_after_eos_is_a_program_error_naming_the_token(tiny_fsm):
    end = tiny_fsm.advance(OPS, EOS)
    assert end == END and not tiny_fsm.mask(end).any()
    with pytest.raises(ProgramError, match=r"token 17 \(b'a'\) comes after the end of the program"):
        tiny_fsm.advance(end, 17)


def test_unknown_states_are_program_errors(tiny_fsm):
    with pytest.raises(ProgramError, match="unknown FSM state"):
        AUTOMATA["lines"].step(("bogus",), 60)
    with pytest.raises(ProgramError, match="unknown FSM state"):
        tiny_fsm.advance(("bogus", 1), 0)
    with pytest.raises(ProgramError, match="after the end"):
        AUTOMATA["lines"].step(END, 60)


def test_a_forbidden_token_is_a_program_error_naming_it(tiny_fsm):
    with pytest.raises(ProgramError, match=r"token 17 \(b'a'\) is not allowed"):
        tiny_fsm.advance(OPS, 17)


# ---------------------------------------------------------------- token level on the tiny vocabulary

@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(st.lists(st.integers(0, len(VOCAB) - 1), max_size=12))
def test_token_walk_agrees_with_masks_and_parse(tiny_fsm, ids):
    state = OPS
    for token in ids:
        allowed = tiny_fsm.mask(state)[token]
        assert allowed == (tiny_fsm.automaton.walk(state, VOCAB[token]) is not None)
        if not allowed:
            with pytest.raises(ProgramError):
                tiny_fsm.advance(state, token)
            return
        state = tiny_fsm.advance(state, token)
    data = b"".join(VOCAB[i] for i in ids)
    assert tiny_fsm.is_accepting(state) == reference(data)
    assert tiny_fsm.mask(state)[EOS] == reference(data)


def test_masks_match_a_token_by_token_walk_in_every_reachable_state(tiny_fsm):
    walk = tiny_fsm.automaton.walk
    for state in reachable_states(tiny_fsm.automaton):
        expected = np.array([walk(state, p) is not None for p in VOCAB] + [state == OPS])
        assert np.array_equal(tiny_fsm.compute_mask(state), expected), state
        assert np.array_equal(tiny_fsm.mask(state), expected), state


def test_compute_mask_bypasses_the_cache(tiny_fsm):
    state = ("body", True, b"", ())
    cached = tiny_fsm.mask(state)
    assert tiny_fsm.mask(state) is cached
    fresh = tiny_fsm.compute_mask(state)
    assert fresh is not cached and np.array_equal(fresh, cached)


def test_piece_and_public_fields(tiny_fsm):
    assert tiny_fsm.piece(0) == b"<" and tiny_fsm.piece(EOS) is None and tiny_fsm.piece(10**6) is None
    assert tiny_fsm.eos_ids == (EOS,) and tiny_fsm.vocab_size == len(VOCAB) + 1 and tiny_fsm.initial == OPS


# ---------------------------------------------------------------- the walker and its budget

@pytest.mark.parametrize("seed", range(40))
def test_walker_always_ends_in_a_whole_program_within_its_budget(tiny_fsm, seed):
    rng = random.Random(seed)
    budget = rng.randrange(0, 60)
    walker = FsmWalker(tiny_fsm, budget=budget)
    out = []
    while walker.remaining > 0 and not walker.finished:
        allowed = np.flatnonzero(walker.allowed())
        assert allowed.size, (seed, walker.state)
        non_eos = [int(i) for i in allowed if i != EOS]
        token = rng.choice(non_eos) if non_eos and rng.random() < 0.95 else EOS
        if token == EOS and EOS not in allowed:
            token = rng.choice(non_eos)
        walker.advance(token)
        if token != EOS:
            out.append(VOCAB[token])
    assert walker.generated <= budget
    assert walker.is_accepting() or walker.finished
    assert reference(b"".join(out)), (seed, b"".join(out))


def test_walker_refuses_a_margin_below_the_longest_completion(tiny_fsm):
    with pytest.raises(ProgramError, match="margin"):
        FsmWalker(tiny_fsm, budget=10, margin=3)


def test_walker_forces_the_completion_and_then_eos(tiny_fsm):
    walker = tiny_fsm.walker(budget=100)
    for token in [VOCAB.index(b"<gen>"), VOCAB.index(b"a")]:
        walker.advance(token)
    walker.generated = 100 - walker.margin  # the budget is now tight
    assert walker.forcing and walker.completion() == b"</gen>"
    spelled = {VOCAB[i] for i in np.flatnonzero(walker.allowed())}
    assert spelled and all(b"</gen>".startswith(p) for p in spelled)
    walker.advance(VOCAB.index(b"</gen>"))
    assert list(np.flatnonzero(walker.allowed())) == [EOS]


# ---------------------------------------------------------------- the real vocabulary

def test_real_vocabulary_walks_rendered_oracle_programs(qwen, hep_dir):
    import json

    from analysis.oracle.covmax import line_oracle
    from analysis.text.lines import split_lines

    records = [json.loads(line) for line in (hep_dir / "python.jsonl").read_text().splitlines()[:25]]
    pairs = [(r["buggy_solution"], r["canonical_solution"]) for r in records]
    limit = max(len(split_lines(source)) for source, _ in pairs)
    fsm = ProgramFSM(qwen, {"lines": limit}, eos_ids=(151643,))  # built once: ~1 s over 151k tokens
    for source, target in pairs:
        text = render(line_oracle(source, target))
        walker = fsm.walker()
        for token in qwen.encode_program(text).ids:
            assert walker.allowed()[token]
            walker.advance(token)
        assert walker.is_accepting() and walker.allowed()[151643]
        assert fsm.accepts(text) == reference(text, {"lines": limit})


def test_real_vocabulary_rejects_out_of_range_lines(qwen):
    fsm = ProgramFSM(qwen, {"lines": 9}, eos_ids=(151643,))
    assert fsm.accepts('<copy lines="2-9"/><gen>ok\n</gen>')
    assert not fsm.accepts('<copy lines="2-10"/>')
    assert not fsm.accepts('<copy lines="5-3"/>')
    state = fsm.initial
    for token in qwen.encode('<copy lines="').ids:
        state = fsm.advance(state, token)
    allowed = [qwen.piece(int(i)) for i in np.flatnonzero(fsm.mask(state))]
    assert sorted(allowed) == [str(d).encode() for d in range(1, 10)]


def test_real_vocabulary_rejects_invalid_utf8_tokens(qwen):
    fsm = ProgramFSM(qwen, {"lines": 3}, eos_ids=(151643,))
    state = fsm.initial
    for token in qwen.encode("<gen>").ids:
        state = fsm.advance(state, token)
    lead = next(i for i in range(fsm.vocab_size) if fsm.piece(i) == b"\xe4")
    close = qwen.encode("</gen>").ids
    pending = fsm.advance(state, lead)
    assert not fsm.mask(pending)[close[0]]
    continuations = [fsm.piece(int(i)) for i in np.flatnonzero(fsm.mask(pending))]
    assert continuations and all(0x80 <= p[0] <= 0xBF for p in continuations)


def test_empty_source_allows_no_copy(qwen):
    fsm = ProgramFSM(qwen, {"lines": 0}, eos_ids=(151643,))
    assert not fsm.accepts('<copy lines="1-1"/>')
    assert fsm.accepts("<gen>new\n</gen>")
