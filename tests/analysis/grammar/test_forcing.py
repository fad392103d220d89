"""The forcing check on hand-made cases with the Qwen2.5 tokenizer: ff-equal, short and non-canonical spans
are told apart, the walk's errors are named, and the per-corpus summary counts what the spans say."""

import pytest

from analysis.errors import GrammarError, ProgramError
from analysis.grammar.forcing import CaseCheck, SpanCheck, check_case, span_rows, summary
from analysis.grammar.llg import ll_tokenizer

EOS = 151643
SOURCE = "alpha = 1\nbar\nreturn x\n"


@pytest.fixture(scope="module")
def ll(qwen):
    return ll_tokenizer(qwen, (EOS,))


def spans(ll, qwen, source, program):
    check = check_case(ll, qwen, EOS, "T/1", "T", "body", source, program)
    return check, [(s.start, s.end, s.ff_equal, s.ff_short, s.non_canonical) for s in check.spans]


def test_a_copy_after_a_line_end_is_ff_equal_and_canonical(ll, qwen):
    check, rows = spans(ll, qwen, SOURCE, '<gen>y\n</gen><copy lines="3-3"/>')
    assert rows == [(3, 3, True, False, False)]
    tokens = len(qwen.encode_program("<gen>y\n</gen>").ids) + len(qwen.encode_program('<copy lines="3-3"/>').ids)
    assert len(check.mask_s) == tokens + 1 and check.compile_s > 0 and check.n_lines == 3  # + the EOS step


def test_a_copy_glued_to_the_text_before_it_is_a_non_canonical_edge(ll, qwen):
    # 'foo' + 'bar' is one token of the output ('x = foobar'), two in the layout
    _, rows = spans(ll, qwen, SOURCE, '<copy lines="1-1"/><gen>x = foo</gen><copy lines="2-3"/>')
    assert rows == [(1, 1, True, False, False), (2, 3, True, False, True)]


def test_a_span_without_a_final_newline_is_fast_forwarded_short(ll, qwen):
    # llguidance holds back the last token: '()' could be the start of a longer token
    check, rows = spans(ll, qwen, "x = f()", '<copy lines="1-1"/>')
    assert rows == [(1, 1, False, True, False)]
    assert check.spans[0].ff_tokens < check.spans[0].tokens


def test_forced_bytes_are_tokenized_with_the_directive_as_context(ll, qwen):
    # after '"/>' llguidance splits '@click' in two where the copied text alone is one token
    check, rows = spans(ll, qwen, "@click.command\ndef f():\n", '<copy lines="1-2"/>')
    assert rows == [(1, 2, False, False, True)] and check.spans[0].ff_tokens == check.spans[0].tokens + 1


def test_token_copies_and_bad_programs_are_named(ll, qwen):
    with pytest.raises(GrammarError, match="T/1: the forcing check takes line-level programs"):
        check_case(ll, qwen, EOS, "T/1", "T", "body", SOURCE, '<copy tokens="1-2"/>')
    with pytest.raises(ProgramError, match=r"T/1: op 0: copy lines 2-9 is out of range: the source has 3 lines"):
        check_case(ll, qwen, EOS, "T/1", "T", "body", SOURCE, '<copy lines="2-9"/>')
    with pytest.raises(ProgramError, match=r"T/1: malformed copy directive"):
        check_case(ll, qwen, EOS, "T/1", "T", "body", SOURCE, '<copy lines="x"/>')


def _check(corpus, spans_, compile_s=0.01, n_lines=5):
    return CaseCheck("C/1", corpus, "body", n_lines, compile_s, (1e-5, 2e-5), tuple(spans_))


def test_the_summary_counts_per_corpus_and_pooled():
    equal = SpanCheck(1, 2, 3, 3, True, False, False, 1e-4)
    short = SpanCheck(3, 3, 2, 1, False, True, False, 2e-4)
    glued = SpanCheck(4, 4, 2, 2, True, False, True, 3e-4)
    checks = [_check("A", [equal, short]), _check("A", [glued], n_lines=9), _check("B", [])]
    table = {r["corpus"]: r for r in summary(checks, ["A", "B"]).iter_rows(named=True)}
    assert list(table) == ["A", "B", "all"]
    a = table["A"]
    assert (a["cases"], a["copy_spans"], a["ff_equal"], a["ff_short"], a["non_canonical"], a["max_lines"]) == (2, 3, 2, 1, 1, 9)
    assert a["ff_equal_share"] == pytest.approx(2 / 3) and a["non_canonical_share"] == pytest.approx(1 / 3)
    assert a["mask_steps"] == 4 and a["mask_p50_us"] == pytest.approx(15.0) and a["compile_p50_ms"] == pytest.approx(10.0)
    assert table["B"]["copy_spans"] == 0 and table["B"]["ff_equal_share"] is None
    assert table["all"]["cases"] == 3 and table["all"]["copy_spans"] == 3
    rows = span_rows(checks)
    assert rows.height == 3 and rows["ff_equal"].to_list() == [True, False, True]
    assert span_rows([]).height == 0 and "non_canonical" in span_rows([]).columns


@pytest.mark.slow
def test_where_ff_is_the_layout_non_canonical_is_the_formats_stages_mismatch(ll, qwen):
    """The same definition computed by other code (analysis.coverage.formats.span_boundary_rows)."""
    from fixtures import toy_program_table

    from analysis.coverage.formats import span_boundary_rows
    from analysis.grammar.program import parse

    from analysis.grammar.resolver import resolve

    table = toy_program_table(qwen)
    rows = list(table.filter(table["level"] == "line").iter_rows(named=True))
    glued = '<copy lines="1-1"/><gen>x = foo</gen><copy lines="2-3"/>'
    rows.append({"case_id": "G/1", "corpus": "G", "framing": "body", "source": SOURCE, "program": glued,
                 "target": resolve(parse(glued), SOURCE)})
    verdicts = []
    for row in rows:
        check = check_case(ll, qwen, EOS, row["case_id"], row["corpus"], row["framing"], row["source"], row["program"])
        boundaries = span_boundary_rows(parse(row["program"]), qwen.encode(row["source"]), qwen.encode(row["target"]), qwen)
        for span, boundary in zip(check.spans, boundaries, strict=True):
            if span.ff_equal:
                assert span.non_canonical == boundary["mismatched"], row["case_id"]
                verdicts.append(span.non_canonical)
    assert len(verdicts) >= 4 and True in verdicts and False in verdicts
