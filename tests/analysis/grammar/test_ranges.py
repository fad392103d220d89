"""Decimal ranges as the grammar exports spell them: exactly the numbers in range, in both spellings."""

import re

import pytest

from analysis.errors import GrammarError
from analysis.grammar.ranges import blocks, max_with_prefix, range_gbnf, range_regex

RANGES = [(1, 1), (1, 9), (3, 12), (7, 100), (1, 400), (95, 1203), (10, 10), (99, 100), (5, 5000)]


@pytest.mark.parametrize("lo,hi", RANGES)
def test_range_regex_matches_exactly_the_numbers_in_range(lo, hi):
    pattern = re.compile(f"^({range_regex(lo, hi)})$")
    for n in range(5200):
        assert bool(pattern.match(str(n))) == (lo <= n <= hi), (lo, hi, n)
    assert not pattern.match("07") and not pattern.match("")


def _gbnf_as_regex(text: str) -> str:
    """The GBNF alternation read back as a regex: quoted literals, classes, spaces between items."""
    parts = []
    for alt in text.split(" | "):
        items = [item.strip('"') for item in alt.split()]
        parts.append("".join(items))
    return "|".join(parts)


@pytest.mark.parametrize("lo,hi", RANGES)
def test_the_gbnf_spelling_is_the_same_set(lo, hi):
    pattern = re.compile(f"^({_gbnf_as_regex(range_gbnf(lo, hi))})$")
    assert all(bool(pattern.match(str(n))) == (lo <= n <= hi) for n in range(5200))


def test_the_blocks_stay_few():
    assert len(blocks(95, 1203)) <= 2 * 2 * len("1203")
    assert blocks(1, 9) == blocks(1, 9) and len(blocks(1, 9)) == 1


def test_the_largest_number_under_a_prefix():
    assert max_with_prefix("1", 150) == 150 and max_with_prefix("2", 150) == 29 and max_with_prefix("15", 150) == 150
    assert max_with_prefix("16", 150) == 16 and max_with_prefix("9", 9) == 9
    for hi in (1, 9, 10, 57, 100, 597):
        for k in range(1, hi + 1):
            p = str(k)
            assert max_with_prefix(p, hi) == max(n for n in range(1, hi + 1) if str(n).startswith(p))


def test_an_empty_or_negative_range_is_a_named_error():
    with pytest.raises(GrammarError, match="1 <= lo <= hi"):
        range_regex(5, 4)
    with pytest.raises(GrammarError, match="1 <= lo <= hi"):
        blocks(0, 3)
    with pytest.raises(GrammarError, match="no number <= 5 starts with '7'"):
        max_with_prefix("7", 5)
