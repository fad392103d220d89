"""The training/decoding sequence: prompt + program with copied text after each directive; the loss
covers exactly the directive, gen and EOS tokens."""

import pytest

from analysis.errors import ProgramError
from analysis.grammar.program import Copy, Gen, Program, render, render_op
from analysis.grammar.resolver import resolve
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, REWRITE_TEMPLATE, ModelTokenizer, prompt_ids
from kernels_profile.decode.sequence import IGNORE, program_sequence, rewrite_sequence


def supervised(sequence) -> list[bool]:
    """Where the training loss applies: the positions whose label is not IGNORE."""
    return [label != IGNORE for label in sequence.labels]


pytestmark = pytest.mark.model  # real tokenizers (Qwen's; SmolLM2's from its GGUF)

SOURCE = "def f(x):\n    y = x + 3\n    return y  # <gen> & &lt; done\n\nprint(f(1))\n"
PROGRAM = Program((Copy(1, 1), Gen("    y = x + 4\n"), Copy(3, 5), Gen("<|im_end|> &lt;gen\n")))


@pytest.fixture(scope="module", params=["qwen2.5-0.5b", "smollm2-135m"])
def tok(request):
    from kernels_profile.runtime.models import eos_ids, load_hf_tokenizer

    hf = load_hf_tokenizer(request.param)
    return ModelTokenizer.from_hf(hf, eos_ids(request.param, hf), request.param)


def test_loss_mask_covers_exactly_directive_gen_and_eos_tokens(tok):
    prompt = prompt_ids(tok, PROGRAM_TEMPLATE, SOURCE, "on line 2, change 3 to 4")
    seq = program_sequence(tok, prompt, PROGRAM, SOURCE)
    ids, mask, kinds = seq.ids, supervised(seq), seq.kinds
    assert len(ids) == len(mask) == len(kinds) == len(seq)
    assert ids[: len(prompt)] == prompt and seq.prompt_length == len(prompt)
    assert not any(mask[: len(prompt)])
    # the masked tokens spell the program text (tags included) and then EOS, nothing else
    masked = [t for t, m in zip(ids, mask) if m]
    assert masked[-1] == tok.eos_ids[0] and kinds[-1] == "eos"
    assert tok.decode_bytes(masked[:-1]).decode() == render(PROGRAM)
    # the unmasked tokens after the prompt spell exactly the copied text, in order
    copied = [t for t, m in zip(ids[len(prompt):], mask[len(prompt):]) if not m]
    expected = "".join(resolve(Program((op,)), SOURCE) for op in PROGRAM.copies)
    assert tok.decode_bytes(copied).decode() == expected
    # and each directive is followed directly by its own copied text
    pieces = list(seq.pieces)
    for k, piece in enumerate(pieces):
        if piece.kind == "directive":
            assert pieces[k + 1].kind == "copied"
            op = next(op for op in PROGRAM.copies if render_op(op) == tok.decode_bytes(piece.ids).decode())
            assert tok.decode_bytes(pieces[k + 1].ids).decode() == resolve(Program((op,)), SOURCE)
    assert seq.labels == [t if m else IGNORE for t, m in zip(ids, mask)]


def test_program_text_never_becomes_a_special_token(tok):
    seq = program_sequence(tok, [], PROGRAM, SOURCE, eos=False)
    added = set(tok.fsm_tokenizer.added_token_ids)
    assert not added & set(seq.ids)
    assert "eos" not in seq.kinds


def test_rewrite_layout_puts_the_whole_target_in_the_loss(tok):
    target = SOURCE.replace("x + 3", "x + 4")
    prompt = prompt_ids(tok, REWRITE_TEMPLATE, SOURCE, "on line 2, change 3 to 4")
    seq = rewrite_sequence(tok, prompt, target)
    masked = [t for t, m in zip(seq.ids, supervised(seq)) if m]
    assert tok.decode_bytes(masked[:-1]).decode() == target and masked[-1] == tok.eos_ids[0]
    assert not any(supervised(seq)[: len(prompt)])


def test_a_copy_out_of_range_is_refused(tok):
    with pytest.raises(ProgramError, match="out of range"):
        program_sequence(tok, [], Program((Copy(2, 9),)), SOURCE)
