"""The program grammar: the one place that knows how a Copy-as-Decode program is written.

A program is a sequence of two kinds of operation, written back to back with nothing between them:

    <copy lines="i-j"/>     copy input lines i..j (1-based, inclusive)
    <copy tokens="i-j"/>    copy input tokens i..j (1-based, inclusive; token-level primitive)
    <gen>TEXT</gen>         emit TEXT

Escaping inside a <gen> body. The body is raw text except for two escapes, so that a body may hold
any string, the grammar's own tags included:

    '&lt;'  stands for '<'   (written only where the '<' would start '<copy', '<gen' or '</gen')
    '&amp;' stands for '&'   (written only where the '&' would start '&lt;' or '&amp;')

Everything else, '<' and '&' included, is written as is, so code such as `a < b && c` costs no
extra tokens. `escape` writes the fewest escapes that keep the body unambiguous.

Exactly one spelling. `parse` rejects, with a ProgramError giving the position, every body that
`escape` could not have written: an unescaped tag start ('<copy', '<gen', '</gen') inside a body,
and a non-canonical escape, that is an '&lt;' not followed by 'copy', 'gen' or '/gen', or an
'&amp;' not followed by 'lt;' or 'amp;' (so '<gen>&lt;</gen>' is an error; '<' is written
'<gen><</gen>'). Hence parse(render(p)) == p for every program and render(parse(t)) == t for every t
that parses. The byte-level FSM (analysis.grammar.fsm) accepts exactly the same texts, and it reads the tag
spellings below from this module; no other module spells them.

`parse` checks syntax only (numbers are positive integers without leading zeros, the body is
non-empty); whether a span fits the source is the resolver's business, so that perturbed programs
(inverted or out-of-range spans) can still be written down and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Union

from analysis.errors import ProgramError

Unit = Literal["lines", "tokens"]
UNITS: tuple[str, ...] = ("lines", "tokens")

# The grammar's spellings, defined once; analysis.grammar.fsm and kernels_profile build on these constants.
COPY_OPEN = "<copy "
COPY_TAGS: dict[str, str] = {unit: f'{COPY_OPEN}{unit}="' for unit in UNITS}  # '<copy lines="' ...
RANGE_SEP = "-"
COPY_END = '"/>'  # closes the second number's quote and the empty element
GEN_OPEN = "<gen>"
GEN_CLOSE = "</gen>"
ESCAPE_LT = "&lt;"
ESCAPE_AMP = "&amp;"
# a '<' is escaped exactly where it starts one of these; an '&' exactly where it starts an escape
TAG_STARTS: tuple[str, ...] = (COPY_OPEN[:-1], GEN_OPEN[:-1], GEN_CLOSE[:-1])  # '<copy' '<gen' '</gen'
AMP_STARTS: tuple[str, ...] = (ESCAPE_LT, ESCAPE_AMP)
# what must follow an escape in written text for it to be the one canonical spelling
AFTER_LT: tuple[str, ...] = tuple(t[1:] for t in TAG_STARTS)  # 'copy', 'gen', '/gen'
AFTER_AMP: tuple[str, ...] = tuple(t[1:] for t in AMP_STARTS)  # 'lt;', 'amp;'

_UNIT_OF_TAG = {tag: unit for unit, tag in COPY_TAGS.items()}
_COPY_RE = re.compile(
    "(" + "|".join(map(re.escape, COPY_TAGS.values())) + ")([1-9][0-9]*)" + re.escape(RANGE_SEP)
    + "([1-9][0-9]*)" + re.escape(COPY_END)
)


@dataclass(frozen=True)
class Copy:
    """Copy units start..end of the input (1-based, inclusive)."""

    start: int
    end: int
    unit: Unit = "lines"

    @property
    def length(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class Gen:
    """Emit `text`, decoded autoregressively."""

    text: str


Op = Union[Copy, Gen]


@dataclass(frozen=True)
class Program:
    ops: tuple[Op, ...]

    def __iter__(self):
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def copies(self) -> list[Copy]:
        return [op for op in self.ops if isinstance(op, Copy)]

    @property
    def gens(self) -> list[Gen]:
        return [op for op in self.ops if isinstance(op, Gen)]


def escape(text: str) -> str:
    """Escape a <gen> body (see the module docstring)."""
    if "<" not in text and "&" not in text:  # nothing to rewrite (the common case, without a loop)
        return text
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "<" and text.startswith(TAG_STARTS, i):
            out.append(ESCAPE_LT)
        elif ch == "&" and text.startswith(AMP_STARTS, i):
            out.append(ESCAPE_AMP)
        else:
            out.append(ch)
    return "".join(out)


def unescape(body: str, *, offset: int = 0) -> str:
    """Inverse of `escape`; `offset` is the body's position in the program, for error messages.

    Rejects every body `escape` could not have written (see the module docstring)."""
    if "<" not in body and "&" not in body:  # no escape and no tag: the body as is, without a loop
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        for escaped, char, after in ((ESCAPE_LT, "<", AFTER_LT), (ESCAPE_AMP, "&", AFTER_AMP)):
            if body.startswith(escaped, i):
                if not body.startswith(after, i + len(escaped)):
                    raise ProgramError(
                        f"non-canonical escape {escaped!r} inside a <gen> body at position {offset + i}: "
                        f"{escaped!r} is written only before {' / '.join(map(repr, after))}; "
                        f"write {char!r} as is there"
                    )
                out.append(char)
                i += len(escaped)
                break
        else:
            if body[i] == "<" and body.startswith(TAG_STARTS, i):
                raise ProgramError(
                    f"unescaped {body[i:i + 6]!r} inside a <gen> body at position {offset + i}; "
                    f"write '<' as {ESCAPE_LT!r} there"
                )
            out.append(body[i])
            i += 1
    return "".join(out)


def render_op(op: Op) -> str:
    if isinstance(op, Copy):
        return f"{COPY_TAGS[op.unit]}{op.start}{RANGE_SEP}{op.end}{COPY_END}"
    if isinstance(op, Gen):
        return f"{GEN_OPEN}{escape(op.text)}{GEN_CLOSE}"
    raise ProgramError(f"not a program operation: {op!r}")


def render(program: Program) -> str:
    return "".join(render_op(op) for op in program.ops)


def _context(text: str, pos: int) -> str:
    return repr(text[pos:pos + 24])


MAX_INDEX_DIGITS = 18  # a line or token number below 10**18: far above any source, within int64 tables


def parse(text: str) -> Program:
    """Parse program text strictly; a ProgramError names the position and what was found there."""
    ops: list[Op] = []
    pos = 0
    while pos < len(text):
        if text.startswith(TAG_STARTS[0], pos):
            m = _COPY_RE.match(text, pos)
            if m is None:
                raise ProgramError(
                    f"malformed copy directive at position {pos}: {_context(text, pos)}; "
                    f"expected {' or '.join(f'{tag}i{RANGE_SEP}j{COPY_END}' for tag in COPY_TAGS.values())} "
                    "with positive integers"
                )
            for digits in (m.group(2), m.group(3)):  # int() refuses over 4,300 digits with a raw ValueError
                if len(digits) > MAX_INDEX_DIGITS:
                    raise ProgramError(f"copy directive at position {pos}: a line or token number of {len(digits):,} "
                                       f"digits (at most {MAX_INDEX_DIGITS}); no source is that long")
            ops.append(Copy(int(m.group(2)), int(m.group(3)), _UNIT_OF_TAG[m.group(1)]))  # type: ignore[arg-type]
            pos = m.end()
        elif text.startswith(GEN_OPEN, pos):
            body_start = pos + len(GEN_OPEN)
            close = text.find(GEN_CLOSE, body_start)
            if close < 0:
                raise ProgramError(f"<gen> opened at position {pos} is never closed")
            if close == body_start:
                raise ProgramError(f"empty <gen></gen> at position {pos}")
            ops.append(Gen(unescape(text[body_start:close], offset=body_start)))
            pos = close + len(GEN_CLOSE)
        else:
            raise ProgramError(
                f"expected {TAG_STARTS[0]!r} or {GEN_OPEN!r} at position {pos}, found {_context(text, pos)}"
            )
    return Program(tuple(ops))


def merge_adjacent(ops: list[Op]) -> Program:
    """Join neighbouring Gen ops, and Copy ops whose ranges are contiguous in the same unit."""
    merged: list[Op] = []
    texts: list[str] = []  # the run of Gen texts being joined (joined once: linear, not quadratic, in its length)
    for op in ops:
        if isinstance(op, Gen):
            if op.text:
                texts.append(op.text)
            continue
        if texts:
            merged.append(Gen("".join(texts)))
            texts = []
        prev = merged[-1] if merged else None
        if (
            isinstance(op, Copy)
            and isinstance(prev, Copy)
            and prev.unit == op.unit
            and prev.end + 1 == op.start
        ):
            merged[-1] = Copy(prev.start, op.end, op.unit)
        else:
            merged.append(op)
    if texts:
        merged.append(Gen("".join(texts)))
    return Program(tuple(merged))
