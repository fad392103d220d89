"""llama.cpp's n-gram drafters as llama-server ships them (analysis.rivals.families.ngram_simple, ngram_mod): their
drafts and forwards worked by hand with small n (issue 46 section 3). Every forwards case keeps each draft within
the gold still to come, so it does not depend on whether the simulation crops a draft to it."""

import pytest
from fixtures import params_with

from analysis.errors import ParamsError
from analysis.rivals.families.ngram_mod import CHUNK, NgramMod
from analysis.rivals.families.ngram_simple import NgramSimple
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import stage_methods

# ---------------------------------------------------------------- ngram-simple


def test_simple_drafts_the_m_tokens_after_the_latest_earlier_ngram():
    # history 1..9 1 (10 tokens) + the sampled 2; pattern 1 2 occurs at 0 and at the end (skipped): draft from 2
    assert NgramSimple([1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2], size_n=2, size_m=4).draft() == [3, 4, 5, 6]
    # the latest occurrence wins: 1 2 at 0 and at 5 -> draft after 5
    assert NgramSimple([1, 2, 3, 4, 9, 1, 2, 7, 7, 7, 7, 5, 1, 2], size_n=2, size_m=4).draft() == [7, 7, 7, 7]
    # a budget cuts the m-gram
    assert NgramSimple([1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2], size_n=2, size_m=4).draft(3) == [3, 4, 5]


def test_simple_needs_a_long_history_and_n_tokens_after_the_match():
    # a history of 7 tokens is not longer than n + m + 1 = 7: no draft
    assert NgramSimple([2, 3, 4, 5, 1, 7, 1, 2], size_n=2, size_m=4).draft() == []
    # 1 2 at 8 is followed by a single history token (copy 1 < n = 2): no draft
    assert NgramSimple([5, 5, 5, 5, 5, 5, 5, 5, 1, 2, 1, 2], size_n=2, size_m=4).draft() == []
    # the same with two tokens after it: drafted
    assert NgramSimple([5, 5, 5, 5, 5, 5, 5, 1, 2, 8, 1, 2], size_n=2, size_m=4).draft() == [8, 1]


def test_simple_forwards():
    source = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2]
    gold = [3, 4, 5, 6, 60, 61, 62, 63, 64, 60, 61, 62, 63, 90, 91, 92, 93]
    out = speculative_forwards(NgramSimple(source, size_n=2, size_m=4), gold, 4)
    # 1) 1 2 at 0 -> draft 3 4 5 6, all accepted, 60 follows (q 5, emitted 5)
    # 2-7) tails 6 60, 60 61, 61 62, 62 63, 63 64, 64 60 occur only at the end: decode 61 62 63 64 60 61
    # 8) tail 60 61 at the output's 60 61 -> draft 62 63 64 60: 62 63 accepted, 90 corrects (q 5, emitted 3)
    # 9-11) decode 91 92 93
    assert out.new_tokens == [5, 1, 1, 1, 1, 1, 1, 5, 1, 1, 1]
    assert out.emitted == [5, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1]
    assert out.prefill == [True] + [False] * 6 + [True, False, False, False]


def test_simple_refuses_an_m_gram_shorter_than_its_n_gram():
    with pytest.raises(ParamsError, match=r"'rivals.ngram_simple.k' \[8\] is below size_n = 12"):
        stage_methods(params_with(**{"rivals.ngram_simple.k": [48, 8]}), "rivals")
    with pytest.raises(ParamsError, match="size_n"):
        stage_methods(params_with(**{"rivals.ngram_simple.size_n": 0}), "rivals")


# ---------------------------------------------------------------- ngram-mod


def test_mod_chains_the_pool_from_the_context_tail():
    # pool from the prompt 1 2 7 8 1 2: (1 2)->7 (latest wins), (2 7)->8, (7 8)->1, (8 1)->2; the chain from 1 2
    # runs 7 8 1 2 and stops at n_max 4
    assert NgramMod([1, 2, 7, 8, 1, 2], n_match=2, n_min=2, n_max=4).draft() == [7, 8, 1, 2]
    assert NgramMod([1, 2, 7, 8, 1, 2], n_match=2, n_min=2, n_max=4).draft(3) == [7, 8, 1]


def test_mod_keeps_a_chain_only_from_n_min_tokens_and_adds_output_in_chunks():
    drafter = NgramMod([1, 2, 3, 4], n_match=2, n_min=2, n_max=4)  # pool: (1 2)->3, (2 3)->4
    drafter.extend([7, 8, 1, 2])  # fewer than CHUNK new tokens: not in the pool yet
    assert drafter.draft() == [3, 4]  # (3 4) has no entry: the chain breaks at 2 = n_min, kept
    strict = NgramMod([1, 2, 3, 4], n_match=2, n_min=3, n_max=4)
    strict.extend([7, 8, 1, 2])
    assert strict.draft() == []  # broken before n_min: no draft
    early = NgramMod([1, 2, 3, 4], n_match=2, n_min=1, n_max=1)
    early.extend([5, 6, 7, 5, 6])
    assert early.draft() == []  # (5 6) -> 7 is output: not in the pool until more than CHUNK tokens arrived
    late = NgramMod([1, 2, 3, 4], n_match=2, n_min=1, n_max=1)
    late.extend([5, 6, 7] + [0] * (CHUNK - 1) + [5, 6])
    assert late.draft() == [7]  # the output's n-grams entered as one chunk


def test_mod_forwards():
    source = [1, 2, 3, 4, 5, 1, 2]
    gold = [3, 4, 9, 8, 7, 6]
    out = speculative_forwards(NgramMod(source, n_match=2, n_min=2, n_max=4), gold, 4)
    # 1) (1 2)->3 (2 3)->4 (3 4)->5 (4 5)->1: draft 3 4 5 1; 3 4 accepted, 9 corrects (q 5, emitted 3)
    # 2-4) tails 4 9, 9 8, 8 7 are not in the pool: decode 8 7 6
    assert out.new_tokens == [5, 1, 1, 1] and out.emitted == [3, 1, 1, 1]
    assert out.prefill == [True, False, False, False]


def test_mod_resets_its_pool_after_three_low_acceptance_rounds():
    drafter = NgramMod([0] * 30 + [1, 2, 3, 4, 1, 2], n_match=2, n_min=1, n_max=2)
    drafter.draft()
    drafter.extend([9, 1])  # 1 of 2 accepted: not low
    assert drafter.low == 0
    drafter.extend([2])  # a plain decode step: no draft, nothing counted
    for _ in range(2):
        assert drafter.draft() == [3, 4]
        drafter.extend([9])  # none of 2 accepted: a low round
        drafter.extend([1, 2])
    assert drafter.low == 2 and drafter.draft() == [3, 4]
    drafter.extend([9])  # the third low round in a row
    assert drafter.low == 0 and drafter.pool == {} and drafter.last == 0
    # refilled from the whole context at the next draft: the output's (2 9)->1 and (9 1)->2 are in it now, where
    # before the reset the output had not yet filled a chunk
    assert drafter.draft() == [1, 2]


def test_mod_settings_are_named():
    with pytest.raises(ParamsError, match="n_match"):
        stage_methods(params_with(**{"rivals.ngram_mod.n_match": -1}), "rivals")
    with pytest.raises(ParamsError, match="rivals.ngram_mod.k"):
        stage_methods(params_with(**{"rivals.ngram_mod.k": [64, 64]}), "rivals")
