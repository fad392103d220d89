"""llama.cpp's `ngram-mod` self-speculation: its drafter (an online object over token ids, torch-free) and its
family, `ngram-mod-k<k>` (analysis.rivals.methods), from params `<stage>.ngram_mod`: every `--draft-max` of `k`,
with `n_match` and `n_min`.

Read in llama.cpp's `common/ngram-mod.cpp` and `common_speculative_state_ngram_mod` (`common/speculative.cpp`,
PR #19164) and `docs/speculative.md`, whose recommended settings are the defaults here
(`--spec-type ngram-mod --spec-ngram-size-n 24 --draft-min 48 --draft-max 64`, also llama-server's
`--spec-default` preset). What it does:

* A pool maps each n-gram (n = `n_match`) to the token that followed it, the latest occurrence winning. The
  prompt's n-grams enter it when the request begins; the output's enter it in chunks, when more than 32 tokens
  have arrived since the last chunk (`i_last + 32 < cur_len`).
* A draft starts from the context's last n tokens: look the n-gram up, append its next token, slide the n-gram
  over it, and repeat, at most `k` (`--draft-max`) times; a chain that breaks before `n_min` (`--draft-min`)
  tokens is no draft at all, a longer one is cut where it breaks (so a `k` below `n_min` drafts only chains
  that run the full k tokens).
* After each verify, a draft of which fewer than half the tokens were accepted counts as a low round; three in a
  row reset the pool (it is then refilled from the whole context at the next draft).

Two differences, both in the rival's favour or neutral: the pool here is an exact map (llama.cpp hashes the
n-gram into 4M slots with an LCG, so a collision can propose a wrong token; never a wrong output), and it is the
request's own (llama.cpp shares one pool across server slots, so requests can draft from each other, the
cross-request effect the suite leaves off for suffix decoding too; its occupancy reset is then moot). The drafter
reads the source and the output so far, never the gold still to come; of the engine it assumes speculative
decoding with greedy acceptance.

Use: `NgramMod(prompt_ids, n_match, n_min, n_max)`, `draft(limit)` before each forward (a smaller `limit` cuts the
chain, it does not change the rule), `extend(tokens)` after it (the tokens the forward accepted, the corrected one
included: it also counts the acceptance).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from analysis.errors import ParamsError
from analysis.pipeline.params import known_keys, positive_int
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import Family, Method, draft_budgets, register

N_MATCH = 24        # --spec-ngram-size-n (--spec-ngram-mod-n-match)
N_MIN = 48          # --draft-min
N_MAX = 64          # --draft-max (the family's k)
CHUNK = 32          # new n-grams enter the pool once more than this many tokens arrived (a constant in llama.cpp)
LOW_ACCEPTANCE = 0.5  # a verify that accepts less than this share of its draft is a low round ...
LOW_ROUNDS = 3      # ... and this many in a row reset the pool
N_MATCH_LIMIT = 1024


@dataclass(frozen=True)
class NgramModSettings:
    n_match: int        # the pool's n-gram
    n_min: int          # the shortest draft kept

    def validate(self) -> NgramModSettings:
        for name, value, default in (("n_match", self.n_match, N_MATCH), ("n_min", self.n_min, N_MIN)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= N_MATCH_LIMIT:
                raise ParamsError(f"ngram-mod: {name} must be an integer in [1, {N_MATCH_LIMIT}] (llama.cpp's "
                                  f"recommended value: {default}), got {value!r}")
        return self


class NgramMod:
    """llama.cpp's `ngram-mod` drafter over one request's context (see the module docstring)."""

    def __init__(self, prompt: Sequence[int], n_match: int = N_MATCH, n_min: int = N_MIN, n_max: int = N_MAX):
        s = NgramModSettings(n_match, n_min).validate()
        if isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 1:
            raise ParamsError(f"ngram-mod: n_max must be a positive integer, got {n_max!r}")
        self.n, self.n_min, self.n_max = s.n_match, s.n_min, n_max
        self.context = [int(t) for t in prompt]
        self.pool: dict[tuple[int, ...], int] = {}
        self.last = 0            # the pool holds the n-grams starting before this position
        self.drafted = 0         # the last draft's length (its acceptance is counted by `extend`)
        self.low = 0             # low-acceptance rounds in a row
        if len(self.context) >= self.n:
            self._add(0, len(self.context) - self.n)

    def _add(self, begin: int, end: int) -> None:
        context, n = self.context, self.n
        for i in range(begin, end):
            self.pool[tuple(context[i:i + n])] = context[i + n]
        self.last = end

    def draft(self, limit: int | None = None) -> list[int]:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ParamsError(f"ngram-mod: a draft budget must be a non-negative integer or None, got {limit!r}")
        self.drafted = 0
        history = len(self.context) - 1   # llama.cpp's cur_len: the context less the token just sampled
        if history < self.n:
            return []
        if self.last + CHUNK < history:
            self._add(self.last, history - self.n)
        key, out = tuple(self.context[-self.n:]), []
        for i in range(self.n_max):
            token = self.pool.get(key)
            if token is None:
                if i < self.n_min:
                    return []
                break
            out.append(token)
            key = key[1:] + (token,)
        out = out if limit is None else out[:limit]
        self.drafted = len(out)
        return out

    def extend(self, tokens: Iterable[int]) -> None:
        """Append the tokens a forward accepted (the corrected one included) and count the last draft's acceptance."""
        tokens = [int(t) for t in tokens]
        if self.drafted > 0 and tokens:
            if (len(tokens) - 1) / self.drafted < LOW_ACCEPTANCE:
                self.low += 1
                if self.low >= LOW_ROUNDS:
                    self.pool.clear()
                    self.low, self.last = 0, 0
            else:
                self.low = 0
        self.drafted = 0
        self.context += tokens


@register
class NgramModFamily(Family):
    name, title, position = "ngram-mod", "llama.cpp ngram-mod", 12
    fields = ("k",)
    speculative = True
    group, keys = "ngram_mod", ("k", "n_match", "n_min")

    def label(self, m: Method) -> str:
        return f"llama.cpp ngram-mod (draft-max={m.k})"

    def short(self, m: Method) -> str:
        return f"ngram-mod, draft-max={m.k}"

    def options(self, params: dict, where: str) -> NgramModSettings:
        return NgramModSettings(positive_int(params, f"{where}.n_match"), positive_int(params, f"{where}.n_min")).validate()

    def drafter(self, m: Method, context, drafts) -> NgramMod:
        s = drafts.of(self.name)
        return NgramMod(list(context), s.n_match, s.n_min, m.k)

    def forwards(self, m: Method, case, drafts, env):
        return speculative_forwards(self.drafter(m, case.source_ids, drafts), case.gold, m.k)

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        self.options(params, where)  # a bad n_match or n_min is named with the members, not at the first case
        return tuple(Method(self.name, k=k) for k in draft_budgets(params, f"{where}.k"))
