import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.errors import ProgramError
from analysis.grammar.program import Copy, Gen, Program, escape, parse, render, unescape

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
        ("<gen>&lt;</gen>", "non-canonical escape '&lt;' inside a <gen> body at position 5"),
        ("<gen>a&lt;b</gen>", "position 6"),
        ("<gen>&lt;&lt;copy</gen>", "position 5"),
        ("<gen>&amp;</gen>", "non-canonical escape '&amp;'.*position 5"),
        ("<gen>x&amp;y</gen>", "position 6"),
        ("<gen>&amp;&lt;gen</gen>", "position 5"),
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


# Fragments that make the grammar's corner cases likely: tags, escapes, partial tags and digits.
FRAGMENTS = ["<gen>", "</gen>", "<copy lines=\"", "<copy tokens=\"", "\"/>", "-", "1", "2", "0", "12",
             "&lt;", "&amp;", "&", "<", "/", "lt;", "amp;", "copy", "gen", "/gen", "</gen", "<gen", "<copy",
             "a", " ", "\n", ">", ";", "é", "中"]
BODY = st.lists(st.sampled_from(FRAGMENTS[5:]), min_size=1, max_size=6).map("".join)
OP_TEXT = st.one_of(
    st.builds(lambda body: f"<gen>{body}</gen>", BODY),
    st.builds(lambda u, i, j: f'<copy {u}="{i}-{j}"/>', st.sampled_from(["lines", "tokens"]),
              st.sampled_from(["1", "2", "12", "0", "01"]), st.sampled_from(["1", "3", "0"])),
)
PROGRAM_LIKE = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join),
    st.lists(OP_TEXT, max_size=4).map("".join),  # whole ops, so that bodies are parsed often
)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(PROGRAM_LIKE)
def test_every_text_that_parses_has_one_spelling(text):
    try:
        program = parse(text)
    except ProgramError:
        return
    assert render(program) == text


def test_fragments_parse_often_enough_to_mean_something():
    import random

    rng = random.Random(0)
    texts = ["".join(f"<gen>{''.join(rng.choice(FRAGMENTS[5:]) for _ in range(rng.randrange(1, 6)))}</gen>"
                     for _ in range(rng.randrange(1, 4))) for _ in range(3000)]
    parsed = 0
    for text in texts:
        try:
            parse(text)
            parsed += 1
        except ProgramError:
            pass
    assert parsed > 150  # the spelling property above is exercised, not vacuous


@pytest.mark.parametrize("text", ["<gen><</gen>", "<gen>&</gen>", "<gen>&lt;copy</gen>", "<gen>&amp;lt;</gen>",
                                  "<gen>&&lt;gen</gen>", "<gen>a &lt;/gen></gen>", "<gen>&amp;amp;</gen>"])
def test_canonical_bodies_round_trip(text):
    assert render(parse(text)) == text
