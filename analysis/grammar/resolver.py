"""The deterministic resolver: (program, source) -> output text. Pure; never clips a span.

Line copies index the source's lines (`analysis.text.lines.Source`; a text is split on the way in, a
Source is read as it is). Token copies index the source's token boundaries, which the caller passes as
`token_bounds` or holds in the Source (from a tokenizer's `char_bounds`): character offsets of the n + 1
boundaries of the source's n tokens, None where a boundary falls inside a character (byte-level BPE can
split a multi-byte UTF-8 character). A span that starts or ends on such a boundary cannot be copied as
text and is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.errors import ProgramError
from analysis.grammar.program import Copy, Gen, Program
from analysis.text.lines import Source


def _check_span(op: Copy, index: int, n_units: int) -> None:
    if op.start < 1 or op.end < 1:
        raise ProgramError(f"op {index}: copy {op.unit} {op.start}-{op.end} has a non-positive bound")
    if op.start > op.end:
        raise ProgramError(f"op {index}: copy {op.unit} {op.start}-{op.end} is inverted (start > end)")
    if op.end > n_units:
        raise ProgramError(
            f"op {index}: copy {op.unit} {op.start}-{op.end} is out of range: the source has {n_units} {op.unit}"
        )


def _token_span_text(
    op: Copy, index: int, source: str, token_bounds: Sequence[int | None] | None
) -> str:
    if token_bounds is None:
        raise ProgramError(f"op {index}: a token copy needs the source's token boundaries (token_bounds)")
    _check_span(op, index, len(token_bounds) - 1)
    lo, hi = token_bounds[op.start - 1], token_bounds[op.end]
    if lo is None or hi is None:
        raise ProgramError(
            f"op {index}: copy tokens {op.start}-{op.end} starts or ends inside a UTF-8 character"
        )
    return source[lo:hi]


def resolve(
    program: Program, source: str | Source, token_bounds: Sequence[int | None] | None = None
) -> str:
    src = Source.of(source, token_bounds)
    out: list[str] = []
    for index, op in enumerate(program.ops):
        if isinstance(op, Gen):
            out.append(op.text)
        elif isinstance(op, Copy) and op.unit == "lines":
            _check_span(op, index, src.n_lines)
            out.append(src.line_text(op.start, op.end))
        elif isinstance(op, Copy) and op.unit == "tokens":
            out.append(_token_span_text(op, index, src.text, src.token_bounds))
        else:
            raise ProgramError(f"op {index}: not a program operation: {op!r}")
    return "".join(out)
