"""The unified-diff and search/replace readers: what analysis.coverage.formats writes, they read back and apply to
the target; a malformed or misplaced edit is named, never silently applied."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from analysis.coverage.formats import search_replace_text, unified_diff_text
from analysis.errors import PatchError
from analysis.text.patch import (apply_search_replace, apply_unified_diff, occurrences, parse_search_replace,
                                 parse_unified_diff)

SOURCE = "def clamp(x, lo, hi):\n    if x < lo:\n        return hi\n    if x > hi:\n        return hi\n    return x\n"
TARGET = SOURCE.replace("        return hi\n    if x > hi", "        return lo\n    if x > hi")

lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "\n", "    d\n", "e e\n"]), max_size=12)


@given(lines, lines, st.integers(0, 3))
def test_a_written_diff_reads_back_to_the_target(src, tgt, context):
    source, target = "".join(src), "".join(tgt)
    if source == target:
        return  # no hunk to write
    assert apply_unified_diff(source, parse_unified_diff(unified_diff_text(source, target, context))).text == target


@given(lines, st.integers(0, 12), st.integers(0, 12), lines)
def test_written_search_replace_blocks_read_back_to_the_target(src, start, size, replacement):
    """A single-site edit (as the pilot's cases are) whose blocks the writer made unambiguous. The writer's blocks
    can be ambiguous (its `str.count` misses overlapping occurrences: 'a\\na\\n' in 'a\\na\\na\\n') or overlap
    (two regions growing into one window): a limit of the writer, which this reader counts or refuses."""
    source = "".join(src)
    target = "".join(src[:start] + replacement + src[start + size:])
    assume(source != target and source)
    blocks = parse_search_replace(search_replace_text(source, target))
    assume(len(blocks) == 1 and occurrences(source, blocks[0][0]) == 1)
    applied = apply_search_replace(source, blocks)
    assert applied.text == target and applied.misplaced == 0


def test_a_hunk_away_from_its_stated_line_applies_and_is_counted():
    moved = unified_diff_text(SOURCE, TARGET, 1).replace("@@ -2,3 +2,3 @@", "@@ -40,3 +40,3 @@")
    applied = apply_unified_diff(SOURCE, parse_unified_diff(moved))
    assert applied.text == TARGET and applied.misplaced == 1
    assert apply_unified_diff(SOURCE, parse_unified_diff(unified_diff_text(SOURCE, TARGET, 1))).misplaced == 0


def test_headers_are_optional_and_an_empty_context_line_may_lose_its_space():
    diff = "@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n"
    assert apply_unified_diff("a\n\nb\n", parse_unified_diff(diff)).text == "a\n\nB\n"
    assert apply_unified_diff("a\nb", parse_unified_diff("@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+c\n")).text \
        == "a\nc\n"


@pytest.mark.parametrize("text, message", [
    ("", "no hunk"),
    ("--- a\n@@ -1 +1 @@\n-x\n+y\n", "without its '\\+\\+\\+ ' line"),
    ("@@ -1,2 +1,2 @@\n-x\n+y\n", "header counts 2 old and 2 new lines, its body 1 and 1"),
    ("@@ -1 +1 @@\n*x\n+y\n", "is not a hunk line"),
    ("Here is the diff:\n@@ -1 +1 @@\n-x\n+y\n", "line 1: 'Here is the diff:' is not a hunk header"),
])
def test_a_malformed_diff_is_named(text, message):
    with pytest.raises(PatchError, match=message):
        parse_unified_diff(text)


def test_a_diff_whose_old_text_is_not_in_the_source_fails():
    with pytest.raises(PatchError, match="hunk 1 .*not in the source"):
        apply_unified_diff(SOURCE, parse_unified_diff("@@ -1 +1 @@\n-nothing like it\n+x\n"))


@pytest.mark.parametrize("text, message", [
    ("", "no block"),
    ("<<<<<<< SEARCH\nx\n=======\ny\n", "not closed"),
    ("<<<<<<< SEARCH\n=======\ny\n>>>>>>> REPLACE\n", "SEARCH text is empty"),
    ("Sure!\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", "outside a block"),
    ("<<<<<<< SEARCH\nx\n<<<<<<< SEARCH\n=======\ny\n>>>>>>> REPLACE\n", "inside the block of line 1"),
])
def test_malformed_blocks_are_named(text, message):
    with pytest.raises(PatchError, match=message):
        parse_search_replace(text)


def test_occurrences_overlap():
    assert occurrences("a\na\na\n", "a\na\n") == 2 and occurrences("abc", "x") == 0


def test_a_search_text_not_in_the_source_fails_and_an_ambiguous_one_is_counted():
    with pytest.raises(PatchError, match="block 1: its SEARCH text is not in the source"):
        apply_search_replace(SOURCE, parse_search_replace("<<<<<<< SEARCH\nnope\n=======\nx\n>>>>>>> REPLACE\n"))
    blocks = parse_search_replace("<<<<<<< SEARCH\n        return hi\n=======\n        return lo\n>>>>>>> REPLACE\n")
    assert apply_search_replace(SOURCE, blocks) == type(apply_search_replace(SOURCE, blocks))(TARGET, 1)
