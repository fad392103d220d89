"""Copy-as-Decode with prompt lookup in its gen spans (analysis.rivals.families.copy_pld): its forwards worked by
hand on a program of two copies and two gen spans (issue 46 section 3). Every draft stays within its gen span's
tokens still to come, so the forwards do not depend on whether the simulation crops a draft."""

import polars as pl
from fixtures import params_with

from analysis.coverage.spans import SpanRow
from analysis.rivals.families import copy as program
from analysis.rivals.families.copy import copy_forwards
from analysis.rivals.families.copy_pld import HYBRID_DIRECTIVES, GenDrafts
from analysis.rivals.families.pld import PromptLookup
from analysis.rivals.forced import OpForcing
from analysis.rivals.methods import Method, stage_methods
from analysis.rivals.settings import draft_settings
from analysis.rivals.simulate import CaseInput, SimulationEnv, method_forwards

SOURCE = [10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24]
# copy 10..15; gen 20 21 22 99 98 (a near-copy of the source's 20..23); copy 23 24; gen 10 11 12 77 78
GOLD = [10, 11, 12, 13, 14, 15, 20, 21, 22, 99, 98, 23, 24, 10, 11, 12, 77, 78]
OPS = (SpanRow(0, "copy", 6, 6, 1, 2), SpanRow(1, "gen", 5, 0, 1, 3), SpanRow(2, "copy", 2, 2, 1, 2),
       SpanRow(3, "gen", 5, 0, 1, 3))
FORCING = (OpForcing((False, True)), OpForcing((False, False, True)), OpForcing((True, True)),
           OpForcing((False, False, True)))


def hybrid(directives: str, k: int = 4):
    drafter = PromptLookup(SOURCE, policy="earliest", max_ngram=2)
    return copy_forwards(OPS, FORCING, directives, gen=GenDrafts(drafter, GOLD, k))


def test_gen_spans_are_drafted_from_the_source_and_the_resolved_output():
    out = hybrid("decoded")
    # op 0: 1 directive step, the copy's prefill of 6 tokens with the tag's last token (q 7: a forward per token the
    #       program produces, as Copy-as-Decode's own copies)
    # op 1: 3 directive steps; context ends 14 15 (the copy's text): at 4 in the source -> draft 20 21 22 23;
    #       20 21 22 accepted, 99 corrects (q 5, emitted 4); then 22 99 / 99 unseen: decode 98
    # op 2: 1 directive step, the copy's prefill of 2 with the tag's last token (q 3)
    # op 3: 3 directive steps; context ends 23 24 (the copy's text): at 9 in the source, after which come the
    #       output's first tokens -> draft 10 11 12 13; 10 11 12 accepted, 77 corrects (q 5, emitted 4); decode 78
    assert out.new_tokens == [1, 7, 1, 1, 1, 5, 1, 1, 3, 1, 1, 1, 5, 1]
    assert out.emitted == [0, 6, 0, 0, 0, 4, 1, 0, 2, 0, 0, 0, 4, 1]
    assert out.prefill == [False, True, False, False, False, True, False, False, True,
                           False, False, False, True, False]


def test_forced_directive_tokens_ride_with_the_next_forward_a_verify_included():
    out = hybrid("jump")
    # op 0: `<`..: 1 decoded, 1 forced into the copy (q 7); op 1: 2 decoded, 1 forced into the first verify (q 6);
    # op 2: both forced into the copy (q 4); op 3: 2 decoded, 1 forced into the first verify (q 6)
    assert out.new_tokens == [1, 7, 1, 1, 6, 1, 4, 1, 1, 6, 1]
    assert out.emitted == [0, 6, 0, 0, 4, 1, 2, 0, 0, 4, 1]
    assert out.prefill == [False, True, False, False, True, False, True, False, False, True, False]


def test_it_takes_copy_as_decode_s_copies_and_fewer_forwards_for_its_gen_spans():
    plain = copy_forwards(OPS, FORCING, "decoded")
    assert sum(plain.emitted) == sum(hybrid("decoded").emitted) == len(GOLD)
    assert len(plain) - len(hybrid("decoded")) == 6  # each gen span: 2 forwards instead of 5 decode steps
    one = copy_forwards(OPS, FORCING, "decoded", gen=GenDrafts(PromptLookup(SOURCE), GOLD, 1))
    assert len(one) == len(plain) - 4  # k = 1: a verify of 2 tokens accepts at most 1 draft token


def test_the_family_runs_the_case_program_with_the_shared_prompt_lookup_settings():
    case = CaseInput("T/1", "T", "body", "", "", tuple(SOURCE), tuple(GOLD), 70, 90, {"line": (OPS, FORCING)})
    drafts = draft_settings(params_with(), "rivals")
    out = method_forwards(Method("copy-pld", level="line", directives="decoded", k=4), case, drafts,
                          SimulationEnv(None, 3))
    assert out.new_tokens == hybrid("decoded").new_tokens and out.emitted == hybrid("decoded").emitted


def test_its_directive_modes_are_copy_as_decode_s_and_its_members_come_from_params():
    assert HYBRID_DIRECTIVES == (program.DECODED, program.JUMP)
    names = [m.name for m in stage_methods(params_with(**{"rivals.copy_pld.levels": ["line"],
                                                          "rivals.copy_pld.k": [8]}), "rivals")
             if m.family == "copy-pld"]
    assert names == ["copy-pld-line-decoded-k8", "copy-pld-line-jump-k8"]
    assert Method("copy-pld", level="line", directives="jump", k=8).role == "hybrid"


def test_the_hybrid_is_on_neither_side_of_the_decision():
    """Half prompt lookup: as Copy-as-Decode's best it would let prompt lookup decide the head-to-head."""
    from analysis.rivals.table import fastest

    seconds = {"ar": 8.0, "copy-line-decoded": 4.0, "pld-earliest-k8": 2.0, "copy-pld-line-decoded-k64": 1.0}
    roles = {"ar": "baseline", "copy-line-decoded": "copy", "pld-earliest-k8": "rival",
             "copy-pld-line-decoded-k64": "hybrid"}
    ks = {"pld-earliest-k8": 8, "copy-pld-line-decoded-k64": 64}
    table = pl.DataFrame([{"kernel_source": "s", "corpus": "c", "pool": "corpus", "method": m, "family": m[:4],
                           "role": roles[m], "label": m, "k": ks.get(m), "n_cases": 2, "speedup": seconds["ar"] / t}
                          for m, t in seconds.items()], schema_overrides={"k": pl.Int64})
    percase = pl.DataFrame([{"kernel_source": "s", "corpus": "c", "case_id": f"c/{i}", "method": m, "seconds": t}
                            for m, t in seconds.items() for i in range(2)])
    row = fastest(table, percase, resamples=50, seed=0, ci=0.95, k_max=64).row(0, named=True)
    assert (row["fastest"], row["best_copy"], row["best_rival"]) == ("pld-earliest-k8", "copy-line-decoded",
                                                                     "pld-earliest-k8")
