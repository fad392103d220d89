"""Suffix automata (analysis.oracle.automaton): the plain-Python reference and the compiled one."""

from hypothesis import given
from hypothesis import strategies as st

from analysis.oracle.automaton import CompiledAutomaton, SuffixAutomaton


def test_suffix_automaton_matching_statistics():
    sam = SuffixAutomaton.build([1, 2, 3, 1, 2])
    lengths, _ = sam.matching_statistics([2, 3, 1, 9, 1, 2, 3])
    assert lengths == [1, 2, 3, 0, 1, 2, 3]


SEQS = st.lists(st.integers(0, 4), max_size=60) | st.lists(st.integers(0, 300), max_size=60)


@given(SEQS, st.lists(st.integers(0, 5), max_size=40))
def test_compiled_automaton_is_the_reference_automaton(source, target):
    reference, compiled = SuffixAutomaton.build(source), CompiledAutomaton.build(source)
    assert compiled.link.tolist() == reference.link
    assert compiled.length.tolist() == reference.length
    assert compiled.first_end.tolist() == reference.first_end
    transitions = {(state, token): to for state, out in enumerate(reference.next) for token, to in out.items()}
    assert int((compiled.keys != -1).sum()) == len(transitions)  # no transition more
    for (state, token), to in transitions.items():
        assert compiled.transition(state, token) == to
    lengths, states = reference.matching_statistics(target)
    got_lengths, got_states = compiled.matching_statistics(target)
    assert (got_lengths.tolist(), got_states.tolist()) == (lengths, states)


def _longest_occurring_suffix(source, prefix):
    """Brute force: the longest suffix of `prefix` that occurs in `source` as a contiguous run."""
    windows = {tuple(source[i:j]) for i in range(len(source)) for j in range(i + 1, len(source) + 1)}
    return max((k for k in range(1, len(prefix) + 1) if tuple(prefix[-k:]) in windows), default=0)


@given(st.lists(st.integers(0, 3), max_size=20), st.lists(st.integers(0, 4), max_size=20))
def test_matching_statistics_are_the_longest_occurring_suffixes(source, target):
    want = [_longest_occurring_suffix(source, target[: i + 1]) for i in range(len(target))]
    assert SuffixAutomaton.build(source).matching_statistics(target)[0] == want
    assert CompiledAutomaton.build(source).matching_statistics(target)[0].tolist() == want


@given(st.lists(st.integers(0, 3), min_size=1, max_size=20))
def test_every_state_ends_where_its_longest_string_occurs(source):
    sam = SuffixAutomaton.build(source)
    for state in range(1, len(sam.length)):
        end, n = sam.first_end[state], sam.length[state]
        assert 0 < n <= end + 1
        # walking the state's longest string, read off at its end position, from the root lands on the state
        at = 0
        for token in source[end + 1 - n: end + 1]:
            at = sam.next[at][token]
        assert at == state


def test_an_empty_sequence_has_only_the_root_and_matches_nothing():
    sam, compiled = SuffixAutomaton.build([]), CompiledAutomaton.build([])
    assert sam.length == [0] and compiled.length.tolist() == [0]
    assert sam.matching_statistics([1, 2])[0] == [0, 0]
    assert compiled.transition(0, 1) == -1 and compiled.matching_statistics([1, 2])[0].tolist() == [0, 0]
