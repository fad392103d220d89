"""Copy-as-Decode with prompt lookup inside its gen spans, `copy-pld-<level>-<directives>-k<k>`: a method nobody
ships. Copies by program (analysis.rivals.families.copy: each copy one prefill, the directive tokens `decoded` or
forced ones `jump`-forwarded, exactly as Copy-as-Decode), and each gen span's new text drafted by prompt lookup
(analysis.rivals.families.pld, transformers' policy: the `policy` of params, the shared `ngram_max`) with up to
k tokens per verify, instead of one decode step per token. From params `<stage>.copy_pld`: every level of
`levels`, every directive mode of `directives`, every draft budget of `k`.

Why: a gen span is often a near-copy of an input line (a renamed variable, a changed operator), which prompt
lookup drafts well and a program must spell token by token (the correctness audit found it: on HEvalFix, prompt lookup
at k = 64 is 8.5x against Copy-as-Decode's 2.1x).

What the drafter sees: the unnumbered source and the output resolved so far (the copied lines' text and the
generated text), which is what the engine that resolves the copies holds; never the directive tokens (prompt
lookup would never propose them) and never the gold still to come. A gen span is verified against its own tokens:
a draft token past the span's end counts as rejected (the span's close tag is decoded as Copy-as-Decode decodes
it), so a draft never runs into the next op. Of the engine it assumes both Copy-as-Decode's (a copy served by one
prefill, the grammar that knows a copy's text) and prompt lookup's (a verify forward with greedy acceptance),
inside one request: no engine has both today. Not run end to end, not simulated under load (its verifies are
atomic and its copies chunkable, which the serving simulation's per-method rule cannot express).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.layout import LEVELS
from analysis.pipeline.params import choice, choices, known_keys
# the modules, not their names: whichever family module is imported first loads the others (the registry's
# load_families) while it is itself half-imported, so their names are read when a case runs
from analysis.rivals.families import copy as program
from analysis.rivals.families import pld as lookup
from analysis.rivals.forwards import Forwards, speculative_forwards
from analysis.rivals.methods import PROGRAM_PROMPT, Family, Method, draft_budgets, register

# Copy-as-Decode's DECODED and JUMP (what a deployment pays; the ideal variant is Copy-as-Decode's own bound),
# spelled here for the reason above (a test holds them equal)
HYBRID_DIRECTIVES = ("decoded", "jump")


@dataclass(frozen=True)
class HybridSettings:
    policy: str         # prompt lookup's match policy in the gen spans (analysis.rivals.families.pld.POLICIES)


class GenDrafts:
    """A gen op's forwards by prompt lookup over the source and the output resolved so far (module docstring)."""

    def __init__(self, drafter, gold, k: int):
        self.drafter, self.gold, self.k = drafter, gold, k
        self.seen = 0  # gold tokens already in the drafter's context

    def __call__(self, start: int, n: int) -> Forwards:
        self.drafter.extend(self.gold[self.seen:start])  # the copies' text since the last gen span
        span = self.gold[start:start + n]
        self.seen = start + n
        return speculative_forwards(self.drafter, span, self.k)


@register
class CopyWithLookup(Family):
    name, title, position = "copy-pld", "Copy-as-Decode + prompt lookup in gen spans", 51
    fields, choices = ("level", "directives", "k"), {"level": LEVELS, "directives": HYBRID_DIRECTIVES}
    prompt = PROGRAM_PROMPT
    group, keys = "copy_pld", ("levels", "directives", "k", "policy")
    unservable = "its copies are splittable prefills and its verifies atomic, one rule per method in the scheduler"

    def label(self, m: Method) -> str:
        return f"Copy-as-Decode {m.level}, {program.DIRECTIVE_LABELS[m.directives]}, gen spans by prompt lookup (k={m.k})"

    def short(self, m: Method) -> str:
        return f"Copy-as-Decode {m.level} + PLD in gen spans, {program.DIRECTIVE_SHORT[m.directives]}, k={m.k}"

    def role(self, m: Method) -> str:
        # Half Copy-as-Decode, half prompt lookup: counted as either side it would decide the head-to-head by
        # itself, so it stands beside the decision.
        return "hybrid"

    def headline_rank(self, m: Method) -> int:
        return 0

    def options(self, params: dict, where: str) -> HybridSettings:
        return HybridSettings(choice(params, f"{where}.policy", lookup.POLICIES))

    def forwards(self, m: Method, case, drafts, env) -> Forwards:
        ops, forcing = case.programs[m.level]
        drafter = lookup.PromptLookup(list(case.source_ids), policy=drafts.of(self.name).policy, max_ngram=drafts.ngram_max)
        return program.copy_forwards(ops, forcing, m.directives, gen=GenDrafts(drafter, case.gold, m.k))

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        self.options(params, where)  # a bad policy is named with the members, not at the first case
        budgets = draft_budgets(params, f"{where}.k")
        levels = choices(params, f"{where}.levels", LEVELS)
        modes = choices(params, f"{where}.directives", HYBRID_DIRECTIVES)
        return tuple(Method(self.name, level=level, directives=d, k=k) for level in levels for d in modes
                     for k in budgets)
