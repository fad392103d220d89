import pytest

from analysis.errors import ProgramError
from analysis.grammar.program import Copy, Gen, Program
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines

SOURCE = "a\nb\nc\nd"


def test_split_lines_rules():
    assert split_lines("") == []
    assert split_lines("a\n") == ["a\n"]
    assert split_lines("a\r\nb") == ["a\r\n", "b"]
    assert split_lines("a\rb\u2028c\n\n") == ["a\rb\u2028c\n", "\n"]


def test_resolve_lines():
    program = Program((Copy(1, 2), Gen("X\n"), Copy(4, 4), Copy(1, 1)))
    assert resolve(program, SOURCE) == "a\nb\nX\nda\n"


@pytest.mark.parametrize(
    "op, fragment",
    [
        (Copy(3, 2), "op 1: copy lines 3-2 is inverted"),
        (Copy(0, 2), "op 1: copy lines 0-2 has a non-positive bound"),
        (Copy(2, 5), "op 1: copy lines 2-5 is out of range: the source has 4 lines"),
        (Copy(1, 1, "tokens"), "op 1: a token copy needs"),
    ],
)
def test_bad_spans_are_errors_never_clipped(op, fragment):
    with pytest.raises(ProgramError, match=fragment):
        resolve(Program((Gen("x"), op)), SOURCE)


def test_token_copy_inside_a_character_is_an_error():
    bounds = [0, None, 1]  # two tokens splitting one character
    with pytest.raises(ProgramError, match="inside a UTF-8 character"):
        resolve(Program((Copy(1, 1, "tokens"),)), "é", bounds)
    assert resolve(Program((Copy(1, 2, "tokens"),)), "é", bounds) == "é"


def test_empty_program_and_source():
    assert resolve(Program(()), "") == ""
    with pytest.raises(ProgramError, match="the source has 0 lines"):
        resolve(Program((Copy(1, 1),)), "")
