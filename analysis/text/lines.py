"""Lines of a text, as the copy primitive sees them.

A line is everything up to and including a '\\n'; the last line may lack its '\\n'. Only '\\n'
breaks a line: '\\r\\n' is a line ending with '\\r\\n', a lone '\\r' (or U+2028 and the other
characters `str.splitlines` would break on) stays inside its line. A text that ends with '\\n'
has no empty last line; the empty text has no lines. So "".join(split_lines(t)) == t always.
"""

from __future__ import annotations

from itertools import accumulate


def split_lines(text: str) -> list[str]:
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def line_starts(lines: list[str]) -> list[int]:
    """Character offset of each line's start, plus the text length at the end (len(lines) + 1)."""
    return [0, *accumulate(len(line) for line in lines)]


def numbered(source: str) -> str:
    """The source with each line written `k: line` (k from 1), as the program's copies address it: the input of
    every prompt that asks for a program."""
    return "".join(f"{k}: {line}" for k, line in enumerate(split_lines(source), start=1))
