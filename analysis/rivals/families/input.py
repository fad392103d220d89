"""The input as the draft, re-aligned: its drafter (an online object over token ids, torch-free) and its family,
`input-k<k>` (analysis.rivals.methods), from params `<stage>.input`: every verify window of `k` (and the whole
rest of the input, `kinf`, when `unbounded`), each re-aligned by `resync_ngram` and `realign`.

The shape users ask engines for as "predicted outputs" (OpenAI's `prediction` parameter; vLLM's requests
#10137 and "speculative edits" #5201; the predicted-outputs PRs #23450 and #24568, both closed) and the reuse
phase of EfficientEdit (Wang et al., arXiv 2506.02780; `efficient_edit_speculative_sampling` in
zhu-zhu-ding/EfficientEdit, efficienedit/speculative_sampling.py), itself the input-guided aggressive decoding
of Sun et al. 2021 and Ge et al. 2022 (onnxruntime's `BifurcationDetector` operator): the edit's input is the
draft. What it does:

* While aligned, the draft is the input from the aligned position on: at most `k` tokens (the verify window;
  EfficientEdit verifies the whole remaining input in one forward, `kinf` here). Each token that enters the
  output and equals the input at the aligned position moves the position on by one.
* The first output token that differs from the input there (a rejected draft token's correction, or a token
  decoded while the input is used up) loses the alignment; the input position where it was lost is kept.
* Out of alignment the drafter proposes nothing (each forward is a plain decode step: EfficientEdit's edit phase
  runs a draft model there, a model-free deployment decodes) until the output's last `resync_ngram` tokens
  occur in the input (EfficientEdit's draft length `edit_gamma` = 7 is its n-gram: `resync_ngram`'s default);
  the draft re-aligns to the input token after that occurrence:
  - `realign: ahead`, EfficientEdit's code (`find_suffix_and_return_remaining` over the remaining input): the
    first occurrence at or after the position where the alignment was lost. A false match ahead (the edit's
    new text recurring later in the input) strands it: the next mismatch leaves the true position behind, and
    it decodes the rest of the output token by token.
  - `realign: anywhere` (the default): the same first occurrence at or after that position, else the latest
    before it, so a false match ahead is undone at the next mismatch: the shape a diff-aligned predicted output
    has. onnxruntime's `BifurcationDetector` (aggressive decoding) searches the whole input too, and re-aligns
    on the shortest trailing n-gram that occurs there exactly once.

The drafter reads only the input (the unnumbered source) and the output so far, never the gold still to come.
It assumes of the engine what prompt lookup does: a verify forward of the draft plus the pending token, the
longest agreeing prefix kept (speculative decoding with greedy acceptance).

Use: `InputDraft(source_ids, resync_ngram, realign)`, `draft(k)` before each forward (k=None: the whole rest of the
input), `extend(tokens)` after it (every token that entered the output, the corrected one included). The
input's n-grams are indexed once, so a re-alignment costs one dictionary probe and a bisection.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from analysis.errors import ParamsError
from analysis.pipeline.params import choice, known_keys, positive_int
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import Family, Method, draft_budgets, register

RESYNC_NGRAM = 7      # EfficientEdit's edit_gamma: the output tail that must recur in the input to re-align
RESYNC_LIMIT = 64     # a longer tail re-aligns almost never: a typo (700) would silently turn re-alignment off
REALIGN = ("anywhere", "ahead")  # where a re-alignment may land (module docstring)


@dataclass(frozen=True)
class InputSettings:
    resync_ngram: int   # the output's trailing tokens that must recur in the input to re-align
    realign: str        # REALIGN: where a re-alignment may land

    def validate(self) -> InputSettings:
        n = self.resync_ngram
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= RESYNC_LIMIT:
            raise ParamsError(f"input as draft: resync_ngram must be an integer in [1, {RESYNC_LIMIT}] "
                              f"(EfficientEdit's value: {RESYNC_NGRAM}), got {n!r}")
        if self.realign not in REALIGN:
            raise ParamsError(f"input as draft: realign must be one of {', '.join(REALIGN)}, got {self.realign!r}")
        return self


class InputDraft:
    """Drafts the input from the aligned position; re-aligns after a mismatch (see the module docstring)."""

    def __init__(self, source: Sequence[int], resync_ngram: int = RESYNC_NGRAM, realign: str = REALIGN[0]):
        self.source = [int(t) for t in source]
        self.n = InputSettings(resync_ngram, realign).validate().resync_ngram
        self.anywhere = realign == "anywhere"
        self.output: list[int] = []
        self.position: int | None = 0   # the input token the next output token is expected to be; None: lost
        self.lost_at = 0                # the input position where the alignment was last lost
        # starts[ngram]: the start positions of each n-gram of the input, ascending
        self._starts: dict[tuple[int, ...], list[int]] = {}
        for start in range(len(self.source) - self.n + 1):
            self._starts.setdefault(tuple(self.source[start:start + self.n]), []).append(start)

    @property
    def aligned(self) -> bool:
        return self.position is not None

    def draft(self, k: int | None) -> list[int]:
        """At most k input tokens from the aligned position (k=None: the rest of the input); [] out of alignment."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise ParamsError(f"input as draft: the verify window must be a non-negative integer or None, got {k!r}")
        if self.position is None or k == 0:
            return []
        end = len(self.source) if k is None else min(len(self.source), self.position + k)
        return self.source[self.position:end]

    def extend(self, tokens: Iterable[int]) -> None:
        """Append the tokens a forward put into the output, then try to re-align if the alignment is lost."""
        for token in tokens:
            token = int(token)
            self.output.append(token)
            if self.position is None:
                continue
            if self.position < len(self.source) and self.source[self.position] == token:
                self.position += 1
            else:
                self.lost_at, self.position = self.position, None
        if self.position is None:
            self.position = self._realign()

    def _realign(self) -> int | None:
        """The input position after the first occurrence, at or after `lost_at`, of the output's last n tokens
        (`anywhere`: else after the latest occurrence before it)."""
        if len(self.output) < self.n:
            return None
        starts = self._starts.get(tuple(self.output[-self.n:]), ())
        found = bisect.bisect_left(starts, self.lost_at)
        if found < len(starts):
            return starts[found] + self.n
        return starts[-1] + self.n if starts and self.anywhere else None


@register
class InputAsDraft(Family):
    name, title, position = "input", "input as draft", 30
    fields, unbounded = ("k",), True
    speculative = True
    group, keys = "input", ("k", "unbounded", "resync_ngram", "realign")

    def label(self, m: Method) -> str:
        return f"input as draft, re-aligned (window {m.budget})"

    def short(self, m: Method) -> str:
        return f"input as draft, window {m.budget}"

    def headline_rank(self, m: Method) -> int:
        return 2

    def options(self, params: dict, where: str) -> InputSettings:
        return InputSettings(positive_int(params, f"{where}.resync_ngram"),
                             choice(params, f"{where}.realign", REALIGN)).validate()

    def drafter(self, m: Method, context, drafts) -> InputDraft:
        s = drafts.of(self.name)
        return InputDraft(list(context), s.resync_ngram, s.realign)

    def forwards(self, m: Method, case, drafts, env):
        return speculative_forwards(self.drafter(m, case.source_ids, drafts), case.gold, m.k)

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        self.options(params, where)  # a bad resync_ngram is named with the members, not at the first case
        return tuple(Method(self.name, k=k) for k in draft_budgets(params, f"{where}.k", unbounded=f"{where}.unbounded"))
