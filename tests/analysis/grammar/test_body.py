"""The <gen> body automaton read off the FSM: over characters it accepts what the FSM accepts over bytes,
and its GBNF rules and its regex say the same."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.grammar.body import ALPHABET, CLOSED, OTHER, START, _STAND_IN, _step, body_automaton, gbnf_rules, regex
from analysis.grammar.fsm import ByteAutomaton

PIECES = ["<", "/", "g", "e", "n", ">", "&", "l", "t", ";", "a", "m", "p", "c", "o", "y", "x", "é", "中", "😀", "\n",
          "</gen>", "&lt;", "&amp;", "<gen", "<copy", "gen", "copy", "/gen", "lt;", "amp;", '"', " "]
BODIES = st.lists(st.sampled_from(PIECES), min_size=1, max_size=10).map("".join)
AUTOMATON = ByteAutomaton({"lines": 3})
REGEX = re.compile(regex())


def fsm_closes(body: str) -> bool:
    """Does the FSM accept '<gen>' + body as one whole op?"""
    return AUTOMATON.accepts(("<gen>" + body).encode("utf-8"))


@settings(max_examples=3000, deadline=None)
@given(BODIES)
def test_the_automaton_and_its_regex_accept_what_the_fsm_accepts(body):
    want = fsm_closes(body)
    assert (body_automaton().walk(body) == CLOSED) == want, body
    assert bool(REGEX.fullmatch(body)) == want, body


def test_one_character_stands_for_every_character_outside_the_alphabet():
    outside = [chr(b) for b in range(128) if chr(b) not in ALPHABET] + ["é", "中", "😀"]
    for state in body_automaton().states:
        want = _step(state, _STAND_IN)
        for ch in outside:
            after = state
            for byte in ch.encode("utf-8"):
                after = None if after is None else ByteAutomaton._body_step(after[1], after[2], after[3], byte)
            assert after == want, (state, ch)


def test_the_automaton_is_small_and_starts_empty():
    automaton = body_automaton()
    assert automaton.states[0] == START and 10 < len(automaton.states) < 100
    assert automaton.walk("x</gen>") == CLOSED and automaton.walk("</gen>") is None
    assert all(label in ALPHABET or label == OTHER for edges in automaton.edges for label, _ in edges)


def test_the_gbnf_rules_cover_every_state_once():
    rules = gbnf_rules("b")
    assert len(rules) == len(body_automaton().states)
    assert [r.split(" ::= ")[0] for r in rules] == [f"b{k}" for k in range(len(rules))]
