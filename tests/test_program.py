import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import ProgramError
from analysis.program import Copy, Gen, Program, escape, parse, render, unescape

TAGGY = st.text(alphabet=st.sampled_from(list("<>&/;ltampgencopy \n\"=1-")), max_size=40)
ANY_TEXT = st.one_of(st.text(max_size=40), TAGGY)


def test_render_and_parse_example():
    program = Program((Copy(1, 12), Gen("    return sorted(xs)[::-1]\n"), Copy(14, 20)))
    text = render(program)
    assert text == '<copy lines="1-12"/><gen>    return sorted(xs)[::-1]\n</gen><copy lines="14-20"/>'
    assert parse(text) == program


def test_token_copies_render():
    assert render(Program((Copy(3, 9, "tokens"),))) == '<copy tokens="3-9"/>'


@pytest.mark.parametrize(
    "body, written",
    [
        ("a < b && c", "a < b && c"),  # plain code costs no escapes
        ("x</gen>y", "x&lt;/gen>y"),
        ("<copy lines=\"1-2\"/>", "&lt;copy lines=\"1-2\"/>"),
        ("<gen>", "&lt;gen>"),
        ("&lt;", "&amp;lt;"),
        ("&amp;", "&amp;amp;"),
        ("&</gen>", "&&lt;/gen>"),
    ],
)
def test_escape_cases(body, written):
    assert escape(body) == written
    assert unescape(written) == body
    assert parse(render(Program((Gen(body),)))) == Program((Gen(body),))


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('<copy lines="0-3"/>', "position 0"),
        ('<copy lines="01-3"/>', "malformed copy"),
        ('<copy lines="3"/>', "malformed copy"),
        ('<copy words="1-2"/>', "malformed copy"),
        ("<gen>abc", "never closed"),
        ("<gen></gen>", "empty <gen>"),
        ('<copy lines="1-2"/> ', "position 19"),
        ("hello", "position 0"),
        ("<gen>a<copy x</gen>", "unescaped"),
    ],
)
def test_parse_errors_name_the_position(text, fragment):
    with pytest.raises(ProgramError, match=fragment):
        parse(text)


def test_parse_accepts_inverted_span_syntax():
    # syntax only: whether a span fits is the resolver's business
    assert parse('<copy lines="5-2"/>') == Program((Copy(5, 2),))


ops = st.one_of(
    st.builds(Copy, st.integers(1, 10_000), st.integers(1, 10_000), st.sampled_from(["lines", "tokens"])),
    st.builds(Gen, ANY_TEXT.filter(bool)),
)


@given(st.lists(ops, max_size=8))
def test_parse_render_roundtrip(op_list):
    program = Program(tuple(op_list))
    assert parse(render(program)) == program


@given(ANY_TEXT)
def test_unescape_inverts_escape(text):
    assert unescape(escape(text)) == text


@given(st.lists(ops, max_size=6))
def test_render_parse_is_canonical(op_list):
    text = render(Program(tuple(op_list)))
    assert render(parse(text)) == text
