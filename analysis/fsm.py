"""A token-level finite-state machine for the program grammar (analysis.program).

Built once per (tokenizer, copy limits). Per step it answers which token ids may come next and
advances on a token id; whatever it lets through is a program that `parse` accepts, whose copy spans
use an allowed unit and satisfy 1 <= start <= end <= limit (so `resolve` accepts it too).

It runs a byte-level automaton underneath (byte-level BPE tokens can end inside a UTF-8 character;
the grammar itself is ASCII, and non-ASCII bytes are only ever body text). Byte states:

    ("ops",)                       between operations; accepting
    ("tag", prefix)                inside '<copy lines="' or '<gen>' (prefix read so far)
    ("n1", unit, value)            first number; value 0 = no digit yet
    ("n2", unit, start, value)     second number
    ("lit", text, pos)             the closing '/>' of a copy
    ("body", nonempty, partial)    a <gen> body; partial = a pending '<...' that may become
                                   '</gen>' (close), or '<copy', '<gen', '</gen' + not '>' (dead)

A token is allowed in a state when walking its bytes never dies. Every live byte state can still reach
the accepting state (`kernels_profile.constrained.completion` spells the shortest way), and a
byte-level BPE vocabulary holds every single byte as a token, so no live token state is stuck. Masks are computed on first use of a
state and cached: tokens are indexed by first byte, so states that admit few bytes (numbers, tags)
walk few tokens, and the body state takes every token without '<' wholesale.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from analysis.errors import ProgramError
from analysis.tokenization import Tokenizer

OPS = ("ops",)
_TAGS = {"lines": b'<copy lines="', "tokens": b'<copy tokens="'}
_GEN_OPEN = b"<gen>"
_CLOSE = b"</gen>"
_DEAD_BODY = (b"<copy", b"<gen")
_BODY_PATTERNS = (b"<copy", b"<gen", b"</gen>")
_DIGITS = frozenset(b"0123456789")


def _feasible(value: int, lo: int, hi: int) -> bool:
    """Can a number that starts with the digits of `value` still end up in [lo, hi]?"""
    scale = 1
    while value * scale <= hi:
        if (value + 1) * scale - 1 >= lo:
            return True
        scale *= 10
    return False


@dataclass
class ByteAutomaton:
    limits: dict[str, int]  # unit -> number of units in the input (e.g. {"lines": 42})
    _tag_prefixes: set[bytes] = field(default_factory=set)

    def __post_init__(self):
        unknown = set(self.limits) - set(_TAGS)
        if unknown:
            raise ProgramError(f"FSM copy units must be among {sorted(_TAGS)}, got {sorted(self.limits)}")
        # a unit with nothing to copy gets no tag: '<copy lines="' could never be completed
        self.limits = {u: n for u, n in self.limits.items() if n >= 1}
        for tag in [_TAGS[u] for u in self.limits] + [_GEN_OPEN]:
            for k in range(1, len(tag) + 1):
                self._tag_prefixes.add(tag[:k])

    def step(self, state: tuple, byte: int):
        kind = state[0]
        if kind == "ops":
            return ("tag", b"<") if byte == 0x3C else None
        if kind == "tag":
            prefix = state[1] + bytes([byte])
            if prefix not in self._tag_prefixes:
                return None
            if prefix == _GEN_OPEN:
                return ("body", False, b"")
            for unit, tag in _TAGS.items():
                if prefix == tag and unit in self.limits:
                    return ("n1", unit, 0)
            return ("tag", prefix)
        if kind == "n1":
            _, unit, value = state
            if byte in _DIGITS:
                new = value * 10 + (byte - 48)
                return ("n1", unit, new) if 1 <= new <= self.limits[unit] else None
            return ("n2", unit, value, 0) if byte == 0x2D and value >= 1 else None
        if kind == "n2":
            _, unit, start, value = state
            if byte in _DIGITS:
                new = value * 10 + (byte - 48)
                ok = new >= 1 and _feasible(new, start, self.limits[unit])
                return ("n2", unit, start, new) if ok else None
            if byte == 0x22 and value >= max(start, 1):
                return ("lit", b"/>", 0)
            return None
        if kind == "lit":
            _, text, pos = state
            if byte != text[pos]:
                return None
            return OPS if pos + 1 == len(text) else ("lit", text, pos + 1)
        if kind == "body":
            return self._body_step(state[1], state[2], byte)
        raise AssertionError(f"unknown state {state!r}")

    @staticmethod
    def _body_step(nonempty: bool, partial: bytes, byte: int):
        s = partial + bytes([byte])
        if s == _CLOSE:
            return OPS if nonempty else None
        if s in _DEAD_BODY or (partial == b"</gen" and byte != 0x3E):
            return None
        if s == b"</gen" and not nonempty:
            return None  # only '>' may follow, and it would close an empty body: a dead end
        if any(p.startswith(s) for p in _BODY_PATTERNS):
            return ("body", nonempty, s)
        # s is body text now (a '<' alone was caught above); its last byte may open a new pattern
        return ("body", True, b"<" if byte == 0x3C else b"")

    def walk(self, state, data: bytes):
        for byte in data:
            state = self.step(state, byte)
            if state is None:
                return None
        return state


class ProgramFSM:
    """Allowed-token masks and transitions over a tokenizer's vocabulary."""

    def __init__(self, tokenizer: Tokenizer, limits: dict[str, int], eos_ids: tuple[int, ...] = ()):
        self.automaton = ByteAutomaton(dict(limits))
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.eos_ids = tuple(eos_ids)
        special = set(tokenizer._added)
        self.pieces: list[bytes | None] = [
            None if (i in special or i in self.eos_ids) else self._piece(i) for i in range(self.vocab_size)
        ]
        self.by_first: dict[int, list[int]] = defaultdict(list)
        for i, piece in enumerate(self.pieces):
            if piece:
                self.by_first[piece[0]].append(i)
        self.no_lt = np.array([bool(p) and b"<" not in p for p in self.pieces])
        self._first_bytes = np.array([p[0] if p else 0 for p in self.pieces], dtype=np.int64)
        self.with_lt = [i for i, p in enumerate(self.pieces) if p and b"<" in p]
        self._masks: dict[tuple, np.ndarray] = {}
        self._next: dict[tuple[tuple, int], tuple | None] = {}

    def _piece(self, token_id: int) -> bytes | None:
        try:
            return self.tokenizer.piece(token_id)
        except Exception:  # an id with no vocabulary entry (padding rows of an embedding)
            return None

    @property
    def initial(self) -> tuple:
        return OPS

    def is_accepting(self, state) -> bool:
        return state == OPS

    def advance(self, state, token_id: int):
        """The state after `token_id`; a ProgramError if the token is not allowed there."""
        key = (state, token_id)
        if key not in self._next:
            if token_id in self.eos_ids:
                self._next[key] = ("end",) if state == OPS else None
            else:
                piece = self.pieces[token_id] if 0 <= token_id < self.vocab_size else None
                self._next[key] = self.automaton.walk(state, piece) if piece else None
        nxt = self._next[key]
        if nxt is None:
            raise ProgramError(f"token {token_id} is not allowed in FSM state {state!r}")
        return nxt

    def allowed(self, state) -> np.ndarray:
        """Boolean mask over the vocabulary: which ids may come next in `state`."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self._compute(state)
            self._masks[state] = mask
        return mask

    def _compute(self, state) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        if state == ("end",):
            return mask
        if state == OPS:
            mask[list(self.eos_ids)] = True
        walk = self.automaton.walk
        if state[0] == "body":
            # A token without '<' can only die by continuing the pending '<...' into a tag; the
            # others stay body text. So only tokens with '<', or starting with a byte that would
            # continue the pending partial, are walked one by one.
            partial = state[2]
            danger = {p[len(partial)] for p in _BODY_PATTERNS if p.startswith(partial) and len(p) > len(partial)} if partial else set()
            safe_first = np.full(256, partial != b"</gen")  # after '</gen' only '>' may follow
            safe_first[list(danger)] = False
            first = self._first_bytes
            mask |= self.no_lt & safe_first[first]
            candidates = self.with_lt + [i for b in danger for i in self.by_first.get(b, [])]
        else:
            candidates = [i for b, ids in self.by_first.items() if self.automaton.step(state, b) is not None for i in ids]
        for i in candidates:
            if walk(state, self.pieces[i]) is not None:
                mask[i] = True
        return mask

    def accepts(self, text: str) -> bool:
        """Does the byte automaton accept `text` as a whole program?"""
        return self.automaton.walk(OPS, text.encode("utf-8")) == OPS
