"""analysis.text.lines: lines as the copy primitive sees them (only '\\n' breaks a line)."""

from hypothesis import given
from hypothesis import strategies as st

from analysis.text.lines import line_starts, split_lines


def test_only_newline_breaks_a_line_and_the_last_line_may_lack_one():
    assert split_lines("") == []
    assert split_lines("a") == ["a"]
    assert split_lines("a\n") == ["a\n"]
    assert split_lines("a\n\nb") == ["a\n", "\n", "b"]
    # '\r\n' ends a line with '\r\n'; a lone '\r' and U+2028 stay inside their line (str.splitlines breaks on both)
    assert split_lines("a\r\nb\rc\u2028d\n") == ["a\r\n", "b\rc\u2028d\n"]


def test_line_starts_are_offsets_ending_at_the_text_length():
    lines = split_lines("ab\ncde\n\nf")
    assert line_starts(lines) == [0, 3, 7, 8, 9]
    assert line_starts([]) == [0]


@given(st.text(alphabet="ab\n\r\u2028 ", max_size=40))
def test_the_lines_join_back_to_the_text(text):
    lines = split_lines(text)
    assert "".join(lines) == text
    assert all(line.count("\n") == 1 and line.endswith("\n") for line in lines[:-1])
    assert not lines or lines[-1]  # no empty last line
    starts = line_starts(lines)
    assert starts[-1] == len(text) and all(text[s:].startswith(line) for s, line in zip(starts, lines))
