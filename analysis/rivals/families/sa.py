"""TensorRT-LLM's suffix automaton drafter, longest match: its drafter (an online object over token ids, torch-free)
and its family, `sa-k<k>` (analysis.rivals.methods), from params `<stage>.sa`: every `max_draft_len` of `k`.

Read in TensorRT-LLM's `SADecodingConfig` (`tensorrt_llm/llmapi/llm_args.py`; PR #11434, Feb 2026: "fixed-size and
longest-match modes via `max_matching_ngram_size`", whose default -1 is the longest match) and its kernel
`cpp/tensorrt_llm/kernels/speculativeDecoding/suffixAutomaton/suffixAutomaton.h` (adapted from Baseten's sa_spec):

* A suffix automaton over the request's context (built from the prompt when the request starts, extended with
  every accepted token), each state keeping the end position of its strings' first occurrence.
* Before each forward, `lookup`: from the state of the whole context, follow suffix links to the first state
  whose first occurrence ends before the context's last token: the longest suffix of the context that occurred
  earlier. The draft is the tokens after that **first** occurrence, at most k (`max_draft_len`; the config has no
  default, 64 here beside the other long-draft rivals), fewer where the context ends. No earlier suffix: no draft.

TensorRT-LLM's one-model path runs the drafter inside a CUDA graph whose verify always holds `max_draft_len` + 1
tokens, padding a shorter draft; this simulation verifies the draft it found (q = draft + 1), which favours the
rival. The cross-request pool (`enable_global_pool`, PR #12130) is off, TensorRT-LLM's default. The drafter reads
the source and the output so far, never the gold still to come; of the engine it assumes speculative decoding
with greedy acceptance.

Use: `SuffixAutomaton(prompt_ids)`, `draft(k)` before each forward, `extend(tokens)` after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from analysis.errors import ParamsError
from analysis.pipeline.params import known_keys
from analysis.rivals.forwards import speculative_forwards
from analysis.rivals.methods import Family, Method, draft_budgets, register


class SuffixAutomaton:
    """The online suffix automaton of a token sequence and TensorRT-LLM's longest-match lookup (module docstring).
    States are parallel lists: the longest string's length, the suffix link, the first occurrence's end, the
    transitions; state 0 is the root (the empty string)."""

    def __init__(self, prompt: Sequence[int] = ()):
        self.tokens: list[int] = []
        self.length, self.link, self.first = [0], [-1], [-1]
        self.next: list[dict[int, int]] = [{}]
        self.last = 0
        self.extend(prompt)

    def _state(self, length: int, link: int, first: int, edges: dict[int, int]) -> int:
        self.length.append(length)
        self.link.append(link)
        self.first.append(first)
        self.next.append(edges)
        return len(self.length) - 1

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self._add(int(token))

    def _add(self, token: int) -> None:
        self.tokens.append(token)
        cur = self._state(self.length[self.last] + 1, -1, len(self.tokens) - 1, {})
        p = self.last
        while p != -1 and token not in self.next[p]:
            self.next[p][token] = cur
            p = self.link[p]
        if p == -1:
            self.link[cur] = 0
        else:
            q = self.next[p][token]
            if self.length[p] + 1 == self.length[q]:
                self.link[cur] = q
            else:  # split q: the clone keeps q's first occurrence and transitions
                clone = self._state(self.length[p] + 1, self.link[q], self.first[q], dict(self.next[q]))
                while p != -1 and self.next[p].get(token) == q:
                    self.next[p][token] = clone
                    p = self.link[p]
                self.link[q] = self.link[cur] = clone
        self.last = cur

    def lookup(self) -> tuple[int, int] | None:
        """(where the draft starts, the match length) of the longest suffix that occurred earlier, or None."""
        end = len(self.tokens)
        state = self.last
        while state > 0:
            if self.first[state] + 1 < end:
                return self.first[state] + 1, self.length[state]
            state = self.link[state]
        return None

    def draft(self, k: int | None) -> list[int]:
        """At most k tokens after the longest earlier match (k=None: to the end of the context); [] without one."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise ParamsError(f"suffix automaton: the draft budget must be a non-negative integer or None, got {k!r}")
        found = self.lookup()
        if found is None or k == 0:
            return []
        start = found[0]
        return self.tokens[start:] if k is None else self.tokens[start:start + k]


@register
class SuffixAutomatonFamily(Family):
    name, title, position = "sa", "suffix automaton (TensorRT-LLM)", 21
    fields = ("k",)
    speculative = True
    group, keys = "sa", ("k",)

    def label(self, m: Method) -> str:
        return f"suffix automaton, longest match (TensorRT-LLM SA, k={m.k})"

    def short(self, m: Method) -> str:
        return f"TRT-LLM SA, k={m.k}"

    def headline_rank(self, m: Method) -> int:
        return 2

    def drafter(self, m: Method, context, drafts) -> SuffixAutomaton:
        return SuffixAutomaton(list(context))

    def forwards(self, m: Method, case, drafts, env):
        return speculative_forwards(self.drafter(m, case.source_ids, drafts), case.gold, m.k)

    def members(self, params: dict, stage: str) -> tuple[Method, ...]:
        where = f"{stage}.{self.group}"
        known_keys(params, where, self.keys)
        return tuple(Method(self.name, k=k) for k in draft_budgets(params, f"{where}.k"))
