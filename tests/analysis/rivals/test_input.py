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


def test_ahead_realigns_only_forward_from_where_it_was_lost():
    drafter = InputDraft([1, 2, 3, 4, 5, 1, 2, 9], resync_ngram=2, realign="ahead")
    drafter.extend([1, 2, 3, 4, 5, 1, 7])  # the 7 replaces the input's 2 at position 6
    assert not drafter.aligned and drafter.lost_at == 6
    drafter.extend([1, 2])  # 1 2 occurs at 0 and 5, both before position 6: no re-alignment backwards
    assert drafter.draft(4) == []
    drafter.extend([9])  # 2 9 occurs at 6: aligned past the input's end
    assert drafter.aligned and drafter.position == 8 and drafter.draft(4) == []


def test_anywhere_prefers_ahead_and_else_takes_the_latest_occurrence_before():
    drafter = InputDraft([1, 2, 3, 4, 5, 1, 2, 9], resync_ngram=2, realign="anywhere")
    drafter.extend([1, 2, 3, 4, 5, 1, 7])
    drafter.extend([1, 2])  # 1 2 at 0 and 5, none at or after 6: the latest before, 5 -> aligned at 7
    assert drafter.position == 7 and drafter.draft(4) == [9]
    ahead = InputDraft([1, 2, 3, 1, 2, 8, 9], resync_ngram=2, realign="anywhere")
    ahead.extend([1, 7, 1, 2])  # lost at 1; 1 2 at 0 and 3: the first at or after 1 wins
    assert ahead.position == 5 and ahead.draft(None) == [8, 9]


def test_a_false_match_ahead_strands_ahead_and_not_anywhere():
    source = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20, 21, 22, 13]
    output = [1, 2, 3, 20, 21, 4, 5, 6]  # 20 21 inserted: its tail recurs at input 12, ahead of the truth
    for realign, expected in (("ahead", []), ("anywhere", [7, 8])):
        drafter = InputDraft(source, resync_ngram=2, realign=realign)
        drafter.extend(output[:5])  # lost at 3; tail 20 21 -> aligned at 14 (false)
        assert drafter.draft(2) == [22, 13]
        drafter.extend([4])  # rejected: lost at 14
        drafter.extend([5, 6])  # tail 5 6: at input 4, behind 14
        assert drafter.draft(2) == expected, realign


def test_a_deletion_realigns_once_the_tail_recurs():
    drafter = InputDraft([1, 2, 3, 4, 5, 6, 7], resync_ngram=2)
    drafter.extend([1, 2, 5])  # 3 4 deleted
    assert not drafter.aligned  # tail 2 5 is not in the input
    drafter.extend([6])  # tail 5 6 at input 4: the next input token is 7
    assert drafter.draft(None) == [7]


@pytest.mark.parametrize("key, bad", [("resync_ngram", 0), ("resync_ngram", 65), ("resync_ngram", True),
                                      ("resync_ngram", 2.5), ("realign", "backwards")])
def test_a_bad_setting_is_named(key, bad):
    with pytest.raises(ParamsError, match=key):
        stage_methods(params_with(**{f"rivals.input.{key}": bad}), "rivals")


def test_the_members_come_from_params():
    names = [m.name for m in stage_methods(params_with(**{"rivals.input.k": [16, 4]}), "rivals") if m.family == "input"]
    assert names == ["input-k4", "input-k16", "input-kinf"]
    with pytest.raises(ParamsError, match=r"rivals.input.k.*\(0 is out of range\)"):
        stage_methods(params_with(**{"rivals.input.k": [0]}), "rivals")
