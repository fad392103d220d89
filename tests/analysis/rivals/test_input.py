"""The input as the draft, re-aligned (analysis.rivals.families.input): its drafter and its forwards, worked by hand
(issue 46 section 3). Every case keeps each draft within the gold still to come, so the forwards do not depend on
whether the simulation crops a draft to it."""

import pytest
from fixtures import params_with

from analysis.errors import ParamsError
from analysis.rivals.families.input import InputDraft
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import stage_methods

SOURCE = [1, 2, 3, 4, 5, 6, 7, 8, 9]
GOLD = [1, 2, 3, 4, 99, 6, 7, 8, 9, 50, 51]  # 5 replaced by 99, then 50 51 appended


def test_the_whole_input_is_drafted_and_realigned_after_the_edit():
    out = speculative_forwards(InputDraft(SOURCE, resync_ngram=2), GOLD, None)
    # 1) aligned at 0: draft the whole input 1..9 (q 10); 1 2 3 4 accepted, 99 corrects 5: emitted 5, alignment lost at 4
    # 2) out of alignment: decode 6 (tail 99 6 is not in the input)
    # 3) decode 7: tail 6 7 occurs at input 5, after where it was lost: aligned at 7
    # 4) draft 8 9 (the rest of the input, q 3): both accepted, 50 follows: emitted 3; the input is used up
    # 5) decode 51
    assert out.new_tokens == [10, 1, 1, 3, 1]
    assert out.emitted == [5, 1, 1, 3, 1]
    assert out.prefill == [True, False, False, True, False]


def test_a_verify_window_caps_each_draft():
    out = speculative_forwards(InputDraft(SOURCE, resync_ngram=2), GOLD, 3)
    # 1) draft 1 2 3, all accepted, 4 follows (q 4, emitted 4); 2) draft 5 6 7: 5 rejected, 99 (q 4, emitted 1)
    # 3) decode 6; 4) decode 7, aligned at 7; 5) draft 8 9 (the input ends), both accepted, 50 (q 3, emitted 3)
    # 6) decode 51
    assert out.new_tokens == [4, 4, 1, 1, 3, 1]
    assert out.emitted == [4, 1, 1, 1, 3, 1]
    assert sum(out.emitted) == len(GOLD)


def test_realignment_only_looks_forward_from_where_it_was_lost():
    drafter = InputDraft([1, 2, 3, 4, 5, 1, 2, 9], resync_ngram=2)
    drafter.extend([1, 2, 3, 4, 5, 1, 7])  # the 7 replaces the input's 2 at position 6
    assert not drafter.aligned and drafter.lost_at == 6
    drafter.extend([1, 2])  # 1 2 occurs at 0 and 5, both before position 6: no re-alignment backwards
    assert drafter.draft(4) == []
    drafter.extend([9])  # 2 9 occurs at 6: aligned past the input's end
    assert drafter.aligned and drafter.position == 8 and drafter.draft(4) == []


def test_a_deletion_realigns_once_the_tail_recurs():
    drafter = InputDraft([1, 2, 3, 4, 5, 6, 7], resync_ngram=2)
    drafter.extend([1, 2, 5])  # 3 4 deleted
    assert not drafter.aligned  # tail 2 5 is not in the input
    drafter.extend([6])  # tail 5 6 at input 4: the next input token is 7
    assert drafter.draft(None) == [7]


@pytest.mark.parametrize("bad", [0, 65, True, 2.5])
def test_a_bad_resync_ngram_is_named(bad):
    with pytest.raises(ParamsError, match="resync_ngram"):
        stage_methods(params_with(**{"rivals.input.resync_ngram": bad}), "rivals")


def test_the_members_come_from_params():
    names = [m.name for m in stage_methods(params_with(**{"rivals.input.k": [16, 4]}), "rivals") if m.family == "input"]
    assert names == ["input-k4", "input-k16", "input-kinf"]
    with pytest.raises(ParamsError, match=r"rivals.input.k.*\(0 is out of range\)"):
        stage_methods(params_with(**{"rivals.input.k": [0]}), "rivals")
