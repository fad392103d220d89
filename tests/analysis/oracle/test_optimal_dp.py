"""The compiled pieces of the cost-optimal DPs (analysis.oracle.optimal_dp) against brute force.

The compiled DPs as a whole are compared with analysis.oracle.optimal's references in test_optimal.py
(`test_compiled_dps_match_*`); here each helper is checked on its own definition."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from analysis.oracle.automaton import CompiledAutomaton
from analysis.oracle.optimal_dp import close_unit, compiled_longest_prefix_matches, compiled_occurrence_counts

TOKENS = st.lists(st.integers(0, 3), max_size=20)


def _occurrences(seq, sub):
    return sum(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


@given(TOKENS)
def test_occurrence_counts_count_each_states_string_in_the_source(source):
    sam = CompiledAutomaton.build(source)
    counts = compiled_occurrence_counts(sam.link, sam.length, sam.first_end)
    for state in range(1, len(sam.length)):
        end, n = int(sam.first_end[state]), int(sam.length[state])
        assert counts[state] == _occurrences(source, source[end + 1 - n: end + 1]), state


@given(TOKENS, TOKENS)
def test_longest_prefix_matches_are_the_longest_copyable_runs(source, target):
    sam = CompiledAutomaton.build(source)
    match_len, _ = sam.matching_statistics(target)
    longest = compiled_longest_prefix_matches(match_len, len(target))
    want = [max(k for k in range(len(target) - j + 1) if k == 0 or _occurrences(source, target[j:j + k]))
            for j in range(len(target))]
    assert longest.tolist() == want + [0]


def test_close_unit_takes_the_cheaper_of_gen_and_copy_and_charges_tags_only_from_copy_mode():
    gen_unit, tags = np.array([1.0, 1.0]), 0.5
    f_c, f_g = np.zeros(3), np.zeros(3)
    f_g[1] = 2.0
    close_unit(0, 3.0, gen_unit, tags, 0.0, f_c, f_g)  # gen 1 + 2 = 3 ties the copy
    assert (f_g[0], f_c[0]) == (3.0, 3.0)  # from copy mode the gen pays its tags: 3.5 > 3, the copy
    close_unit(0, 2.5, gen_unit, tags, 0.0, f_c, f_g)
    assert (f_g[0], f_c[0]) == (2.5, 2.5)
    close_unit(0, np.inf, gen_unit, tags, 0.0, f_c, f_g)  # no copy: the gen, with tags after a copy
    assert (f_g[0], f_c[0]) == (3.0, 3.5)
    # after a prefill the op opens a decode run: its first-step overhead, whichever op wins
    close_unit(0, 3.0, gen_unit, tags, 0.25, f_c, f_g)
    assert (f_g[0], f_c[0]) == (3.0, 3.25)
