"""Prompt lookup decoding: its drafter (an online object over token ids, torch-free) and its family,
`pld-<policy>-k<k>` (analysis.rivals.methods), from params `<stage>.pld`: every policy of `policies` at every
draft budget of `k`, and unbounded drafts (`kinf`) when `unbounded`.

The named standard is the policy of transformers' `PromptLookupCandidateGenerator` (read in
transformers 5.24's `generation/candidate_generator.py`; the numbers below are its defaults):

* the pattern is the context's trailing n-gram, n from `max_ngram` (2: `max_matching_ngram_size or 2`
  in `generate`) down to `min_ngram` (1), never longer than the context minus one token;
* for the longest n that has an earlier occurrence, the draft is the tokens after the **earliest**
  occurrence (its `match_indices` are taken left to right) up to `k` of them (`prompt_lookup_num_tokens`)
  and never past the end of the context; the trailing n-gram itself has nothing after it, so it is
  never the match;
* no match at any n: an empty draft (the step is a plain decode step).

`latest` beside it takes the occurrence nearest the end instead (the most recent copy of the text;
the suite's e2e executor drafted that way before). transformers also
crops a draft at an EOS token and at `max_length` (the prompt plus max_new_tokens, a user's setting); the
gold outputs hold no EOS, and no draft is cropped to the gold still to come: the verify forwards the whole
draft (analysis.rivals.forwards.speculative_forwards).

Use: `PromptLookup(prompt_ids)`, then `draft(k)` before each forward and `extend(accepted)` after it
(every token that entered the output, the corrected one included). `k=None` drafts to the end of the
context (unbounded). Each n-gram is indexed by its start positions as tokens arrive, so a draft costs
O(max_ngram) dictionary probes plus its own length, however long the context.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from analysis.errors import ParamsError
from analysis.pipeline.params import choices, known_keys
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import Family, Method, draft_budgets, register

POLICIES = ("earliest", "latest")
STANDARD_POLICY = "earliest"
MAX_NGRAM = 2   # transformers: generation_config.max_matching_ngram_size or 2
MIN_NGRAM = 1   # transformers: range(..., 0, -1) stops at n = 1
NGRAM_LIMIT = 64  # one table per size is built up front: a typo (10**9) would exhaust memory, not fail


class PromptLookup:
    """Drafts from earlier occurrences of the context's trailing n-gram (see the module docstring)."""

    def __init__(self, prompt: Sequence[int], *, policy: str = STANDARD_POLICY, max_ngram: int = MAX_NGRAM,
                 min_ngram: int = MIN_NGRAM):
        if policy not in POLICIES:
            raise ParamsError(f"prompt lookup policy must be one of {POLICIES}, got {policy!r}")
        if isinstance(max_ngram, int) and max_ngram > NGRAM_LIMIT:
            raise ParamsError(f"prompt lookup max_ngram is {max_ngram}, above {NGRAM_LIMIT} (transformers' default: 2)")
        if not (isinstance(min_ngram, int) and isinstance(max_ngram, int) and 1 <= min_ngram <= max_ngram):
            raise ParamsError(f"prompt lookup n-gram sizes need 1 <= min_ngram <= max_ngram, got "
                              f"min_ngram={min_ngram!r}, max_ngram={max_ngram!r}")
        self.policy, self.max_ngram, self.min_ngram = policy, max_ngram, min_ngram
        self.context: list[int] = []
        # starts[n][ngram]: the start positions of each n-gram, in the order they arrived
        self._starts: list[dict[tuple[int, ...], list[int]]] = [{} for _ in range(max_ngram + 1)]
        self.extend(prompt)

    def __len__(self) -> int:
        return len(self.context)

    def extend(self, tokens: Iterable[int]) -> None:
        """Append tokens to the context (the prompt, or the tokens a forward accepted)."""
        context, starts, top = self.context, self._starts, self.max_ngram
        for token in tokens:
            context.append(int(token))
            end = len(context)
            for n in range(1, min(top, end) + 1):
                starts[n].setdefault(tuple(context[end - n:]), []).append(end - n)

    def match(self) -> tuple[int, int] | None:
        """(n, start) of the occurrence the next draft copies from, or None."""
        length = len(self.context)
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            starts = self._starts[n].get(tuple(self.context[length - n:]), ())
            # the last start is the trailing n-gram itself (length - n), which has nothing after it
            if len(starts) >= 2:
                return n, (starts[0] if self.policy == "earliest" else starts[-2])
        return None

    def draft(self, k: int | None) -> list[int]:
        """At most k tokens (k=None: to the end of the context) that followed the match; [] without one."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise ParamsError(f"prompt lookup draft budget must be a non-negative integer or None, got {k!r}")
        found = self.match()
        if found is None or k == 0:
            return []
        n, start = found
        begin = start + n
        return self.context[begin:] if k is None else self.context[begin:begin + k]


@register
class PromptLookupFamily(Family):
    name, title, position = "pld", "prompt lookup", 10
    fields, choices, unbounded = ("policy", "k"), {"policy": POLICIES}, True
    executor, speculative = "speculative", True
    group, keys = "pld", ("policies", "k", "unbounded", "ngram_max")

    def label(self, m: Method) -> str:
        return f"prompt lookup ({m.policy}, k={m.budget})"

    def short(self, m: Method) -> str:
        return f"PLD {m.policy}, k={m.budget}"

    def drafter(self, m: Method, context, drafts) -> PromptLookup:
        return PromptLookup(list(context), policy=m.policy, max_ngram=drafts.ngram_max)

    def forwards(self, m: Method, case, drafts, env):
        return speculative_forwards(self.drafter(m, case.source_ids, drafts), case.gold, m.k)

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        policies = choices(params, f"{where}.policies", POLICIES)
        budgets = draft_budgets(params, f"{where}.k", unbounded=f"{where}.unbounded")
        return tuple(Method(self.name, policy=p, k=k) for p in policies for k in budgets)
