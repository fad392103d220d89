"""Which directive tokens of a program the grammar forces: the jump-forward variant of Copy-as-Decode.

A serving engine with a grammar (SGLang's compressed FSM, llguidance's fast-forward tokens) does not
sample a token whose bytes the grammar leaves no choice about: it appends it and prefills it with the
next forward. Here, precisely: a directive token is **forced** when, walking the program grammar's byte
automaton (analysis.grammar.fsm.ByteAutomaton, with the case's copy limit) from the state before the
token, every one of its bytes is the only byte the automaton admits at that point, and the state is not
an accepting one (between ops the program may also end, so the `<` that opens an op is always a
choice). Everything else is decoded: the `<` of each op, the digits of a copy's range (a number that
may still grow is a choice, the `-` and the closing `"` are forced only once it cannot), `copy`/`gen`
after `<` (either op may follow), and the first byte of `</gen>` inside a body (any text may follow).

With the Qwen2.5 tokenizer a line copy `<copy lines="12-15"/>` is 10 tokens (`<`, `copy`, ` lines`,
`="`, `1`, `2`, `-`, `1`, `5`, `"/>`) of which ` lines` and `="` are always forced, and `-` and `"/>`
when the number before them cannot take another digit within the source's line count; `<gen>` and
`</gen>` are three tokens each, their `>` forced.

Directive tokens are tokenized op by op, as the spans count them (analysis.coverage.spans.DirectiveCounter:
the copy tag alone; `<gen>` and `</gen>` alone); the extra tokens of escapes in a body are decoded.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.grammar.fsm import OPS, ByteAutomaton
from analysis.grammar.program import GEN_CLOSE, GEN_OPEN, Copy, Gen, Op, escape, render_op


@dataclass(frozen=True)
class OpForcing:
    """Per directive token of an op, in order (the copy tag; `<gen>` then `</gen>`), whether it is forced."""

    flags: tuple[bool, ...]

    @property
    def total(self) -> int:
        return sum(self.flags)


class ForcedCounter:
    """Counts forced directive tokens of ops over one source (its copy unit and limit)."""

    def __init__(self, tokenizer, unit: str, limit: int):
        self.tokenizer = tokenizer
        self.automaton = ByteAutomaton({unit: limit})
        self._only: dict[tuple, int | None] = {}
        self._ids: dict[str, list[int]] = {}

    def _only_byte(self, state: tuple) -> int | None:
        """The one byte the automaton admits at `state`, or None (several, none, or the program may end)."""
        try:
            return self._only[state]
        except KeyError:
            pass
        only = None
        if state != OPS:
            admitted = [b for b in range(256) if self.automaton.step(state, b) is not None]
            only = admitted[0] if len(admitted) == 1 else None
        self._only[state] = only
        return only

    def _tokens(self, text: str) -> list[int]:
        ids = self._ids.get(text)
        if ids is None:
            ids = self._ids[text] = list(self.tokenizer.encode(text).ids)
        return ids

    def walk(self, state: tuple, text: str) -> tuple[list[bool], tuple]:
        """(per token of `text` tokenized alone, whether it is forced; the state after it) from `state`."""
        forced = []
        for token_id in self._tokens(text):
            all_forced = True
            for byte in self.tokenizer.piece(token_id):
                if self._only_byte(state) != byte:
                    all_forced = False
                state = self.automaton.step(state, byte)
                if state is None:
                    raise ValueError(f"{text!r} is not a valid directive here (byte {byte!r})")
            forced.append(all_forced)
        return forced, state

    def of(self, op: Op) -> OpForcing:
        if isinstance(op, Copy):
            return OpForcing(tuple(self.walk(OPS, render_op(op))[0]))
        if not isinstance(op, Gen):
            raise TypeError(f"not a program operation: {op!r}")
        lead, state = self.walk(OPS, GEN_OPEN)
        for byte in escape(op.text).encode("utf-8"):
            state = self.automaton.step(state, byte)
            if state is None:
                raise ValueError(f"a <gen> body the grammar refuses: {op.text[:40]!r}")
        tail, _ = self.walk(state, GEN_CLOSE)
        return OpForcing(tuple(lead + tail))
