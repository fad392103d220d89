"""Copy-as-Decode, `copy-<level>-<directives>`: the oracle program at line or token level
(analysis.coverage.spans, the rows the bounds price), given the numbered prompt.

Its forwards, each op in order: its directive tokens (the bounds price them at the op's start context, so
they come first and emit nothing), then its payload: a copy is one prefill of the source tokens it
forwards (emitting its gold tokens; a copy that forwards no token has no forward), a gen op one decode step
per gold token. A forward per token the program produces, as for every method: the copy's tag is produced
token by token, but its last token (`"/>`) needs no forward of its own, as what it would produce (the
copied text) is known: it goes into the cache with the copied tokens, in the copy's prefill (q = 1 + the
source tokens), as the suite's decoders do (docs/grammar.md). `decoded`: every other directive token is a
decode step (what a deployment without grammar jump-forward pays); `jump`: the tokens the grammar forces
(analysis.rivals.forced) are not decoded but prefilled with the next forward, which then has q = 1 + those
tokens (a prefill-type forward); `ideal`: directive tokens free (an upper bound, never a rival). The e2e
executor runs `decoded` and `ideal` with the same forwards (tested beside the bounds' count).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from analysis.layout import LEVELS
from analysis.rivals.forwards import Forwards
from analysis.rivals.methods import PROGRAM_PROMPT, Family, Method, register

DECODED, JUMP, IDEAL = "decoded", "jump", "ideal"
DIRECTIVES = (DECODED, JUMP, IDEAL)
DIRECTIVE_LABELS = {DECODED: "directives decoded", JUMP: "forced directive tokens jump-forwarded",
                    IDEAL: "directives free (upper bound)"}
DIRECTIVE_SHORT = {DECODED: "directives decoded", JUMP: "forced tokens jump-forwarded", IDEAL: "ideal (upper bound)"}


GenForwards = Callable[[int, int], Forwards]  # (the gen op's first gold token, its token count) -> its forwards


def copy_forwards(ops: Sequence, forcing: Sequence, directives: str, gen: GenForwards | None = None) -> Forwards:
    """A program's forwards (module docstring): `ops` its analysis.coverage.spans.SpanRow rows, `forcing` an
    analysis.rivals.forced.OpForcing per op (used by `jump` only); `gen`, when given, produces a gen op's tokens
    instead of one decode step each (the hybrid drafts them: analysis.rivals.families.copy_pld)."""
    out = Forwards()
    carry = 0  # jump-forwarded tokens waiting for the next forward
    produced = 0  # gold tokens before the op

    def step(emitted: int) -> None:
        nonlocal carry
        out.add(1 + carry, emitted, carry > 0)
        carry = 0

    def join(part: Forwards) -> None:  # the waiting jump-forwarded tokens ride with the part's first forward
        nonlocal carry
        for q, emitted, prefill in zip(part.new_tokens, part.emitted, part.prefill, strict=True):
            out.add(q + carry, emitted, prefill or carry > 0)
            carry = 0

    for op, forced in zip(ops, forcing, strict=True):
        if directives != IDEAL:
            flags = list(forced.flags) if directives == JUMP else []
            if len(flags) > op.directive_tokens:
                raise ValueError(f"op {op.op_index}: {len(flags)} forcing flags for {op.directive_tokens} directive tokens")
            flags += [False] * (op.directive_tokens - len(flags))  # escapes' extra tokens: decoded
            if op.kind == "copy" and op.n_tokens_src > 0 and flags:
                flags[-1] = True  # the tag's last token rides with the copy's prefill
            for is_forced in flags:
                if is_forced:
                    carry += 1
                else:
                    step(0)
        if op.kind == "copy":
            if op.n_tokens_src > 0:
                out.add(op.n_tokens_src + carry, op.n_tokens, True)
                carry = 0
        elif gen is not None:
            join(gen(produced, op.n_tokens))
        else:
            for _ in range(op.n_tokens):
                step(1)
        produced += op.n_tokens
    return out


@register
class CopyAsDecode(Family):
    name, title, position = "copy", "Copy-as-Decode", 50
    fields, choices = ("level", "directives"), {"level": LEVELS, "directives": DIRECTIVES}
    prompt, executor = PROGRAM_PROMPT, "program"

    def label(self, m: Method) -> str:
        return f"Copy-as-Decode {m.level}, {DIRECTIVE_LABELS[m.directives]}"

    def short(self, m: Method) -> str:
        return f"Copy-as-Decode {m.level}, {DIRECTIVE_SHORT[m.directives]}"

    def role(self, m: Method) -> str:
        return "bound" if m.directives == IDEAL else "copy"

    def headline_rank(self, m: Method) -> int:
        return 3 if m.directives == IDEAL else 0

    def forwards(self, m: Method, case, drafts, env) -> Forwards:
        ops, forcing = case.programs[m.level]
        return copy_forwards(ops, forcing, m.directives)

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        return tuple(Method(self.name, level=level, directives=d) for level in LEVELS for d in DIRECTIVES)
