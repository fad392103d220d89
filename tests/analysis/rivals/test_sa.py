"""TensorRT-LLM's suffix automaton, longest match (analysis.rivals.families.sa): the automaton against a brute-force
longest-earlier-suffix search, and its drafts and forwards worked by hand (issue 46 section 3). The forwards case
keeps each draft within the gold still to come, so it does not depend on whether the simulation crops a draft."""

import random

from analysis.rivals.families.sa import SuffixAutomaton
from analysis.rivals.forwards import speculative_forwards


def brute_force(tokens: list[int]) -> tuple[int, int] | None:
    """(draft start, match length): the longest suffix that ends earlier, at its first such end."""
    for length in range(len(tokens) - 1, 0, -1):
        suffix = tokens[-length:]
        for end in range(length - 1, len(tokens) - 1):
            if tokens[end - length + 1:end + 1] == suffix:
                return end + 1, length
    return None


def test_the_lookup_is_the_longest_earlier_suffix_at_its_first_occurrence():
    rng = random.Random(0)
    for _ in range(300):
        tokens = [rng.randrange(3) for _ in range(rng.randrange(1, 40))]
        automaton = SuffixAutomaton()
        for i, token in enumerate(tokens):
            automaton.extend([token])
            assert automaton.lookup() == brute_force(tokens[:i + 1]), tokens[:i + 1]


def test_drafts_by_hand():
    assert SuffixAutomaton([1, 2, 3, 1, 2]).draft(3) == [3, 1, 2]        # 1 2 first ends at 1
    assert SuffixAutomaton([1, 2, 1, 2, 1]).draft(None) == [2, 1]        # 1 2 1 (longest) first ends at 2
    assert SuffixAutomaton([5, 1, 9, 6, 1, 8, 7, 1]).draft(2) == [9, 6]  # only 1 recurs: its first occurrence
    assert SuffixAutomaton([1, 2, 3]).draft(4) == []                      # 3 never occurred before


def test_forwards():
    source = [1, 2, 3, 4, 1, 2]
    gold = [3, 4, 9, 9, 1, 2, 3, 4, 5, 6, 7]
    out = speculative_forwards(SuffixAutomaton(source), gold, 4)
    # 1) 1 2 first at 0: draft 3 4 1 2; 3 4 accepted, 9 corrects (q 5, emitted 3)
    # 2) 9 never earlier: decode 9
    # 3) 9 first at the output's 9: draft 9 (the context ends); 1 corrects (q 2, emitted 1)
    # 4) 9 1 never earlier; 1 first at 0: draft 2 3 4 1; 2 3 4 accepted, 5 corrects (q 5, emitted 4)
    # 5-6) 5 and 6 never earlier: decode 6 7
    assert out.new_tokens == [5, 1, 2, 5, 1, 1]
    assert out.emitted == [3, 1, 1, 4, 1, 1]
    assert out.prefill == [True, False, True, True, False, False]
