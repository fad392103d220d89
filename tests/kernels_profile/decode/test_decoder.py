"""The Copy-as-Decode decoder on the tiny random model with a toy byte-level tokenizer."""

import pytest

torch = pytest.importorskip("torch")

from fixtures import scripted_lm, toy_model_tokenizer

from analysis.errors import CopyDecodeError
from analysis.grammar.program import Copy, Gen, Program, render
from analysis.grammar.resolver import resolve
from kernels_profile.decode.decoder import DecodeError, decode, decode_rewrite
from kernels_profile.decode.masks import MaskTable, MaskTables
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, REWRITE_TEMPLATE

SOURCE = "alpha = 1\nbeta = 2\ngamma = 3\ndelta = 4\n"
INSTRUCTION = "on line 2, change 2 to 5"
EOS = 256  # the byte-level toy's EOS (fixtures.ToyTokenizer.bytes_then)
toy = toy_model_tokenizer


def scripted(tiny, program):
    return scripted_lm(tiny, toy(), program, SOURCE, INSTRUCTION)


PROGRAM = Program((Copy(1, 1), Gen("beta = 5\n"), Copy(3, 4)))


def test_each_copy_is_one_prefill_forward_and_output_is_the_resolved_program(tiny):
    lm, tok, prompt, expected = scripted(tiny, PROGRAM)
    result = decode(lm, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=200)
    assert result.text == render(PROGRAM) and result.program == PROGRAM and result.stopped == "eos"
    assert result.output == resolve(PROGRAM, SOURCE) == "alpha = 1\nbeta = 5\ngamma = 3\ndelta = 4\n"
    # the model saw exactly the training layout (everything but the final EOS, which is never fed)
    assert list(result.sequence) == expected.ids[:-1]
    copies = [len(tok.encode(resolve(Program((op,)), SOURCE))) for op in PROGRAM.copies]
    calls = lm.model.calls
    assert calls[0] == len(prompt)
    # every other forward is one token, except one per copy: the directive's last token + the copied text
    assert sorted(c for c in calls[1:] if c > 1) == sorted(1 + n for n in copies)
    assert result.counts.copy_forwards == len(PROGRAM.copies) and result.counts.copied_tokens == sum(copies)
    program_tokens = len(render(PROGRAM).encode())
    assert result.counts.decode_forwards == program_tokens - len(PROGRAM.copies)
    assert len(calls) == 1 + result.counts.decode_forwards + result.counts.copy_forwards
    assert result.counts.program_tokens == program_tokens + 1  # + EOS
    t = result.timings
    assert t.total_s >= t.prompt_s + t.decode_s + t.copy_s + t.mask_s > 0 and t.copy_s > 0 and t.mask_s > 0


def test_a_decode_splits_its_source_into_lines_once(tiny, monkeypatch):
    """The source is one Source value for the whole decode (review round 6, item 10: split_lines ran five
    times a decode): the line count, the prompt's numbered lines and every copy's text read it."""
    from analysis.text import lines

    calls, expected = [], resolve(PROGRAM, SOURCE)
    split = lines.split_lines
    lm, tok, _, _ = scripted(tiny, PROGRAM)
    monkeypatch.setattr(lines, "split_lines", lambda text: calls.append(text) or split(text))
    result = decode(lm, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=200)
    assert result.output == expected and calls.count(SOURCE) == 1


def test_an_end_forced_by_the_budget_is_recorded_as_forced_not_as_the_model_stopping(tiny):
    # the script writes a gen span far longer than the budget: the walker's margin forces the end
    long = Program((Gen("beta = " + "5" * 200 + "\n"),))
    lm, tok, _, _ = scripted(tiny, long)
    result = decode(lm, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=40)
    assert result.stopped == "forced" and result.counts.program_tokens <= 40
    lm, tok, _, _ = scripted(tiny, PROGRAM)
    assert decode(lm, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=200).stopped == "eos"


def stepwise_logits(lm, sequence, prompt_length: int):
    """The last logits after prefilling the prompt and then feeding the rest one token at a time."""
    from transformers import DynamicCache

    from kernels_profile.runtime.models import cache_kwarg

    cache, kw = DynamicCache(config=lm.config), cache_kwarg(lm.model)
    with torch.inference_mode():
        out = lm.model(input_ids=torch.tensor([list(sequence[:prompt_length])]), use_cache=True, **{kw: cache})
        for token in sequence[prompt_length:]:
            out = lm.model(input_ids=torch.tensor([[token]]), use_cache=True, **{kw: cache})
    return out.logits[0, -1]


def test_decoder_is_lossless(tiny):
    """The decoder's final logits (copies prefilled) equal one-token steps over the same sequence, where
    its mask let tokens through (kernels_profile.measure.equivalence's criterion)."""
    from kernels_profile.measure.equivalence import compare_logits

    lm, tok, _, _ = scripted(tiny, PROGRAM)
    result = decode(lm, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=200)
    reference = stepwise_logits(lm, result.sequence, result.prompt_length)
    finite = torch.isfinite(result.final_logits)
    check = compare_logits(result.final_logits[finite][None], reference[finite][None], 1e-4)
    assert check.ok, check


def test_unscripted_greedy_decode_ends_in_a_whole_program_within_budget(tiny):
    tok = toy()
    masks = MaskTables(tok.fsm_tokenizer, (EOS,), 512)
    for budget in (40, 60):
        result = decode(tiny, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=budget, masks=masks)
        assert masks.table({"lines": 4}).computed  # the decode filled the shared table
        assert result.counts.program_tokens <= budget
        assert result.output == resolve(result.program, SOURCE)
        # the fed sequence after the prompt is the program with copied text after each directive
        fed = bytes(result.sequence[result.prompt_length:])
        assert len(fed) >= len(result.text.encode())


def test_a_token_may_not_close_a_directive_and_start_the_next_op(tiny):
    tok = toy()
    from analysis.grammar.fsm import ProgramFSM

    fsm = ProgramFSM(tok.fsm_tokenizer, {"lines": 4}, eos_ids=(EOS,))
    table = MaskTable(fsm, 512)
    walker = fsm.walker(budget=100)
    for byte in b'<copy lines="1-2':
        walker.advance(byte)
    assert fsm.mask(walker.state)[257] and fsm.mask(walker.state)[258]
    allowed = table.allowed(walker)
    assert not allowed[257] and allowed[258]
    mask, bias = table.mask(walker), table.bias(walker)
    assert mask.shape == bias.shape == (512,) and not bool(mask[300])  # ids past the tokenizer stay blocked
    assert torch.equal(torch.isfinite(bias), mask) and not bool(mask[257]) and bool(mask[258])


def test_bad_input_is_a_clear_error(tiny):
    tok = toy()
    with pytest.raises(DecodeError, match="case-x: the edit instruction is empty"):
        decode(tiny, tok, SOURCE, "  ", PROGRAM_TEMPLATE, budget=100, case="case-x")
    with pytest.raises(DecodeError, match=r"budget 10 tokens is too small .* margin of \d+"):
        decode(tiny, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=10)
    long_source = "x = 1\n" * 800
    with pytest.raises(DecodeError, match=r"exceeds tiny-qwen2's context of 4096 tokens"):
        decode(tiny, tok, long_source, INSTRUCTION, PROGRAM_TEMPLATE, budget=100)
    with pytest.raises(DecodeError, match="unit must be"):
        decode(tiny, tok, SOURCE, INSTRUCTION, PROGRAM_TEMPLATE, budget=100, unit="chars")
    assert issubclass(DecodeError, CopyDecodeError)


def test_rewrite_decoding_stops_at_the_budget_or_eos(tiny):
    tok = toy()
    _, seconds, tokens, stopped = decode_rewrite(tiny, tok, SOURCE, INSTRUCTION, REWRITE_TEMPLATE, budget=7)
    assert seconds > 0 and (stopped == "budget" and tokens == 7 or stopped == "eos" and tokens <= 7)
