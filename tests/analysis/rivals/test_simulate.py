"""The rival simulation's forwards, counted by hand: gold-acceptance speculation, Copy-as-Decode's three
variants (directives decoded, forced ones jump-forwarded, free) and the decode-only methods."""

from analysis.coverage.spans import SpanRow
from analysis.rivals.forced import OpForcing
from analysis.rivals.families.pld import PromptLookup
from analysis.rivals.families.copy import copy_forwards
from analysis.rivals.forwards import decode_forwards, speculative_forwards


def test_prompt_lookup_with_gold_acceptance():
    # prompt 1 2 3 4 5, gold 1 2 3 9 4 5 (6 tokens), k = 4, earliest policy, bigram then unigram match
    gold = [1, 2, 3, 9, 4, 5]
    out = speculative_forwards(PromptLookup([1, 2, 3, 4, 5]), gold, 4)
    # 1) context ends 4 5: no earlier 5 -> empty draft: decode '1' (q 1, emitted 1)
    # 2) context ...5 1: unigram 1 at 0 -> draft 2 3 4 5 (4): accept 2 3, correct 9: q 5, emitted 3
    # 3) context ...3 9: nothing -> decode '4'
    # 4) context ...9 4: unigram 4 at 3 -> draft 5 1 2 3 (k = 4, the drafter does not know the gold ends after 5):
    #    the whole draft is verified, none of it accepted, 5 is the corrected token: q 5, emitted 1
    assert out.new_tokens == [1, 5, 1, 5]
    assert out.emitted == [1, 3, 1, 1]
    assert out.prefill == [False, True, False, True]
    assert sum(out.emitted) == len(gold)


def test_an_unbounded_draft_runs_to_the_end_of_the_context_not_of_the_gold():
    """Audit H1: the simulation cropped every draft to the gold tokens still to come (12,020 verify tokens per case
    for unbounded prompt lookup against 29,566 drafted to the end of the context, as transformers does). No drafter
    knows where the gold ends: the draft runs to the end of the context (the source and the output so far)."""
    gold = [1, 2, 3, 4, 5, 6]
    out = speculative_forwards(PromptLookup([0, 1, 2, 3, 4, 5, 6, 7, 8]), gold, None)
    # 1) context ends 7 8: no match -> decode 1;  2) ... 8 1: unigram 1 at 1 -> draft 2 3 4 5 6 7 8 1 (to the end of
    # the context, 8 tokens): 2 3 4 5 accepted, 6 the corrected (last) token: q 9, emitted 5
    assert out.new_tokens == [1, 9] and out.emitted == [1, 5]


def test_decode_only_methods():
    out = decode_forwards(3)
    assert (out.new_tokens, out.emitted, out.prefill) == ([1, 1, 1], [1, 1, 1], [False] * 3)


OPS = (SpanRow(0, "gen", 2, 0, 1, 6), SpanRow(1, "copy", 10, 11, 3, 10), SpanRow(2, "copy", 0, 0, 1, 10),
       SpanRow(3, "gen", 1, 0, 1, 6))
FORCING = (OpForcing((False, False, True, False, False, True)),
           OpForcing((False, False, True, True, False, False, True, False, False, True)),
           OpForcing((False, False, True, True) + (False,) * 6),
           OpForcing((False, False, True, False, False, True)))


def test_ideal_programs_pay_payloads_only():
    out = copy_forwards(OPS, FORCING, "ideal")
    # gen 2 tokens, the copy's prefill of 11 source tokens (10 gold), the empty copy has no forward, gen 1 token
    assert out.new_tokens == [1, 1, 11, 1] and out.emitted == [1, 1, 10, 1]
    assert out.prefill == [False, False, True, False]


def test_decoded_directives_come_first_and_emit_nothing():
    """Audit M1: a forward per token the program produces. The copy's tag is decoded but its last token rides with the
    copy's prefill (q = 11 source tokens + 1), as the suite's decoder does: 9 tag steps, not 10, for the copy that
    forwards tokens; the empty copy (no prefill) decodes its whole tag."""
    out = copy_forwards(OPS, FORCING, "decoded")
    assert len(out) == 6 + 2 + 9 + 1 + 10 + 6 + 1
    assert out.emitted[:8] == [0] * 6 + [1, 1] and out.new_tokens[16:18] == [1, 12]
    assert sum(out.emitted) == 2 + 10 + 0 + 1 and sum(q for q, p in zip(out.new_tokens, out.prefill) if not p) == 6 + 2 + 9 + 10 + 6 + 1


def test_jump_forwarded_tokens_join_the_next_forward():
    out = copy_forwards(OPS, FORCING, "jump")
    decoded = [sum(not f for f in forcing.flags) for forcing in FORCING]  # 4, 6, 8, 4
    assert len(out) == sum(decoded) + 2 + 1 + 1
    # op 0: `<` `gen` decoded, `>` forced joins the next decode (`/gen` part: `</` `gen` decoded, `>` forced)
    assert out.new_tokens[:4] == [1, 1, 2, 1]
    assert sum(out.new_tokens) == sum(op.directive_tokens for op in OPS) + 2 + 11 + 1
    assert sum(out.emitted) == 2 + 10 + 0 + 1
    # every forward that carries forced tokens is a prefill-type forward
    assert all(p for q, p in zip(out.new_tokens, out.prefill) if q > 1)
