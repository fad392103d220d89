"""llama.cpp's `ngram-simple` self-speculation: its drafter (an online object over token ids, torch-free) and its
family, `ngram-simple-k<k>` (analysis.rivals.methods), from params `<stage>.ngram_simple`: every m-gram length of
`k`, with the lookup n-gram `size_n`.

Read in llama.cpp's `common/ngram-map.cpp` (`common_ngram_simple_draft`, PR #18471) and `docs/speculative.md`;
the numbers are llama-server's defaults (`--spec-type ngram-simple`, `--spec-ngram-size-n 12`,
`--spec-ngram-size-m 48`, `--spec-ngram-check-rate 1`). Before each forward, over the context (the history plus
the token just sampled):

* no draft while the history is not longer than n + m + 1 tokens;
* the pattern is the context's last n tokens; the search runs backwards through the history for the **latest**
  earlier occurrence that ends at least one token before the history's end (the current one is skipped);
* the draft is the m tokens that followed that occurrence, fewer when the history ends first, and no draft when
  fewer than n tokens follow it.

k is the m-gram length (the draft it proposes; `--draft-max` must be at least m, as the docs' example sets 64);
a smaller budget asked of `draft` (the simulation's) cuts the m-gram, it does not change the rule.
llama.cpp's history starts at the prompt template, so it skips a match at position 0; the context here starts
at the unnumbered source (no template before it), so a match at the source's first token counts. The check rate
(one lookup every R tokens) is 1, llama-server's default. The drafter reads the source and the output so far,
never the gold still to come; of the engine it assumes speculative decoding with greedy acceptance (a verify
forward of the draft plus the pending token).

Use: `NgramSimple(prompt_ids, size_n, size_m)`, `draft(limit)` before each forward, `extend(tokens)` after it. Each n-gram is
indexed by its start positions as tokens arrive, so a lookup is one probe and a bisection.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from analysis.errors import ParamsError
from analysis.pipeline.params import known_keys, positive_int
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import Family, Method, draft_budgets, register

SIZE_N = 12         # --spec-ngram-size-n: the lookup n-gram
SIZE_M = 48         # --spec-ngram-size-m: the draft m-gram (the family's k)
SIZE_N_LIMIT = 1024  # llama.cpp refuses a size above 1024


@dataclass(frozen=True)
class NgramSimpleSettings:
    size_n: int         # the lookup n-gram (--spec-ngram-size-n)

    def validate(self) -> NgramSimpleSettings:
        n = self.size_n
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= SIZE_N_LIMIT:
            raise ParamsError(f"ngram-simple: size_n must be an integer in [1, {SIZE_N_LIMIT}] (llama.cpp's default: "
                              f"{SIZE_N}), got {n!r}")
        return self


class NgramSimple:
    """llama.cpp's `common_ngram_simple_draft` over a growing context (see the module docstring)."""

    def __init__(self, prompt: Sequence[int], size_n: int = SIZE_N, size_m: int = SIZE_M):
        self.n = NgramSimpleSettings(size_n).validate().size_n
        if isinstance(size_m, bool) or not isinstance(size_m, int) or size_m < 1:
            raise ParamsError(f"ngram-simple: size_m must be a positive integer, got {size_m!r}")
        self.m = size_m
        self.context: list[int] = []
        self._starts: dict[tuple[int, ...], list[int]] = {}  # each n-gram's start positions, ascending
        self.extend(prompt)

    def extend(self, tokens: Iterable[int]) -> None:
        context, n = self.context, self.n
        for token in tokens:
            context.append(int(token))
            if len(context) >= n:
                self._starts.setdefault(tuple(context[-n:]), []).append(len(context) - n)

    def match(self) -> int | None:
        """The start of the latest earlier occurrence of the context's last n tokens, or None."""
        history = len(self.context) - 1     # llama.cpp's cur_len: the context less the token just sampled
        starts = self._starts.get(tuple(self.context[-self.n:]), ())
        found = bisect.bisect_right(starts, history - self.n - 1) - 1  # the backward search's first hit
        return starts[found] if found >= 0 else None

    def draft(self, limit: int | None = None) -> list[int]:
        """The m tokens after the match (fewer where the history ends), at most `limit`; [] without a match or
        when fewer than n tokens follow it."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ParamsError(f"ngram-simple: a draft budget must be a non-negative integer or None, got {limit!r}")
        history = len(self.context) - 1
        if history <= self.n + self.m + 1:
            return []
        start = self.match()
        if start is None:
            return []
        copy = min(self.m, history - (start + self.n))
        if copy < self.n:
            return []
        return self.context[start + self.n:start + self.n + (copy if limit is None else min(copy, limit))]


@register
class NgramSimpleFamily(Family):
    name, title, position = "ngram-simple", "llama.cpp ngram-simple", 11
    fields = ("k",)
    speculative = True
    group, keys = "ngram_simple", ("k", "size_n")

    def label(self, m: Method) -> str:
        return f"llama.cpp ngram-simple (m={m.k})"

    def short(self, m: Method) -> str:
        return f"ngram-simple, m={m.k}"

    def options(self, params: dict, where: str) -> NgramSimpleSettings:
        return NgramSimpleSettings(positive_int(params, f"{where}.size_n")).validate()

    def drafter(self, m: Method, context, drafts) -> NgramSimple:
        return NgramSimple(list(context), drafts.of(self.name).size_n, m.k)

    def forwards(self, m: Method, case, drafts, env):
        return speculative_forwards(self.drafter(m, case.source_ids, drafts), case.gold, m.k)

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        n = self.options(params, where).size_n
        budgets = draft_budgets(params, f"{where}.k")
        short = [k for k in budgets if k < n]
        if short:  # copy_max < n: an m-gram shorter than the n-gram is never drafted
            raise ParamsError(f"params: '{where}.k' {short} is below size_n = {n}: ngram-simple never drafts fewer "
                              "tokens than its lookup n-gram, so that member would be plain decoding")
        return tuple(Method(self.name, k=k) for k in budgets)
