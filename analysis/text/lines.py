"""Lines of a text, as the copy primitive sees them.

A line is everything up to and including a '\\n'; the last line may lack its '\\n'. Only '\\n'
breaks a line: '\\r\\n' is a line ending with '\\r\\n', a lone '\\r' (or U+2028 and the other
characters `str.splitlines` would break on) stays inside its line. A text that ends with '\\n'
has no empty last line; the empty text has no lines. So "".join(split_lines(t)) == t always.
`Source` holds a text with its lines and offsets, made once per case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate


def split_lines(text: str) -> list[str]:
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def numbered(source: str | Source) -> str:
    """The source with each line written `k: line` (k from 1), as a program's copies address it: the prompt of
    every model-running stage (kernels_profile.runtime.hf) and the prompt length the serving simulation charges
    Copy-as-Decode."""
    return "".join(f"{k}: {line}" for k, line in enumerate(Source.of(source).lines, start=1))


def line_starts(lines: list[str]) -> list[int]:
    """Character offset of each line's start, plus the text length at the end (len(lines) + 1)."""
    return [0, *accumulate(len(line) for line in lines)]


@dataclass(frozen=True)
class Source:
    """A case's source text made once: its lines, each line's character offset (and the text's length at the
    end), and, where a tokenizer encoded it, its token boundaries as character offsets (None where a boundary
    falls inside a UTF-8 character). Everything that reads a source's lines (the resolver, the prompt's
    numbered lines, the grammar's line count) reads them from here, so a decode splits its source once."""

    text: str
    lines: Sequence[str]
    starts: Sequence[int]
    token_bounds: Sequence[int | None] | None = None

    @classmethod
    def of(cls, source: str | Source, token_bounds: Sequence[int | None] | None = None) -> Source:
        """The Source of a text (a Source is returned as it is, with `token_bounds` where given)."""
        if isinstance(source, Source):
            return source if token_bounds is None else replace(source, token_bounds=token_bounds)
        lines = split_lines(source)
        return cls(source, lines, line_starts(lines), token_bounds)

    @property
    def n_lines(self) -> int:
        return len(self.lines)

    def line_text(self, start: int, end: int) -> str:
        """Lines start..end (1-based, inclusive) as they stand in the text."""
        return self.text[self.starts[start - 1]:self.starts[end]]
