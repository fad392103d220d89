"""Suffix decoding: its drafter (an online object over token ids, torch-free) and its family,
`suffix-k<k>[-cache]` (analysis.rivals.methods), from params `<stage>.suffix`: every draft budget of `k`
(and unbounded drafts when `unbounded`), each also with the cross-request cache when `response_cache`.

SuffixDecoding (Oliaro et al., arXiv 2411.04975), as Arctic Inference ships it and vLLM's
`suffix` speculative method runs it, **written here from the paper's description and those
defaults, not from the reference package** (arctic-inference is source-only and needs a newer torch
than this suite's). What it does:

* A suffix tree of depth at most `max_tree_depth` (64) over the request's prompt and its output so
  far (the per-request tree) and, when `response_cache` holds any, over earlier requests' outputs
  (the cross-request tree; off by default). A node's count is how many times its string occurs; the
  string of length at most the depth may start anywhere.
* Per draft, for every match length m = min(depth, context)..1: the pattern is the context's last m
  tokens; from its node, a greedy path: at each step the child with the largest count (ties: the
  continuation that occurs first in the text, a rule of this implementation; the reference leaves
  ties to its hash map), its probability the running product of child count / parent count; the path
  stops before a token whose probability falls below `min_token_prob` (0.1), at a leaf, at the tree's
  depth, or at `floor(m * max_spec_factor + max_spec_offset)` tokens (1.0 and 0: at most as many tokens
  as the match is long), and at `max_spec_tokens` (k). Its score is the sum of its tokens'
  probabilities (the expected accepted tokens); the draft is the best-scoring path over all m (the
  longest match on a tie) and over both trees (the per-request tree on a tie).
* Probabilities and scores are float32, as the reference computes them.

A node's count of a string equals the string's occurrences, so no tree is built: the occurrences of
the pattern are found from the positions of its last token and narrowed one token at a time, and a
path's children are the tokens that follow those occurrences. The drafts are those of the tree.

Use: `SuffixDecoder(prompt_ids)`, `draft(k)` before each forward, `extend(accepted)` after it;
`finish()` hands the request's output to a shared `ResponseCache` when one is given.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

import numpy as np

from analysis.errors import ParamsError
from analysis.pipeline.params import get, known_keys
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import Family, Method, draft_budgets, register

F32 = np.float32


MAX_TREE_DEPTH = 4096  # a tree holds up to depth nodes per token: a bound, not a setting (Arctic's default: 64)


@dataclass(frozen=True)
class SuffixSettings:
    """The tree's settings (vLLM's `suffix_decoding_*` settings); DEFAULTS holds Arctic Inference's values."""

    max_tree_depth: int
    max_spec_factor: float
    max_spec_offset: float
    min_token_prob: float
    max_cached_requests: int   # cross-request cache: the most recent responses kept

    def validate(self) -> SuffixSettings:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParamsError(f"suffix decoding {f.name} must be a finite number, got {value!r}")
        if not isinstance(self.max_tree_depth, int) or not 1 <= self.max_tree_depth <= MAX_TREE_DEPTH:
            raise ParamsError(f"suffix decoding max_tree_depth must be an integer in [1, {MAX_TREE_DEPTH}], got "
                              f"{self.max_tree_depth!r}")
        if self.max_spec_factor < 0:
            raise ParamsError(f"suffix decoding max_spec_factor must be >= 0, got {self.max_spec_factor!r}")
        if not 0 <= self.min_token_prob <= 1:
            raise ParamsError(f"suffix decoding min_token_prob must be in [0, 1], got {self.min_token_prob!r}")
        if not isinstance(self.max_cached_requests, int) or self.max_cached_requests < 0:
            raise ParamsError(f"suffix decoding max_cached_requests must be >= 0, got {self.max_cached_requests!r}")
        return self


DEFAULTS = SuffixSettings(max_tree_depth=64, max_spec_factor=1.0, max_spec_offset=0.0, min_token_prob=0.1,
                          max_cached_requests=10000)


@dataclass(frozen=True)
class Draft:
    tokens: tuple[int, ...]
    score: float          # sum of the tokens' probabilities (float32)
    match_len: int        # the pattern length it was found from (0: no draft)


NO_DRAFT = Draft((), 0.0, 0)


class _Text:
    """Token sequences as one list with a unique negative separator after each (so no occurrence
    crosses from one into the next), and each token's positions in arrival order."""

    def __init__(self):
        self.tokens: list[int] = []
        self.positions: dict[int, list[int]] = {}
        self._separators = 0

    def append(self, token: int) -> None:
        self.positions.setdefault(token, []).append(len(self.tokens))
        self.tokens.append(token)

    def close(self) -> None:
        self._separators += 1
        self.tokens.append(-self._separators)


def _occurrence_ends(text: _Text, pattern: Sequence[int], skip_end: int | None) -> list[list[int]]:
    """ends[m-1]: the end positions of the occurrences of pattern[-m:] in `text`, m = 1.. while any
    remains; the occurrence ending at `skip_end` (the pattern itself, in its own text) is left out."""
    tokens = text.tokens
    ends = [e for e in text.positions.get(pattern[-1], ()) if e != skip_end]
    levels = []
    m = 1
    while ends and m <= len(pattern):
        levels.append(ends)
        want = pattern[-1 - m] if m < len(pattern) else None
        ends = [e for e in ends if want is not None and e - m >= 0 and tokens[e - m] == want]
        m += 1
    return levels


def _greedy_path(text: _Text, ends: list[int], count: int, depth: int, limit: int, s: SuffixSettings) -> Draft:
    """The greedy path from the node of a matched pattern: `ends` the end positions of its occurrences
    that can continue, `count` all its occurrences, `depth` its length, `limit` the most tokens."""
    tokens, out = text.tokens, []
    prob, score, floor = F32(1.0), F32(0.0), F32(s.min_token_prob)
    n_tokens = len(tokens)
    while len(out) < limit and depth < s.max_tree_depth:
        tally: dict[int, list[int]] = {}
        for e in ends:
            nxt = e + 1
            if nxt < n_tokens and tokens[nxt] >= 0:
                tally.setdefault(tokens[nxt], []).append(nxt)
        if not tally:
            break
        # the largest count; on a tie the continuation seen first in the text
        token, positions = max(tally.items(), key=lambda kv: (len(kv[1]), -kv[1][0]))
        step = F32(prob * (F32(len(positions)) / F32(count)))
        if step < floor:
            break
        prob = step
        out.append(token)
        score = F32(score + prob)
        ends, count, depth = positions, len(positions), depth + 1
    return Draft(tuple(out), float(score), 0)


def _speculate(text: _Text, pattern: Sequence[int], k: int | None, s: SuffixSettings, own_len: int) -> Draft:
    """The best greedy path over every match length of `pattern` in `text` (see the module docstring).
    The pattern's own occurrence may end `text` (its last `own_len` tokens; 0: it is not in `text`):
    it is counted for the match lengths it covers but has nothing after it, so it never continues."""
    best = NO_DRAFT
    own_end = len(text.tokens) - 1 if own_len else None
    levels = _occurrence_ends(text, pattern, own_end)
    for m in range(len(levels), 0, -1):
        limit = max(int(m * s.max_spec_factor + s.max_spec_offset + 1e-6), 0)
        limit = min(limit, s.max_tree_depth - m, *(() if k is None else (k,)))
        if limit <= best.score:  # a path of `limit` tokens scores at most `limit`: it cannot win
            continue
        ends = levels[m - 1]
        found = _greedy_path(text, ends, len(ends) + (1 if m <= own_len else 0), m, limit, s)
        if F32(found.score) > F32(best.score):
            best = Draft(found.tokens, found.score, m)
    return best


class ResponseCache:
    """The cross-request tree: the outputs of finished requests (at most `max_cached_requests`, the
    oldest dropped first), shared by the decoders of one corpus."""

    def __init__(self, settings: SuffixSettings = DEFAULTS):
        self.settings = settings.validate()
        self._responses: deque[tuple[int, ...]] = deque()
        self._text: _Text | None = None

    def add(self, response: Sequence[int]) -> None:
        if self.settings.max_cached_requests == 0:
            return
        self._responses.append(tuple(int(t) for t in response))
        while len(self._responses) > self.settings.max_cached_requests:
            self._responses.popleft()
        self._text = None  # rebuilt on the next draft

    def __len__(self) -> int:
        return len(self._responses)

    def text(self) -> _Text:
        if self._text is None:
            self._text = _Text()
            for response in self._responses:
                for token in response:
                    self._text.append(token)
                self._text.close()
        return self._text


class SuffixDecoder:
    """One request's suffix decoding drafter (see the module docstring)."""

    def __init__(self, prompt: Sequence[int], settings: SuffixSettings = DEFAULTS,
                 cache: ResponseCache | None = None):
        self.settings = settings.validate()
        self.cache = cache
        self._local = _Text()
        self._output: list[int] = []
        self._prompt_len = 0
        for token in prompt:
            self._local.append(int(token))
            self._prompt_len += 1

    def __len__(self) -> int:
        return len(self._local.tokens)

    @property
    def output(self) -> list[int]:
        return list(self._output)

    def extend(self, tokens: Iterable[int]) -> None:
        """Append the tokens a forward accepted (the corrected one included) to the output."""
        for token in tokens:
            self._local.append(int(token))
            self._output.append(int(token))

    def speculate(self, k: int | None) -> Draft:
        """The best draft of at most k tokens (k=None: only the tree's depth and the spec factor bound it)."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise ParamsError(f"suffix decoding draft budget must be a non-negative integer or None, got {k!r}")
        context = self._local.tokens
        if not context or k == 0:
            return NO_DRAFT
        pattern = context[-self.settings.max_tree_depth:]
        best = _speculate(self._local, pattern, k, self.settings, own_len=len(pattern))
        if self.cache is not None and len(self.cache):
            shared = self._shared_text()
            found = _speculate(shared, pattern, k, self.settings, own_len=min(len(self._output), len(pattern)))
            if F32(found.score) > F32(best.score):
                best = found
        return best

    def draft(self, k: int | None) -> list[int]:
        return list(self.speculate(k).tokens)

    def _shared_text(self) -> _Text:
        """Earlier responses plus this request's output so far (the reference adds the active response
        to its cross-request tree as it is generated)."""
        base = self.cache.text()
        text = _Text()
        text.tokens = list(base.tokens)
        text.positions = {t: list(p) for t, p in base.positions.items()}
        text._separators = base._separators
        for token in self._output:
            text.append(token)
        return text

    def finish(self) -> None:
        """The request is done: its output joins the cross-request cache (when there is one)."""
        if self.cache is not None:
            self.cache.add(self._output)


@register
class SuffixFamily(Family):
    name, title, position = "suffix", "suffix decoding", 20
    fields, unbounded = ("k", "cache"), True
    executor, speculative = "speculative", True
    group, keys = "suffix", ("k", "unbounded", "options", "response_cache")

    def label(self, m: Method) -> str:
        return f"suffix decoding (k={m.budget}{', with response cache' if m.cache else ''})"

    def short(self, m: Method) -> str:
        return f"suffix decoding, k={m.budget}{', response cache' if m.cache else ''}"

    def headline_rank(self, m: Method) -> int:
        return 2

    def drafter(self, m: Method, context, drafts, cache: ResponseCache | None = None) -> SuffixDecoder:
        return SuffixDecoder(list(context), drafts.suffix, cache)

    def response_cache(self, m: Method, drafts) -> ResponseCache:
        return ResponseCache(drafts.suffix)

    def forwards(self, m: Method, case, drafts, env):
        if m.cache and env.cache is None:
            raise ValueError(f"{m.name} needs its corpus's response cache")
        decoder = self.drafter(m, case.source_ids, drafts, env.cache if m.cache else None)
        out = speculative_forwards(decoder, case.gold, m.k)
        decoder.finish()
        return out

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        budgets = draft_budgets(params, f"{where}.k", unbounded=f"{where}.unbounded")
        caches = (False, True) if get(params, f"{where}.response_cache", bool) else (False,)
        return tuple(Method(self.name, k=k, cache=c) for k in budgets for c in caches)
