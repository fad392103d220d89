"""Decimal numbers in a range, as the grammar exports spell them (analysis.grammar.export).

A copy's line numbers are positive decimals without leading zeros, so "i in [lo, hi]" is a finite,
regular set of digit strings. `blocks` splits [lo, hi] into the few digit patterns
`prefix [a-b] [0-9]...[0-9]` that cover it exactly (at most two per digit count and length, so
O(log hi) of them), and each export renders them its own way: a regex alternation (llguidance's Lark
lexemes, outlines-core) or a GBNF alternation (xgrammar). `max_with_prefix` is what a digit-by-digit
grammar needs to stay exact: a digit may be written only if some number in range still starts with
what has been written (the same rule as the suite FSM's `_feasible`).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.errors import GrammarError


@dataclass(frozen=True)
class Block:
    """The digit strings `prefix` + one digit in [low, high] + `free` digits in [0-9]."""

    prefix: str
    low: str
    high: str
    free: int


def _same_length(a: str, b: str) -> list[Block]:
    """Blocks covering the digit strings of len(a) from a to b (a <= b, same length)."""
    rest = len(a) - 1
    if rest == 0:
        return [Block("", a, b, 0)]
    if a[0] == b[0]:
        return [Block(a[0] + blk.prefix, blk.low, blk.high, blk.free) for blk in _same_length(a[1:], b[1:])]
    out: list[Block] = []
    low, high = int(a[0]), int(b[0])
    if a[1:] != "0" * rest:  # a's own leading digit covers only a part of its decade: a block of its own
        out += [Block(a[0] + blk.prefix, blk.low, blk.high, blk.free) for blk in _same_length(a[1:], "9" * rest)]
        low += 1
    tail: list[Block] = []
    if b[1:] != "9" * rest:
        tail = [Block(b[0] + blk.prefix, blk.low, blk.high, blk.free) for blk in _same_length("0" * rest, b[1:])]
        high -= 1
    if low <= high:
        out.append(Block("", str(low), str(high), rest))
    return out + tail


def blocks(lo: int, hi: int) -> list[Block]:
    """The digit patterns that match exactly the decimal numbers in [lo, hi] (no leading zeros), lo >= 1."""
    if not 1 <= lo <= hi:
        raise GrammarError(f"a number range needs 1 <= lo <= hi, got {lo}, {hi}")
    out: list[Block] = []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        a, b = max(lo, 10 ** (length - 1)), min(hi, 10 ** length - 1)
        out += _same_length(str(a), str(b))
    return out


def _regex_digit(low: str, high: str) -> str:
    return low if low == high else f"[{low}-{high}]"


def range_regex(lo: int, hi: int) -> str:
    """A regex (no anchors, no lookaround) matching exactly the decimal numbers in [lo, hi]."""
    return "|".join(blk.prefix + _regex_digit(blk.low, blk.high) + "[0-9]" * blk.free for blk in blocks(lo, hi))


def range_gbnf(lo: int, hi: int) -> str:
    """The same set as a GBNF alternation (each alternative a sequence of a literal and char classes)."""
    parts = []
    for blk in blocks(lo, hi):
        items = [f'"{blk.prefix}"'] if blk.prefix else []
        items.append(f'"{blk.low}"' if blk.low == blk.high else f"[{blk.low}-{blk.high}]")
        items += ["[0-9]"] * blk.free
        parts.append(" ".join(items))
    return " | ".join(parts)


def max_with_prefix(prefix: str, hi: int) -> int:
    """The largest number <= hi whose decimal spelling starts with `prefix` (itself a number <= hi)."""
    value = int(prefix)
    if value > hi:
        raise GrammarError(f"no number <= {hi} starts with {prefix!r}")
    best, scale = value, 10
    while value * scale <= hi:
        best = min(hi, value * scale + scale - 1)
        scale *= 10
    return best
