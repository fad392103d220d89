"""The regular parts of the program grammar as one small expression tree, written out in two syntaxes.

A program's language (analysis.grammar.program) is regular once the source's line count N is fixed:
`<copy lines="i-j"/>` with 1 <= i <= j <= N is a finite set of headers, and a `<gen>` body is the
set of strings that avoid a few patterns. The exports (analysis.grammar.export) build these pieces once,
as the tree below, and write them as a regular expression (the syntax Rust's `regex` crate, llguidance's
`/.../` lexemes, outlines-core and Python's `re` share: no look-around, no backreferences) or as GBNF
rules (the EBNF dialect of llama.cpp and xgrammar).

The body, without negation or intersection (which only llguidance's regexes have). Outside a pending
pattern, a body reads plain characters (neither '<' nor '&'). A '<' or '&' starts a *partial*: a proper
prefix of a raw tag start ('<copy', '<gen', '</gen') or of an escape ('&lt;', '&amp;'). A partial ends in
one of three ways:
  - it completes an escape, which must then be the canonical one ('&lt;' + 'copy' / 'gen' / '/gen',
    '&amp;' + 'lt;' / 'amp;'): an *escape* atom;
  - a character that cannot continue it and is neither '<' nor '&' arrives: the partial was plain text,
    and that character is read with it (an *absorbed* atom);
  - a '<' or '&' arrives, or the closing '</gen>' does: the partial was plain text and the next atom
    (or the close) starts at that character (a *bare* partial, which may only be followed so).
No continuation character of any pattern is '<' or '&', so these three cases never overlap, and a raw tag
start can only be written as the closing '</gen>'. Hence

    body  = Y+ R* | R+        Y = plain | T | R+ T
    T     = escape | absorbed  (every T starts with '<' or '&')
    R     = bare partial

which is exactly what `parse` accepts between '<gen>' and '</gen>' (tested against the suite's FSM).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from analysis.grammar.program import AFTER_AMP, AFTER_LT, ESCAPE_AMP, ESCAPE_LT, TAG_STARTS


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Chars:
    """One character from `chars` (or, negated, any character not in it)."""

    chars: str
    negated: bool = False
    ranges: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Seq:
    parts: tuple


@dataclass(frozen=True)
class Alt:
    options: tuple


@dataclass(frozen=True)
class Rep:
    inner: object
    low: int
    high: int | None  # None: unbounded


Node = Union[Lit, Chars, Seq, Alt, Rep]


def seq(*parts: Node) -> Node:
    flat: list[Node] = []
    for p in parts:
        flat.extend(p.parts if isinstance(p, Seq) else (p,))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*options: Node) -> Node:
    flat: list[Node] = []
    for o in options:
        flat.extend(o.options if isinstance(o, Alt) else (o,))
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def lits(*texts: str) -> Node:
    return alt(*(Lit(t) for t in texts))


def star(node: Node) -> Node:
    return Rep(node, 0, None)


def plus(node: Node) -> Node:
    return Rep(node, 1, None)


def digit_range(lo: str, hi: str) -> Node:
    return Lit(lo) if lo == hi else Chars("", ranges=((lo, hi),))


# ---------------------------------------------------------------- numbers

def _same_length(a: str, b: str) -> Node:
    """The decimal strings of len(a) digits between a and b inclusive (a <= b, same length)."""
    if a == b:
        return Lit(a)
    if len(a) == 1:
        return digit_range(a, b)
    if a[0] == b[0]:
        return seq(Lit(a[0]), _same_length(a[1:], b[1:]))
    rest = len(a) - 1
    any_digits = [Chars("", ranges=(("0", "9"),))] * rest
    options = [seq(Lit(a[0]), _same_length(a[1:], "9" * rest))]
    if int(b[0]) - int(a[0]) > 1:
        options.append(seq(digit_range(str(int(a[0]) + 1), str(int(b[0]) - 1)), *any_digits))
    options.append(seq(Lit(b[0]), _same_length("0" * rest, b[1:])))
    return alt(*options)


def number_range(lo: int, hi: int) -> Node:
    """Exactly the decimal numbers without leading zeros in [lo, hi] (1 <= lo <= hi)."""
    if not 1 <= lo <= hi:
        raise ValueError(f"number_range needs 1 <= lo <= hi, got {lo}, {hi}")
    options = []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        a, b = max(lo, 10 ** (length - 1)), min(hi, 10 ** length - 1)
        options.append(_same_length(str(a), str(b)))
    return alt(*options)


# ---------------------------------------------------------------- the <gen> body

PATTERN_FIRST = "<&"


def body_partials() -> dict[str, str]:
    """Each partial (a proper prefix of a tag start, or of '&lt;' / '&amp;') -> the characters that
    continue it. A prefix holding a whole escape ('&lt;', '&amp;') is not a partial: it is committed."""
    committed = (ESCAPE_LT, ESCAPE_AMP)
    out: dict[str, str] = {}
    for pattern in TAG_STARTS + committed:
        for k in range(1, len(pattern)):
            prefix = pattern[:k]
            if not prefix.startswith(committed):
                out.setdefault(prefix, "")
    for prefix in out:
        follow = {p[len(prefix)] for p in TAG_STARTS + committed if p.startswith(prefix) and len(p) > len(prefix)}
        out[prefix] = "".join(sorted(follow))
    assert not any(c in PATTERN_FIRST for cont in out.values() for c in cont)  # the module docstring's premise
    return out


def body_parts() -> dict[str, Node]:
    """The body's atoms (module docstring): `plain`, `t` (escape or absorbed partial), `r` (bare partial)."""
    partials = body_partials()
    plain = Chars(PATTERN_FIRST, negated=True)
    escape = alt(seq(Lit(ESCAPE_LT), lits(*AFTER_LT)), seq(Lit(ESCAPE_AMP), lits(*AFTER_AMP)))
    absorbed = [seq(Lit(p), Chars(cont + PATTERN_FIRST, negated=True)) for p, cont in partials.items()]
    return {"plain": plain, "t": alt(escape, *absorbed), "r": lits(*partials)}


def body() -> Node:
    """A non-empty <gen> body as `parse` accepts it (module docstring)."""
    parts = body_parts()
    r, t = parts["r"], parts["t"]
    y = alt(parts["plain"], t, seq(plus(r), t))
    return alt(seq(plus(y), star(r)), plus(r))


# ---------------------------------------------------------------- regular-expression syntax

_META = set("\\.+*?()|[]{}^$")
_CLASS_META = set("\\]^-[&~")


def _char(ch: str, meta: set[str], slash: bool) -> str:
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"\\x{ord(ch):02X}"
    if ch in meta or (slash and ch == "/"):
        return "\\" + ch
    return ch


def _class(node: Chars, slash: bool) -> str:
    body_ = "".join(_char(c, _CLASS_META, slash) for c in node.chars)
    body_ += "".join(f"{_char(a, _CLASS_META, slash)}-{_char(b, _CLASS_META, slash)}" for a, b in node.ranges)
    return f"[{'^' if node.negated else ''}{body_}]"


def to_regex(node: Node, *, slash: bool = False) -> str:
    """The node as a regular expression; `slash`: also escape '/' (inside llguidance's `/.../`)."""
    if isinstance(node, Lit):
        return "".join(_char(c, _META, slash) for c in node.text)
    if isinstance(node, Chars):
        return _class(node, slash)
    if isinstance(node, Seq):
        return "".join(_group(p, slash) if isinstance(p, Alt) else to_regex(p, slash=slash) for p in node.parts)
    if isinstance(node, Alt):
        return "|".join(to_regex(o, slash=slash) for o in node.options)
    if isinstance(node, Rep):
        inner = node.inner
        atomic = isinstance(inner, Chars) or (isinstance(inner, Lit) and len(inner.text) == 1)
        text = to_regex(inner, slash=slash) if atomic else _group(inner, slash)
        return text + _quantifier(node.low, node.high)
    raise TypeError(f"not a regular-expression node: {node!r}")


def _group(node: Node, slash: bool) -> str:
    return f"(?:{to_regex(node, slash=slash)})"


def _quantifier(low: int, high: int | None) -> str:
    if (low, high) == (0, None):
        return "*"
    if (low, high) == (1, None):
        return "+"
    if (low, high) == (0, 1):
        return "?"
    return f"{{{low},{'' if high is None else high}}}" if high != low else f"{{{low}}}"


# ---------------------------------------------------------------- GBNF syntax

def _gbnf_char(ch: str, in_class: bool) -> str:
    special = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}
    if ch in special:
        return special[ch]
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"\\x{ord(ch):02X}"
    if in_class and ch in "]^-[":
        return f"\\x{ord(ch):02X}"
    if not in_class and ch == '"':
        return '\\"'
    return ch


HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def gbnf_literal(text: str) -> str:
    """A GBNF string literal spelling `text`; where an \\xNN escape is followed by a hex digit, the literal ends
    there and the next one starts ("a\\x01" "b"): xgrammar reads \\x escapes greedily (\\x01b as U+001B), llama.cpp
    and llguidance's converter read two digits, and all three read a sequence of literals alike. (A character
    class holds only the grammar's own characters, never a source's, so it needs no such care.)"""
    parts, current = [], []
    for k, ch in enumerate(text):
        spelt = _gbnf_char(ch, False)
        current.append(spelt)
        if spelt.startswith("\\x") and k + 1 < len(text) and text[k + 1] in HEX_DIGITS:
            parts.append(current)
            current = []
    parts.append(current)
    return " ".join('"' + "".join(part) + '"' for part in parts)


def to_gbnf(node: Node) -> str:
    """The node as a GBNF expression (bounded repetitions are spelled out: no `{m,n}` needed)."""
    if isinstance(node, Lit):
        return gbnf_literal(node.text)
    if isinstance(node, Chars):
        inner = "".join(_gbnf_char(c, True) for c in node.chars)
        inner += "".join(f"{_gbnf_char(a, True)}-{_gbnf_char(b, True)}" for a, b in node.ranges)
        return f"[{'^' if node.negated else ''}{inner}]"
    if isinstance(node, Seq):
        return " ".join(f"({to_gbnf(p)})" if isinstance(p, Alt) else to_gbnf(p) for p in node.parts)
    if isinstance(node, Alt):
        return " | ".join(to_gbnf(o) for o in node.options)
    if isinstance(node, Rep):
        inner = to_gbnf(node.inner)
        if not isinstance(node.inner, (Lit, Chars)):
            inner = f"({inner})"
        if node.high is None:
            head = " ".join([inner] * max(node.low - 1, 0))
            tail = f"{inner}+" if node.low >= 1 else f"{inner}*"
            return f"{head} {tail}".strip()
        return " ".join([inner] * node.low + [f"{inner}?"] * (node.high - node.low))
    raise TypeError(f"not a GBNF node: {node!r}")
