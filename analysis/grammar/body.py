"""The <gen> body as a character automaton, read off the suite FSM, for the exports that need it spelt out.

A body (its closing '</gen>' included) is any text without a raw tag start before the close and
with only the canonical escapes (analysis.grammar.program). llguidance's Lark says that with regex
intersection and negation (analysis.grammar.export.lark_body); GBNF (xgrammar, llama.cpp) and plain
regexes (outlines-core) have neither, so they get this automaton instead: its states and transitions
are the suite FSM's own body states (`ByteAutomaton._body_step`), walked over the few ASCII characters
the tags and escapes are made of, plus one stand-in for every other character. Any other character,
ASCII or not, takes a body state to the same next state (it is plain text: it ends a pending partial
and makes the body non-empty), so the automaton over characters accepts exactly the bodies the FSM
accepts over their UTF-8 bytes (tested in tests/analysis/grammar/test_body.py).

`gbnf_rules` writes it as one GBNF rule per state; `regex` eliminates the states into one regular
expression (no lookaround, no intersection: Rust's regex crate, Python's re and outlines-core all read it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from analysis.grammar.fsm import OPS, ByteAutomaton
from analysis.grammar.program import AFTER_AMP, AFTER_LT, ESCAPE_AMP, ESCAPE_LT, GEN_CLOSE, TAG_STARTS

OTHER = ""  # the label of "any character not in the alphabet"
CLOSED = -1  # the target of the transition that completes '</gen>'
START = ("body", False, b"", ())
ALPHABET: tuple[str, ...] = tuple(sorted(set(GEN_CLOSE + "".join(TAG_STARTS) + ESCAPE_LT + ESCAPE_AMP
                                             + "".join(AFTER_LT) + "".join(AFTER_AMP))))
# an ASCII character outside the alphabet stands for all of them (and for every non-ASCII character)
_STAND_IN = next(c for c in "xXzZ0" if c not in ALPHABET)


@dataclass(frozen=True)
class BodyAutomaton:
    """States 0..n-1 (0 is an empty body); `edges[k]` lists (label, target) with label a character of
    ALPHABET or OTHER and target a state index or CLOSED. A missing label is a dead end."""

    states: tuple[tuple, ...]
    edges: tuple[tuple[tuple[str, int], ...], ...]

    def walk(self, text: str) -> int | None:
        """The state after `text` (CLOSED once '</gen>' closed the body), None where it dies."""
        state: int | None = 0
        for ch in text:
            if state is None or state == CLOSED:
                return None
            label = ch if ch in ALPHABET else OTHER
            state = dict(self.edges[state]).get(label)
        return state


def _step(state: tuple, ch: str) -> tuple | None:
    _, nonempty, partial, utf8 = state
    return ByteAutomaton._body_step(nonempty, partial, utf8, ord(ch))


@lru_cache(maxsize=1)
def body_automaton() -> BodyAutomaton:
    """The body states reachable from an empty body, in breadth-first order."""
    index = {START: 0}
    order = [START]
    edges: list[list[tuple[str, int]]] = []
    todo = deque([START])
    while todo:
        state = todo.popleft()
        out = []
        for label in (*ALPHABET, OTHER):
            nxt = _step(state, label or _STAND_IN)
            if nxt is None:
                continue
            if nxt == OPS:
                out.append((label, CLOSED))
                continue
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
                todo.append(nxt)
            out.append((label, index[nxt]))
        edges.append(out)
    return BodyAutomaton(tuple(order), tuple(tuple(e) for e in edges))


# ---------------------------------------------------------------- GBNF

def _gbnf_class(chars: list[str], negate: bool) -> str:
    if not negate and len(chars) == 1:
        return f'"{chars[0]}"'
    return "[" + ("^" if negate else "") + "".join(chars) + "]"


def _grouped(edges: tuple[tuple[str, int], ...]) -> list[tuple[list[str], bool, int]]:
    """Per target: (characters, negated, target); the target of OTHER gets a negated class that
    leaves out the alphabet characters going elsewhere."""
    by_target: dict[int, list[str]] = {}
    for label, target in edges:
        by_target.setdefault(target, []).append(label)
    groups = []
    for target, labels in by_target.items():
        if OTHER in labels:
            elsewhere = [c for c in ALPHABET if c not in labels]
            groups.append((elsewhere, True, target))
        else:
            groups.append((labels, False, target))
    return groups


def gbnf_rules(prefix: str = "body") -> list[str]:
    """One GBNF rule per body state, `<prefix>0` the empty body; each ends where '</gen>' closes."""
    automaton = body_automaton()
    rules = []
    for k, edges in enumerate(automaton.edges):
        alts = []
        for chars, negate, target in _grouped(edges):
            item = _gbnf_class(chars, negate)
            alts.append(item if target == CLOSED else f"{item} {prefix}{target}")
        rules.append(f"{prefix}{k} ::= " + " | ".join(alts))
    return rules


# ---------------------------------------------------------------- regex

_META = set("\\.+*?()|[]{}^$")
_CLASS_META = set("\\]^-[&~")


def _regex_class(chars: list[str], negate: bool) -> str:
    if not negate and len(chars) == 1:
        return "\\" + chars[0] if chars[0] in _META else chars[0]
    body = "".join("\\" + c if c in _CLASS_META else c for c in chars)
    return "[" + ("^" if negate else "") + body + "]"


def _union(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None or a == b:
        return a
    return f"{a}|{b}"


def _atoms(r: str) -> tuple[bool, bool]:
    """(r has a top-level '|', r is one atom: a character, an escape, a class or one group)."""
    depth, i, union, parts = 0, 0, False, 0
    while i < len(r):
        c = r[i]
        if depth == 0:
            parts += 1
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            while r[i] != "]" or r[i - 1] == "\\":
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            union = True
        elif c in "*+?" and depth == 0:
            parts -= 1  # a quantifier belongs to the atom before it
            if parts == 1 and i == len(r) - 1:
                parts = 2  # 'a*' is not an atom for a further '*'
        i += 1
    return union, parts == 1


def _concat_part(r: str) -> str:
    return f"(?:{r})" if _atoms(r)[0] else r


def _star(r: str) -> str:
    return (r if _atoms(r)[1] else f"(?:{r})") + "*"


def regex() -> str:
    """The body language (closing tag included) as one regular expression, by state elimination."""
    automaton = body_automaton()
    n = len(automaton.states)
    final = n  # a virtual accepting node after the close
    edge: dict[tuple[int, int], str] = {}
    for k, edges in enumerate(automaton.edges):
        for chars, negate, target in _grouped(edges):
            key = (k, final if target == CLOSED else target)
            edge[key] = _union(edge.get(key), _regex_class(chars, negate))  # type: ignore[assignment]
    alive = set(range(1, n))  # 0 (the start) and the final node stay
    while alive:
        k = min(alive, key=lambda s: (sum(1 for (a, b) in edge if b == s and a != s)
                                      * sum(1 for (a, b) in edge if a == s and b != s), s))
        alive.remove(k)
        loop = edge.pop((k, k), None)
        star = _star(loop) if loop else ""
        ins = [(a, r) for (a, b), r in edge.items() if b == k]
        outs = [(b, r) for (a, b), r in edge.items() if a == k]
        for a, _ in ins:
            del edge[(a, k)]
        for b, _ in outs:
            del edge[(k, b)]
        for a, r_in in ins:
            for b, r_out in outs:
                path = _concat_part(r_in) + star + _concat_part(r_out)
                edge[(a, b)] = _union(edge.get((a, b)), path)  # type: ignore[assignment]
    loop = edge.get((0, 0))
    return (_star(loop) if loop else "") + _concat_part(edge[(0, final)])
