"""The decoder under llguidance's matcher (decode.mask_engine: llguidance) writes what the suite engine
writes: the same program, the same ids fed to the model, the same forwards (each copy one prefill), on
scripted programs and on the random tiny model's own greedy choices; the layout rule and the budget hold."""

import pytest

torch = pytest.importorskip("torch")

from fixtures import scripted_lm, toy_model_tokenizer  # noqa: E402

from analysis.grammar.program import Copy, Gen, Program, render  # noqa: E402
from kernels_profile.decode.decoder import DecodeError, decode  # noqa: E402
from kernels_profile.decode.llg_engine import LlgVocabulary  # noqa: E402
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE  # noqa: E402

SOURCE = "alpha = 1\nbeta = 2\ngamma = 3\ndelta = 4\n" + "".join(f"x{k} = {k}\n" for k in range(5, 13)) + "end"
INSTRUCTION = "on line 2, change 2 to 5"
PROGRAMS = [
    Program((Copy(1, 1), Gen("beta = 5\n"), Copy(3, 13))),      # the last line has no newline
    Program((Gen("a < b && c &lt;gen\n"), Copy(10, 12))),       # escapes; an end line read in two digits
    Program((Copy(12, 12), Copy(1, 3))),                         # out of order
    Program((Gen("beta = " + "5" * 200 + "\n"),)),               # longer than the budget: the end is forced
]


@pytest.fixture(scope="module")
def vocab():
    return LlgVocabulary.build(toy_model_tokenizer(), 512)


def both(lm, tok, vocab, budget, source=SOURCE):
    suite = decode(lm, tok, source, INSTRUCTION, PROGRAM_TEMPLATE, budget=budget)
    calls = list(getattr(lm.model, "calls", []))
    if hasattr(lm.model, "calls"):
        lm.model.calls.clear()
    llg = decode(lm, tok, source, INSTRUCTION, PROGRAM_TEMPLATE, budget=budget, mask_engine="llguidance", llg=vocab)
    return suite, llg, calls


@pytest.mark.parametrize("index", range(len(PROGRAMS)))
def test_scripted_programs_decode_identically_on_both_engines(tiny, vocab, index):
    lm, tok, _, expected = scripted_lm(tiny, toy_model_tokenizer(), PROGRAMS[index], SOURCE, INSTRUCTION)
    suite, llg, suite_calls = both(lm, tok, vocab, budget=60 if index == 3 else 200)
    assert llg.text == suite.text and llg.output == suite.output and llg.stopped == suite.stopped
    assert llg.sequence == suite.sequence and lm.model.calls == suite_calls  # same ids, same forwards
    assert llg.counts.copy_forwards == suite.counts.copy_forwards
    assert llg.counts.copied_tokens == suite.counts.copied_tokens
    if index < 3:
        assert suite.text == render(PROGRAMS[index]) and suite.stopped == "eos"
        assert list(suite.sequence) == expected.ids[:-1]
    else:
        assert suite.stopped == "forced"


@pytest.mark.parametrize("budget", [30, 45, 80])
def test_the_random_models_own_choices_are_the_same_on_both_engines(tiny, vocab, budget):
    tok = toy_model_tokenizer()
    suite, llg, _ = both(tiny, tok, vocab, budget)
    assert llg.text == suite.text and llg.sequence == suite.sequence and llg.stopped == suite.stopped
    assert llg.counts.program_tokens <= budget


def test_each_step_computes_a_mask_and_the_copy_is_one_prefill(tiny, vocab):
    lm, tok, _, _ = scripted_lm(tiny, toy_model_tokenizer(), PROGRAMS[0], SOURCE, INSTRUCTION)
    result = decode(lm, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=200, mask_engine="llguidance", llg=vocab)
    assert result.counts.masks_computed == result.counts.program_tokens
    assert result.counts.copy_forwards == 2 and result.timings.mask_s > 0


def test_the_llguidance_engine_copies_lines_only_and_unknown_engines_are_named(tiny, vocab):
    tok = toy_model_tokenizer()
    with pytest.raises(DecodeError, match="copies lines"):
        decode(tiny, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=60, unit="tokens", mask_engine="llguidance")
    with pytest.raises(DecodeError, match="mask engine must be one of suite, llguidance"):
        decode(tiny, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=60, mask_engine="xgrammar")


@pytest.mark.model
@pytest.mark.slow
def test_the_decode_stages_case_decodes_byte_identically_under_llguidance(hep_dir):
    """The decode stage's own case, model, weights and budget (params.yaml decode), and a second case whose
    end the budget forces: the two engines write the same program and feed the model the same ids."""
    from fixtures import params_with

    from analysis.corpora.humanevalpack import hevalfix_cases, load_humanevalpack
    from kernels_profile.decode.decoder import load_for_decoding
    from kernels_profile.runtime.hf import TEMPLATES
    from kernels_profile.stages.decode import settings

    s = settings(params_with())
    language = "python" if s.case_id.startswith("HEvalFix-Py/") else "js"
    records, _ = load_humanevalpack(language, hep_dir, "local")
    cases = {c.case_id: c for c in hevalfix_cases(records, language, [s.framing])}
    lm, tok = load_for_decoding(s.model, s.weights, s.dtype, "cpu")
    llg = LlgVocabulary.build(tok, int(lm.model.get_input_embeddings().weight.shape[0]))
    for case_id, budget in ((s.case_id, s.budget), ("HEvalFix-Py/1", 48)):
        case = cases[case_id]
        suite = decode(lm, tok, case.source, case.instruction, TEMPLATES[s.template], budget, unit=s.unit)
        other = decode(lm, tok, case.source, case.instruction, TEMPLATES[s.template], budget, unit=s.unit,
                       mask_engine="llguidance", llg=llg)
        assert other.text == suite.text and other.output == suite.output, case_id
        assert other.sequence == suite.sequence and other.stopped == suite.stopped, case_id
