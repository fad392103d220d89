"""The forcing check: llguidance under the forced-span grammar walks each program along the decoder's
layout; each span is judged ff-equal, ff-prefix, header-forced and for a non-canonical edge."""

import pytest
from fixtures import toy_program_table

from analysis.grammar.forcing import check_program
from analysis.grammar.llg import StepMasks, ll_tokenizer, suite_pieces
from analysis.grammar.program import parse

EOS = 151643
TWELVE = "".join(f"l{k}\n" for k in range(12))


@pytest.fixture(scope="module")
def setup(qwen):
    lltok = ll_tokenizer(qwen, (EOS,))
    return lltok, StepMasks(suite_pieces(qwen, (EOS,), lltok.vocab_size), lltok.vocab_size)


def check(setup, qwen, program, source):
    lltok, masks = setup
    return check_program(lltok, masks, qwen, program, source, EOS)


def test_every_toy_program_is_walked_and_each_span_fast_forwarded(setup, qwen):
    table = toy_program_table(qwen).filter(level="line")
    for row in table.iter_rows(named=True):
        result = check(setup, qwen, row["program"], row["source"])
        assert result.rejected is None and result.refused is None, row["case_id"]
        assert len(result.spans) == len(parse(row["program"]).copies)
        assert all(s.ff_equal and s.ff_prefix for s in result.spans), row["case_id"]
        written = sum(len(qwen.encode_program(t).ids) for t in _op_texts(row["program"]))
        assert len(result.mask_seconds) == written + 1  # every token the model writes, and EOS
        assert result.compile_seconds > 0


def _op_texts(program):
    from analysis.grammar.program import render_op

    return [render_op(op) for op in parse(program).ops]


def test_copies_out_of_order_are_walked_too(setup, qwen):
    result = check(setup, qwen, '<copy lines="3-3"/><copy lines="1-2"/><gen>four\n</gen>', "one\ntwo\nthree\n")
    assert result.rejected is None and [s.ff_equal for s in result.spans] == [True, True]


def test_a_span_opening_on_a_blank_line_has_a_non_canonical_edge(setup, qwen):
    # '"/>' + '\n' is one pre-token for Qwen2.5: a free decode would merge across the directive's end
    (span,) = check(setup, qwen, '<copy lines="2-3"/>', "a = 1\n\nb = 2\n").spans
    assert span.noncanonical_edge and span.ff_equal


def test_a_span_whose_last_token_may_merge_is_held_back(setup, qwen):
    (span,) = check(setup, qwen, '<copy lines="1-2"/>', "a\nExpress.start()").spans
    assert span.ff_prefix and not span.ff_equal and span.ff_tokens == span.tokens - 1


def test_a_span_tokenized_apart_differs_from_its_tokens_in_context(setup, qwen):
    # '@click' is one token alone, but after '"/>' the pre-tokenizer splits '"/>@' from 'click'
    (span,) = check(setup, qwen, '<copy lines="1-2"/>', "@click.x\nb\n").spans
    assert not span.ff_equal and not span.ff_prefix


def test_the_close_is_forced_once_the_end_line_is_unambiguous(setup, qwen):
    first, second = check(setup, qwen, '<copy lines="3-5"/><copy lines="1-1"/>', TWELVE).spans
    assert first.header_forced  # after '5' no digit can follow in a 12-line source
    assert not second.header_forced  # after '1' the end line may still be 10, 11 or 12


def test_a_program_the_grammar_does_not_take_is_rejected_with_its_place(setup, qwen):
    result = check(setup, qwen, '<copy lines="2-13"/>', TWELVE)
    assert result.rejected.startswith("op 0: token") and not result.spans
