"""Suffix decoding's drafter on hand-made token sequences, paths and probabilities worked by hand, and
against a brute-force count of substrings (what a suffix tree's node counts are)."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import ParamsError
from analysis.rivals.families.suffix import (
    DEFAULTS,
    ResponseCache,
    SuffixDecoder,
)


def test_arctic_defaults():
    assert (DEFAULTS.max_tree_depth, DEFAULTS.max_spec_factor, DEFAULTS.max_spec_offset,
            DEFAULTS.min_token_prob) == (64, 1.0, 0.0, 0.1)


def test_a_path_from_the_longest_match():
    # context 1 2 3 1 2: the pattern (1, 2) occurs twice (at 0 and as the tail); 3 follows once:
    # p = 1/2, then 1 follows (3) in its one occurrence: p stays 1/2; two tokens (m = 2, factor 1.0)
    draft = SuffixDecoder([1, 2, 3, 1, 2]).speculate(None)
    assert draft.tokens == (3, 1)
    assert draft.score == pytest.approx(1.0)
    assert draft.match_len == 2


def test_the_spec_factor_caps_a_draft_at_the_match_length():
    # 7 8 9 10 11 ... 7 8: the match (7, 8) is 2 long, so 2 tokens though 9 10 11 follow uniquely
    draft = SuffixDecoder([7, 8, 9, 10, 11, 12, 7, 8]).speculate(None)
    assert draft.tokens == (9, 10)
    assert SuffixDecoder([7, 8, 9, 10, 11, 12, 7, 8], replace(DEFAULTS, max_spec_offset=2)).draft(None) == [9, 10, 11, 12]
    assert SuffixDecoder([7, 8, 9, 10, 11, 12, 7, 8]).draft(1) == [9]  # and at k


def test_min_token_prob_is_inclusive_at_one_in_ten():
    # 99 occurs 9 times before the tail, each time followed by another token: 1/10 = 0.1 >= 0.1;
    # ties go to the continuation seen first (1)
    context = [t for i in range(1, 10) for t in (99, i)] + [99]
    draft = SuffixDecoder(context).speculate(None)
    assert draft.tokens == (1,)
    assert draft.score == pytest.approx(0.1)
    # ten earlier occurrences: 1/11 < 0.1, no draft
    context = [t for i in range(1, 11) for t in (99, i)] + [99]
    assert SuffixDecoder(context).draft(None) == []


def test_the_majority_continuation_wins():
    # only the unigram 5 recurs; it is followed by 6 twice and by 7 once, and is the tail: 6 with p = 2/4
    draft = SuffixDecoder([5, 6, 8, 5, 7, 9, 5, 6, 10, 5]).speculate(None)
    assert (draft.tokens, draft.score, draft.match_len) == ((6,), 0.5, 1)


def test_a_longer_match_beats_the_majority():
    # (5, 6, 5) recurs once: its path 7 5 6 (p = 1/2 each, score 1.5) beats the unigram's majority 6
    draft = SuffixDecoder([5, 6, 5, 7, 5, 6, 5]).speculate(None)
    assert (draft.tokens, draft.score, draft.match_len) == ((7, 5, 6), 1.5, 3)


def test_the_tree_depth_bounds_pattern_and_path():
    # depth 3 (offset 10 lifts the factor's cap): the match (2) leaves 3 - 1 = 2 tokens of path, 3 4 at
    # p = 1/2 each (score 1.0); the match (1, 2) leaves 1, 3 (score 0.5): the unigram's path wins
    settings = replace(DEFAULTS, max_tree_depth=3, max_spec_offset=10)
    draft = SuffixDecoder([1, 2, 3, 4, 5, 6, 1, 2], settings).speculate(None)
    assert (draft.tokens, draft.match_len) == ((3, 4), 1)


def test_online_output_is_searched():
    decoder = SuffixDecoder([1, 2, 3])
    assert decoder.draft(None) == []
    decoder.extend([1, 2])
    assert decoder.draft(None) == [3, 1]
    assert decoder.output == [1, 2]


def test_response_cache_drafts_from_earlier_outputs():
    cache = ResponseCache()
    first = SuffixDecoder([50], cache=cache)
    first.extend([40, 41, 42, 43])
    first.finish()
    second = SuffixDecoder([40, 41], cache=cache)  # its own text has no earlier (40, 41)
    assert second.draft(None) == [42, 43]
    assert SuffixDecoder([40, 41]).draft(None) == []  # no cache: nothing to draft from


def test_bad_settings_are_named():
    with pytest.raises(ParamsError, match="max_tree_depth"):
        SuffixDecoder([1], replace(DEFAULTS, max_tree_depth=0))
    with pytest.raises(ParamsError, match="min_token_prob"):
        SuffixDecoder([1], replace(DEFAULTS, min_token_prob=2))


def _count(seq, s):
    return sum(1 for i in range(len(seq) - len(s) + 1) if seq[i:i + len(s)] == s)


def _reference(context, k, depth=64, factor=1.0, min_prob=0.1):
    """The tree's semantics by brute force: node count = occurrences of its string."""
    best, best_score = [], np.float32(0)
    for m in range(min(depth, len(context)), 0, -1):
        pattern = context[-m:]
        limit = min(int(m * factor + 1e-6), depth - m, *(() if k is None else (k,)))
        path, prob, score = list(pattern), np.float32(1), np.float32(0)
        out = []
        while len(out) < limit:
            count = _count(context, path)
            options = {}
            for i in range(len(context) - len(path)):
                if context[i:i + len(path)] == path:
                    options.setdefault(context[i + len(path)], i + len(path))
            if not options:
                break
            token = max(options, key=lambda t: (_count(context, path + [t]), -options[t]))
            step = np.float32(prob * (np.float32(_count(context, path + [token])) / np.float32(count)))
            if step < np.float32(min_prob):
                break
            prob = step
            score = np.float32(score + prob)
            out.append(token)
            path.append(token)
        if score > best_score:
            best, best_score = out, score
    return best


@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.sampled_from([None, 2, 5]))
def test_same_drafts_as_brute_force_counting(context, k):
    assert SuffixDecoder(context).draft(k) == _reference(context, k)


@given(st.lists(st.integers(0, 2), min_size=1, max_size=30))
def test_small_depth_against_brute_force(context):
    settings = replace(DEFAULTS, max_tree_depth=5)
    assert SuffixDecoder(context, settings).draft(None) == _reference(context, None, depth=5)
