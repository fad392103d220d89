"""A token-level finite-state machine for the program grammar (analysis.grammar.program), and its walker.

Built once per (tokenizer, copy limits). Per step it answers which token ids may come next and
advances on a token id; whatever it lets through is a program that `parse` accepts, whose copy spans
use an allowed unit and satisfy 1 <= start <= end <= limit (so `resolve` accepts it too). Every tag
spelling comes from analysis.grammar.program; this module spells none of its own.

It runs a byte-level automaton underneath (byte-level BPE tokens can end inside a UTF-8 character;
the grammar itself is ASCII, and non-ASCII bytes are only ever body text). Byte states:

    ("ops",)                          between operations; accepting
    ("end",)                          after EOS; nothing may follow
    ("tag", prefix)                   inside '<copy lines="' or '<gen>' (prefix read so far)
    ("n1", unit, value)               first number; value 0 = no digit yet
    ("n2", unit, start, value)        second number
    ("lit", pos)                      the copy's closing '"/>', pos bytes of it read
    ("body", nonempty, partial, utf8) a <gen> body:
        partial  a pending '<...' or '&...' that may still become '</gen>' (close), a raw tag start
                 '<copy' / '<gen' (dead), or an escape; an escape must be the canonical one
                 ('&lt;' then 'copy' / 'gen' / '/gen', '&amp;' then 'lt;' / 'amp;'), else dead
        utf8     () or (need, lo, hi): a multi-byte UTF-8 character is pending, `need` more
                 continuation bytes, the next one in [lo, hi] (which rules out overlong forms,
                 surrogates and code points past U+10FFFF); '</gen>' only once none is pending,
                 and invalid lead or continuation bytes die

so the automaton accepts exactly the byte strings that are valid UTF-8 and that `parse` accepts
(property-tested against the parser in tests/analysis/grammar/test_fsm.py).

A token is allowed in a state when walking its bytes never dies. Every live byte state can still reach
the accepting state (`ByteAutomaton.completion` spells the shortest way, using only the units the
limits allow), and a byte-level BPE vocabulary holds every single byte as a token, so no live token
state is stuck. Masks are computed on first use of a state and cached: tokens are indexed by first
byte, so states that admit few bytes (numbers, tags) walk few tokens, and the body states take every
token without '<' or '&' wholesale (decided by its UTF-8 shape alone).

`FsmWalker` is one generation's walk: state, advance, mask, completion, and the token budget (with
`margin` or fewer tokens left no new op may start, and inside an op only tokens that spell the
shortest completion are allowed, so the output is a whole program however the budget falls).
"""

from __future__ import annotations

import codecs
from collections import defaultdict

import numpy as np

from analysis.errors import ProgramError
from analysis.grammar.program import (
    AFTER_AMP,
    AFTER_LT,
    COPY_END,
    COPY_TAGS,
    ESCAPE_AMP,
    ESCAPE_LT,
    GEN_CLOSE,
    GEN_OPEN,
    RANGE_SEP,
    TAG_STARTS,
)

OPS = ("ops",)
END = ("end",)


def _ascii(text: str) -> bytes:
    return text.encode("ascii")


_TAGS = {unit: _ascii(tag) for unit, tag in COPY_TAGS.items()}
_GEN_OPEN = _ascii(GEN_OPEN)
_CLOSE = _ascii(GEN_CLOSE)
_COPY_END = _ascii(COPY_END)
_SEP = _ascii(RANGE_SEP)
# the number states read one separator byte and then one quote byte before the literal rest
assert len(_SEP) == 1 and len(_COPY_END) >= 1
_DIGITS = frozenset(b"0123456789")
_FIRST_DIGIT = b"1"
_FILLER = b"x"  # the body text a completion writes when the body is still empty

# body patterns, all ASCII: raw tag starts that kill the body, '</gen>' that closes it, and the
# canonical escapes. A partial that already holds a whole escape or '</gen' is committed: it must
# go on to finish a pattern.
_DEAD_RAW = frozenset(_ascii(t) for t in TAG_STARTS if not GEN_CLOSE.startswith(t))
_CLOSE_START = next(_ascii(t) for t in TAG_STARTS if GEN_CLOSE.startswith(t))  # '</gen'
_ESCAPED = tuple(_ascii(ESCAPE_LT + t) for t in AFTER_LT) + tuple(_ascii(ESCAPE_AMP + t) for t in AFTER_AMP)
_COMMITTED = (_ascii(ESCAPE_LT), _ascii(ESCAPE_AMP), _CLOSE_START)
_PATTERNS = (_CLOSE, *_DEAD_RAW, *_ESCAPED)
_PARTIALS = frozenset(p[:k] for p in _PATTERNS for k in range(1, len(p))) - _DEAD_RAW
_PATTERN_FIRST = frozenset(p[0] for p in _PATTERNS)  # '<' and '&'
_CONTINUES = _PARTIALS | frozenset(_PATTERNS)  # what a partial may grow into
_CONT = (0x80, 0xBF)  # the range of an ordinary UTF-8 continuation byte


def _utf8_lead(byte: int) -> tuple | None:
    """The pending-continuation state after `byte` (() for ASCII); None if it cannot start a character."""
    if byte < 0x80:
        return ()
    if 0xC2 <= byte <= 0xDF:
        return (1, *_CONT)
    if byte == 0xE0:
        return (2, 0xA0, 0xBF)  # no overlong 3-byte forms
    if byte == 0xED:
        return (2, 0x80, 0x9F)  # no UTF-16 surrogates
    if 0xE1 <= byte <= 0xEF:
        return (2, *_CONT)
    if byte == 0xF0:
        return (3, 0x90, 0xBF)  # no overlong 4-byte forms
    if 0xF1 <= byte <= 0xF3:
        return (3, *_CONT)
    if byte == 0xF4:
        return (3, 0x80, 0x8F)  # nothing past U+10FFFF
    return None


def _feasible(value: int, lo: int, hi: int) -> bool:
    """Can a number that starts with the digits of `value` still end up in [lo, hi]?"""
    scale = 1
    while value * scale <= hi:
        if (value + 1) * scale - 1 >= lo:
            return True
        scale *= 10
    return False


class ByteAutomaton:
    """The grammar over bytes, for given copy limits (unit -> number of units in the input)."""

    def __init__(self, limits: dict[str, int]):
        unknown = set(limits) - set(_TAGS)
        if unknown:
            raise ProgramError(f"FSM copy units must be among {sorted(_TAGS)}, got {sorted(limits)}")
        # a unit with nothing to copy gets no tag: '<copy lines="' could never be completed
        self.limits = {u: n for u, n in limits.items() if n >= 1}
        self._tags = [_GEN_OPEN] + [_TAGS[u] for u in self.limits]
        self._tag_prefixes = {tag[:k] for tag in self._tags for k in range(1, len(tag) + 1)}
        self._memo: dict[tuple[tuple, int], tuple | None] = {}
        self._max_completion: int | None = None

    # ------------------------------------------------------------ transitions

    def step(self, state: tuple, byte: int) -> tuple | None:
        """The state after `byte`, or None where the byte kills the program."""
        key = (state, byte)
        try:
            return self._memo[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable "state" is no state of this automaton
            raise ProgramError(f"unknown FSM state {state!r}") from None
        nxt = self._step(state, byte)
        self._memo[key] = nxt
        return nxt

    def _step(self, state: tuple, byte: int) -> tuple | None:
        kind = state[0] if isinstance(state, tuple) and state else None
        if kind == "ops":
            return ("tag", _GEN_OPEN[:1]) if byte == _GEN_OPEN[0] else None
        if kind == "tag":
            prefix = state[1] + bytes([byte])
            if prefix not in self._tag_prefixes:
                return None
            if prefix == _GEN_OPEN:
                return ("body", False, b"", ())
            for unit in self.limits:
                if prefix == _TAGS[unit]:
                    return ("n1", unit, 0)
            return ("tag", prefix)
        if kind == "n1":
            _, unit, value = state
            if byte in _DIGITS:
                new = value * 10 + (byte - 48)
                return ("n1", unit, new) if 1 <= new <= self.limits[unit] else None
            return ("n2", unit, value, 0) if byte == _SEP[0] and value >= 1 else None
        if kind == "n2":
            _, unit, start, value = state
            if byte in _DIGITS:
                new = value * 10 + (byte - 48)
                ok = new >= 1 and _feasible(new, start, self.limits[unit])
                return ("n2", unit, start, new) if ok else None
            if byte == _COPY_END[0] and value >= max(start, 1):
                return OPS if len(_COPY_END) == 1 else ("lit", 1)
            return None
        if kind == "lit":
            pos = state[1]
            if byte != _COPY_END[pos]:
                return None
            return OPS if pos + 1 == len(_COPY_END) else ("lit", pos + 1)
        if kind == "body":
            return self._body_step(state[1], state[2], state[3], byte)
        if kind == "end":
            raise ProgramError(f"byte {byte:#04x} after the end of the program (EOS was already read)")
        raise ProgramError(f"unknown FSM state {state!r}")

    @staticmethod
    def _body_step(nonempty: bool, partial: bytes, utf8: tuple, byte: int) -> tuple | None:
        if utf8:
            need, lo, hi = utf8
            if not lo <= byte <= hi:
                return None
            return ("body", True, b"", () if need == 1 else (need - 1, *_CONT))
        if partial:
            s = partial + bytes([byte])
            if s == _CLOSE:
                return OPS if nonempty else None
            if s in _ESCAPED:
                return ("body", True, b"", ())
            if s in _DEAD_RAW:
                return None
            if s in _PARTIALS:
                if s == _CLOSE_START and not nonempty:
                    return None  # only '>' may follow, and it would close an empty body: a dead end
                return ("body", nonempty, s, ())
            if partial.startswith(_COMMITTED):
                return None  # a non-canonical escape, or '</gen' followed by something else
            nonempty = True  # the partial was body text after all; `byte` starts afresh
        if byte in _PATTERN_FIRST:
            return ("body", nonempty, bytes([byte]), ())
        lead = _utf8_lead(byte)
        return None if lead is None else ("body", True, b"", lead)

    def walk(self, state, data: bytes):
        for byte in data:
            state = self.step(state, byte)
            if state is None:
                return None
        return state

    def accepts(self, data: bytes) -> bool:
        return self.walk(OPS, data) == OPS

    # ------------------------------------------------------------ completion

    def completion(self, state: tuple) -> bytes:
        """The shortest bytes that take `state` to the accepting state, using only allowed units."""
        kind = state[0] if isinstance(state, tuple) and state else None
        if kind == "ops":
            return b""
        if kind == "tag":
            prefix = state[1]
            options = [self._op_completion(tag)[len(prefix):] for tag in self._tags if tag.startswith(prefix)]
            if not options:
                raise ProgramError(f"unknown FSM state {state!r}")
            return min(options, key=len)
        if kind == "n1":
            value = state[2]
            first = str(value).encode() if value else _FIRST_DIGIT
            return (b"" if value else _FIRST_DIGIT) + _SEP + first + _COPY_END
        if kind == "n2":
            start, value = state[2], state[3]
            if value >= start:
                return _COPY_END
            if value == 0:
                return str(start).encode() + _COPY_END
            scale = 10  # the fewest digits appended to `value` that reach [start, limit]
            while (value + 1) * scale - 1 < start:
                scale *= 10
            target = max(start, value * scale)
            return str(target).encode()[len(str(value)):] + _COPY_END
        if kind == "lit":
            return _COPY_END[state[1]:]
        if kind == "body":
            return self._body_completion(state[1], state[2], state[3])
        raise ProgramError(f"no completion for FSM state {state!r}")

    @staticmethod
    def _op_completion(tag: bytes) -> bytes:
        if tag == _GEN_OPEN:
            return tag + _FILLER + _CLOSE
        return tag + _FIRST_DIGIT + _SEP + _FIRST_DIGIT + _COPY_END

    @staticmethod
    def _body_completion(nonempty: bool, partial: bytes, utf8: tuple) -> bytes:
        if utf8:
            need, lo, _ = utf8
            return bytes([lo]) + bytes([_CONT[0]]) * (need - 1) + _CLOSE
        if partial.startswith(_COMMITTED):
            if _CLOSE.startswith(partial):
                return _CLOSE[len(partial):]
            rest = min((p[len(partial):] for p in _ESCAPED if p.startswith(partial)), key=len)
            return rest + _CLOSE
        if partial:
            if nonempty and _CLOSE.startswith(partial):
                return _CLOSE[len(partial):]
            return _CLOSE  # its '<' turns the pending partial into body text, so the body is nonempty
        return _CLOSE if nonempty else _FILLER + _CLOSE

    def max_completion(self) -> int:
        """The length of the longest shortest completion over all live states."""
        if self._max_completion is None:
            self._max_completion = self._longest_completion()
        return self._max_completion

    def _longest_completion(self) -> int:
        states: list[tuple] = [("tag", p) for p in self._tag_prefixes if p not in self._tags]
        for unit, limit in self.limits.items():
            # the longest number completions: a first number at the limit, a second one from 0
            states += [("n1", unit, 0), ("n1", unit, limit), ("n2", unit, limit, 0), ("lit", 1)]
        pendings = [(), *{_utf8_lead(b) for b in range(0xC2, 0xF5)}]
        for nonempty in (False, True):
            for partial in [b"", *_PARTIALS]:
                if partial == _CLOSE_START and not nonempty:
                    continue
                states += [("body", nonempty, partial, ())]
            states += [("body", True, b"", u) for u in pendings if u]
        return max(len(self.completion(s)) for s in states)


def _added_ids(tokenizer) -> set[int]:
    added = getattr(tokenizer, "added_token_ids", None)
    return set(added) if added is not None else set(getattr(tokenizer, "_added", {}))


def _utf8_prefix_ok(piece: bytes) -> bool:
    """Is `piece` valid UTF-8 up to a possibly unfinished last character?"""
    if piece.isascii():
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(piece, final=False)
    except UnicodeDecodeError:
        return False
    return True


class ProgramFSM:
    """Allowed-token masks and transitions over a tokenizer's vocabulary.

    The tokenizer needs `vocab_size`, `piece(id) -> bytes` and `added_token_ids` (added and special
    tokens never spell program text)."""

    def __init__(self, tokenizer, limits: dict[str, int], eos_ids: tuple[int, ...] = ()):
        self.automaton = ByteAutomaton(dict(limits))
        self.tokenizer = tokenizer
        self.vocab_size: int = tokenizer.vocab_size
        self.eos_ids: tuple[int, ...] = tuple(eos_ids)
        excluded = _added_ids(tokenizer) | set(self.eos_ids)
        self._pieces: list[bytes | None] = [
            None if i in excluded else self._lookup(i) for i in range(self.vocab_size)
        ]
        self._by_first: dict[int, list[int]] = defaultdict(list)
        self._by_piece: dict[bytes, list[int]] = defaultdict(list)
        for i, piece in enumerate(self._pieces):
            if piece:
                self._by_first[piece[0]].append(i)
                self._by_piece[piece].append(i)
        has_pattern = [bool(p) and any(c in p for c in _PATTERN_FIRST) for p in self._pieces]
        self._pure = np.array([bool(p) and not h for p, h in zip(self._pieces, has_pattern)])
        self._plain_ok = np.array([bool(p) and _utf8_prefix_ok(p) for p in self._pieces])
        self._first_bytes = np.array([p[0] if p else 0 for p in self._pieces], dtype=np.int64)
        self._with_pattern = [i for i, h in enumerate(has_pattern) if h]
        self._masks: dict[tuple, np.ndarray] = {}
        self._cont_ok: dict[tuple, np.ndarray] = {}
        self._next: dict[tuple[tuple, int], tuple | None] = {}

    def _lookup(self, token_id: int) -> bytes | None:
        try:
            return self.tokenizer.piece(token_id)
        except Exception:  # an id with no vocabulary entry (padding rows of an embedding)
            return None

    # ------------------------------------------------------------ the public surface

    @property
    def initial(self) -> tuple:
        return OPS

    def piece(self, token_id: int) -> bytes | None:
        """The bytes a token spells in program text; None for EOS, added tokens and unknown ids."""
        return self._pieces[token_id] if 0 <= token_id < self.vocab_size else None

    def is_accepting(self, state) -> bool:
        return state == OPS

    def completion(self, state) -> bytes:
        return b"" if state == END else self.automaton.completion(state)

    def advance(self, state, token_id: int):
        """The state after `token_id`; a ProgramError if the token is not allowed there."""
        if state == END:
            raise ProgramError(
                f"token {token_id} ({self.piece(token_id)!r}) comes after the end of the program "
                "(an EOS token was already accepted)"
            )
        key = (state, token_id)
        if key not in self._next:
            if token_id in self.eos_ids:
                self._next[key] = END if state == OPS else None
            else:
                piece = self.piece(token_id)
                self._next[key] = self.automaton.walk(state, piece) if piece else None
        nxt = self._next[key]
        if nxt is None:
            raise ProgramError(
                f"token {token_id} ({self.piece(token_id)!r}) is not allowed in FSM state {state!r}"
            )
        return nxt

    def mask(self, state) -> np.ndarray:
        """Boolean mask over the vocabulary: which ids may come next in `state` (cached per state)."""
        mask = self._masks.get(state)
        if mask is None:
            mask = self.compute_mask(state)
            self._masks[state] = mask
        return mask

    allowed = mask  # the name the first callers used

    def compute_mask(self, state) -> np.ndarray:
        """The mask of `state`, computed afresh (not read from nor written to the cache)."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        if state == END:
            return mask
        if state == OPS:
            mask[list(self.eos_ids)] = True
        step = self.automaton.step
        if state[0] == "body" and not state[2].startswith(_COMMITTED):
            # A token without '<' or '&' cannot touch a pattern except by continuing the pending
            # partial, so its fate is its UTF-8 shape; only tokens with '<' or '&', or starting with a
            # byte that continues the partial, are walked one by one.
            _, _, partial, utf8 = state
            if utf8:
                mask |= self._continuations(utf8)
                danger: list[int] = []
            else:
                danger = [b for b in range(128) if partial + bytes([b]) in _CONTINUES] if partial else []
                safe_first = np.ones(256, dtype=bool)
                safe_first[danger] = False
                mask |= self._pure & self._plain_ok & safe_first[self._first_bytes]
            candidates = self._with_pattern + [i for b in danger for i in self._by_first.get(b, [])]
        else:
            candidates = [i for b, ids in self._by_first.items() if step(state, b) is not None for i in ids]
        walk = self.automaton.walk
        for i in candidates:
            if walk(state, self._pieces[i]) is not None:
                mask[i] = True
        return mask

    def _continuations(self, utf8: tuple) -> np.ndarray:
        """Pattern-free tokens allowed while a multi-byte character is pending."""
        ok = self._cont_ok.get(utf8)
        if ok is None:
            ok = np.zeros(self.vocab_size, dtype=bool)
            state = ("body", True, b"", utf8)
            for b in range(utf8[1], utf8[2] + 1):
                for i in self._by_first.get(b, []):
                    if self._pure[i] and self.automaton.walk(state, self._pieces[i]) is not None:
                        ok[i] = True
            self._cont_ok[utf8] = ok
        return ok

    def token_ids_spelling(self, data: bytes) -> list[int]:
        """Ids of the tokens whose piece is exactly `data`."""
        return list(self._by_piece.get(data, []))

    def accepts(self, text: str) -> bool:
        """Does the byte automaton accept `text` as a whole program?"""
        return self.automaton.accepts(text.encode("utf-8"))

    def walker(self, budget: int | None = None, margin: int | None = None) -> FsmWalker:
        return FsmWalker(self, budget=budget, margin=margin)


class FsmWalker:
    """One generation's walk through a ProgramFSM, optionally within a budget of `budget` tokens.

    With `margin` or fewer tokens of the budget left, no new op may start (only EOS between ops) and
    inside an op only tokens that spell a prefix of the shortest completion are allowed. `margin`
    defaults to the longest shortest completion of any state (a smaller one is refused): when forcing
    starts the completion fits in what is left, and each forced token shortens it by at least one
    byte, so the output is always a whole program.
    """

    def __init__(self, fsm: ProgramFSM, budget: int | None = None, margin: int | None = None):
        needed = fsm.automaton.max_completion()
        if margin is None:
            margin = needed
        if margin < needed:
            raise ProgramError(f"walker margin {margin} is below the longest completion ({needed} tokens)")
        if budget is not None and budget < 0:
            raise ProgramError(f"walker budget must be >= 0 tokens, got {budget}")
        self.fsm = fsm
        self.budget = budget
        self.margin = margin
        self.state: tuple = fsm.initial
        self.generated = 0

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.generated

    @property
    def forcing(self) -> bool:
        """Is the budget so close that only the completion (or EOS) may come next?"""
        return self.budget is not None and self.remaining <= self.margin

    @property
    def finished(self) -> bool:
        return self.state == END

    def advance(self, token_id: int) -> tuple:
        self.state = self.fsm.advance(self.state, token_id)
        self.generated += 1
        return self.state

    def is_accepting(self) -> bool:
        return self.fsm.is_accepting(self.state)

    def completion(self) -> bytes:
        return self.fsm.completion(self.state)

    def allowed(self) -> np.ndarray:
        """Boolean mask over the vocabulary for the next token, budget included."""
        return self.forced() if self.forcing else self.fsm.mask(self.state)

    def forced(self) -> np.ndarray:
        """Only EOS when accepting; else only allowed tokens spelling a prefix of the completion."""
        mask = np.zeros(self.fsm.vocab_size, dtype=bool)
        if self.finished:
            return mask
        if self.is_accepting():
            mask[list(self.fsm.eos_ids)] = True
            return mask
        rest = self.completion()
        ids = [i for k in range(1, len(rest) + 1) for i in self.fsm.token_ids_spelling(rest[:k])]
        mask[ids] = True
        mask &= self.fsm.mask(self.state)
        if not mask.any():
            raise ProgramError(
                f"the vocabulary has no token spelling a prefix of the completion {rest!r} "
                f"of FSM state {self.state!r}"
            )
        return mask
