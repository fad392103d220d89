"""Prompt lookup's drafter on hand-made token sequences, drafts counted by hand."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import ParamsError
from analysis.rivals.families.pld import MAX_NGRAM, MIN_NGRAM, PromptLookup


def test_transformers_defaults():
    # generation/utils.py: max_matching_ngram_size or 2; the n loop runs down to 1
    assert (MAX_NGRAM, MIN_NGRAM) == (2, 1)


def test_earliest_takes_the_first_occurrence_of_the_trailing_bigram():
    # (1, 2) starts at 0, 3 and 6 (the tail itself): the first is 0, the draft what follows it
    lookup = PromptLookup([1, 2, 3, 1, 2, 4, 1, 2])
    assert lookup.match() == (2, 0)
    assert lookup.draft(2) == [3, 1]
    assert lookup.draft(None) == [3, 1, 2, 4, 1, 2]  # to the end of the context


def test_latest_takes_the_nearest_earlier_occurrence():
    lookup = PromptLookup([1, 2, 3, 1, 2, 4, 1, 2], policy="latest")
    assert lookup.match() == (2, 3)
    assert lookup.draft(2) == [4, 1]
    assert lookup.draft(None) == [4, 1, 2]


def test_falls_back_to_the_unigram_when_the_bigram_is_new():
    # (7, 6) occurs only as the tail; 6 occurs at 1 and 3 (the tail): draft after position 1
    assert PromptLookup([5, 6, 7, 6]).draft(10) == [7, 6]


def test_no_match_gives_an_empty_draft():
    assert PromptLookup([1, 2, 3]).draft(5) == []
    assert PromptLookup([4]).draft(5) == []
    assert PromptLookup([]).draft(5) == []


def test_online_extension_finds_matches_in_the_output():
    lookup = PromptLookup([10, 11, 12])
    assert lookup.draft(4) == []
    lookup.extend([10])          # context 10 11 12 10: unigram 10 matches at 0
    assert lookup.draft(4) == [11, 12, 10]
    lookup.extend([11])          # bigram (10, 11) at 0
    assert lookup.match() == (2, 0)
    assert lookup.draft(1) == [12]


def test_min_ngram_two_refuses_unigram_matches():
    assert PromptLookup([5, 6, 7, 6], min_ngram=2).draft(3) == []


def test_bad_settings_are_named():
    with pytest.raises(ParamsError, match="policy"):
        PromptLookup([1], policy="first")
    with pytest.raises(ParamsError, match="n-gram"):
        PromptLookup([1], max_ngram=0)
    with pytest.raises(ParamsError, match="budget"):
        PromptLookup([1, 1]).draft(-1)


def _reference(context, k, policy, max_ngram=2):
    """transformers' loop, written out: n from max down to 1, windows left to right."""
    for n in range(min(max_ngram, len(context) - 1), 0, -1):
        tail = context[-n:]
        starts = [i for i in range(len(context) - n + 1) if context[i:i + n] == tail]
        starts = [i for i in starts if i + n < len(context)]
        if starts:
            start = starts[0] if policy == "earliest" else starts[-1]
            end = len(context) if k is None else min(start + n + k, len(context))
            return context[start + n:end]
    return []


@given(st.lists(st.integers(0, 3), max_size=30), st.lists(st.integers(0, 3), max_size=10),
       st.sampled_from([None, 1, 3, 7]), st.sampled_from(["earliest", "latest"]))
def test_same_drafts_as_the_transformers_loop(prompt, more, k, policy):
    lookup = PromptLookup(prompt, policy=policy)
    context = list(prompt)
    for token in [None, *more]:
        if token is not None:
            lookup.extend([token])
            context.append(token)
        assert lookup.draft(k) == _reference(context, k, policy)
