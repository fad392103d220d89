"""A method's forward log on one case, and the two shapes most families build it in.

`Forwards`: per forward `new_tokens` (q, the tokens it forwards), `emitted` (the output tokens it yields)
and `prefill` (a prefill-type forward: a copy's prefill, a speculative verify of q > 1 tokens, a forward
that also carries jump-forwarded tokens; else a decode step). The rivals simulation builds one per case and
method (analysis.rivals.simulate), the serving simulation schedules them (analysis.serving.forwards), the e2e
executor logs the forwards it timed as one (`Forwards.from_log`), and all of them are priced by one function
on the bounds' rules (analysis.rivals.pricing).

`decode_forwards`: n decode steps (a whole rewrite, an edit format's text). `speculative_forwards`: a
drafter with **gold acceptance**: before each forward the drafter proposes up to k tokens from what a
deployment's drafter sees (the context: the unnumbered source and the output so far), never cropped to the
gold still to come, which no drafter knows (transformers' prompt lookup drafts to the end of the context:
`input_ids[start : min(start + k, input_length)]`); the forward verifies the whole draft (q = draft + 1) and
yields the longest prefix equal to the gold continuation plus one corrected token (emitted = accepted + 1;
the last gold token always comes as a corrected token, as no EOS is counted). An empty draft is a plain
decode step. Every speculative family (analysis.rivals.families) drafts through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from analysis.errors import ParamsError


@dataclass
class Forwards:
    """One method's forwards on one case."""

    new_tokens: list[int] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)
    prefill: list[bool] = field(default_factory=list)

    def add(self, q: int, emitted: int, prefill: bool) -> None:
        self.new_tokens.append(int(q))
        self.emitted.append(int(emitted))
        self.prefill.append(bool(prefill))

    def __len__(self) -> int:
        return len(self.new_tokens)

    @classmethod
    def from_log(cls, new_tokens: Sequence[int], emitted: Sequence[int], where: str = "e2e") -> Forwards:
        """A measured forward log (the e2e executor's `new_tokens`, `emitted`), which holds no `prefill`
        flags: a forward of q > 1 tokens is a prefill-type forward, a one-token forward a decode step."""
        if len(new_tokens) != len(emitted):
            raise ParamsError(f"{where}: a forward log has {len(new_tokens)} query lengths and {len(emitted)} "
                              "emitted counts")
        for q, e in zip(new_tokens, emitted):
            if q == 1 and e != 1:
                raise ParamsError(f"{where}: a one-token forward logged {e} emitted tokens (a decode step commits one)")
        return cls([int(q) for q in new_tokens], [int(e) for e in emitted], [int(q) > 1 for q in new_tokens])


def decode_forwards(n: int) -> Forwards:
    """n decode steps, one token each (AR over the gold output, or an edit format's text)."""
    return Forwards([1] * n, [1] * n, [False] * n)


def speculative_forwards(drafter, gold: Sequence[int], k: int | None) -> Forwards:
    """Gold-acceptance speculation (module docstring) with a drafter that has `draft(k)` and
    `extend(tokens)`; k None: the drafter's own end (prompt lookup: the end of the context)."""
    out = Forwards()
    pos, total = 0, len(gold)
    while pos < total:
        draft = drafter.draft(k)
        if k is not None and len(draft) > k:
            raise ValueError(f"a drafter returned {len(draft)} tokens for a budget of {k}")
        room = total - pos - 1  # draft tokens that can be accepted: the last gold token is a corrected one
        accepted = 0
        while accepted < min(len(draft), room) and draft[accepted] == gold[pos + accepted]:
            accepted += 1
        out.add(len(draft) + 1, accepted + 1, bool(draft))
        drafter.extend(gold[pos:pos + accepted + 1])
        pos += accepted + 1
    return out
