"""Running edits on a real model with a KV cache, from a cached prompt, teacher-forced on the gold output.

- AR: regenerate the gold output, one forward per token.
- Speculative (prompt lookup, suffix decoding), gold acceptance: a drafter (an online object over token
  ids: built from the prompt, told every committed token, asked for at most k tokens) proposes a draft,
  never cropped to the gold still to come (no drafter knows it); one forward verifies the pending token and
  the whole draft (keeping a logit per verified position, as a real verifier must); the prefix equal to the
  gold is kept, rejected tokens are cropped from the cache and the next gold token is the correction. An upper bound on the real method for that drafter (which
  accepts by the model's own argmax instead). Each run records the draft tokens accepted per forward
  (`Run.accepted`) and the seconds spent inside the drafter (`Run.draft_seconds`, inside the timer).
- Copy-as-Decode: for each op of a program, a copy fills the cache with one forward of the copied
  text's tokens; a gen span is decoded token by token (the oracle program's text). This is the upper
  bound the paper describes (the bound's `ideal` variant). With `directives=True` it also decodes, one
  step each, the tokens the model would emit to write the program: a copy's `<copy lines="i-j"/>`
  before its prefill; a gen's `<gen>` before, its body as written (escaped), and `</gen>` after (the
  bound's `overhead` variant, what a deployment pays), with a forward per token the program produces: the
  copy tag's last token (`"/>`) goes into the cache with the copied text, in the copy's one prefill, as the
  suite's decoders do (what a forward of that token alone would produce, the copied text, is known).

Every run records its forwards as the rivals' forward log does (data/rivals/forwards.parquet):
`new_tokens` (per forward, the tokens it appends to the cache: its query length q) and `emitted` (the
tokens it commits: 1 for a decode step, directive steps included, accepted + 1 for a verify, n for a
copy), so the context before forward i is the prompt + sum(emitted[:i]) and a prediction prices the
very forwards that were timed.

Each run starts from the cache holding exactly the prompt (cropped back after every run), and the
clock covers the forwards and the drafts only: segment resolution, tokenization and a drafter's index of
the prompt are built before it. `time_prompt` times the prompt's own prefill (time to first token) on a
fresh cache. Token ids are the model tokenizer's: a copy's text is tokenized on its own, so the
executor's sequence can differ from the gold tokenization at span edges.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from analysis.errors import ProgramError
from analysis.grammar.program import GEN_CLOSE, GEN_OPEN, Copy, Program, escape, render_op
from analysis.grammar.resolver import resolve
from analysis.text.lines import Source
from kernels_profile.runtime.models import LoadedModel, cache_kwarg

@dataclass(frozen=True)
class Segment:
    """One op as token ids of the model's tokenizer: `ids` is the text it puts in the output;
    `open_ids` / `close_ids` the directive tokens the model emits before / after it, and `body_ids`
    (gen only) the body as the model writes it inside `<gen>` (escaped; equal to `ids` unless the
    text needed an escape)."""

    kind: str  # "copy" | "gen"
    ids: tuple[int, ...]
    open_ids: tuple[int, ...] = ()
    close_ids: tuple[int, ...] = ()
    body_ids: tuple[int, ...] | None = None

    @property
    def emitted(self) -> tuple[int, ...]:
        """What the model decodes for a gen op's body."""
        return self.ids if self.body_ids is None else self.body_ids

    @property
    def directive_tokens(self) -> int:
        """Tokens decoded besides the payload (the bound's d_k): tags, plus the extra tokens of escapes."""
        extra = len(self.emitted) - len(self.ids) if self.kind == "gen" else 0
        return len(self.open_ids) + len(self.close_ids) + extra


@dataclass(frozen=True)
class Run:
    """One timed run: its forwards as a log (`new_tokens`, `emitted`: see the module docstring);
    `accepted` (speculative only) the draft tokens each forward accepted, `draft_seconds` the time spent
    drafting inside the timer."""

    seconds: float
    forwards: int
    tokens: int
    accepted: tuple[int, ...] = ()
    new_tokens: tuple[int, ...] = ()
    emitted: tuple[int, ...] = ()
    draft_seconds: float = 0.0

    @property
    def tokens_per_forward(self) -> float | None:
        return self.tokens / self.forwards if self.forwards else None


def acceptance_histogram(accepted: tuple[int, ...] | list[int], k: int) -> list[int]:
    """counts[n] = forwards that accepted exactly n draft tokens, n = 0..k."""
    counts = [0] * (k + 1)
    for n in accepted:
        if not 0 <= n <= k:
            raise ValueError(f"accepted length {n} outside 0..{k}")
        counts[n] += 1
    return counts


def program_segments(program: Program, source: str, token_bounds, encode) -> list[Segment]:
    """Resolve each op to its text and tokenize it, and its directive, with the model's tokenizer
    (`encode`: str -> ids). Every op keeps its segment, even one whose text has no token: its
    directive is still emitted in the overhead run."""
    memo: dict[str, tuple[int, ...]] = {}

    def tokens(text: str) -> tuple[int, ...]:
        if text not in memo:
            memo[text] = tuple(encode(text))
        return memo[text]

    src = Source.of(source, token_bounds)  # split once, not once per op
    segments = []
    for op in program.ops:
        ids = tuple(encode(resolve(Program((op,)), src)))
        if isinstance(op, Copy):
            segments.append(Segment("copy", ids, open_ids=tokens(render_op(op))))
        else:
            escaped = escape(op.text)
            body = None if escaped == op.text else tuple(encode(escaped))
            segments.append(Segment("gen", ids, tokens(GEN_OPEN), tokens(GEN_CLOSE), body))
    if program.ops and not any(s.ids for s in segments):
        raise ProgramError("the program resolves to no tokens")
    return segments


class Executor:
    """Runs from the cached `prompt_ids` (the model's input: the rewrite prompt for AR and the
    drafters, the program prompt for Copy-as-Decode)."""

    def __init__(self, lm: LoadedModel, prompt_ids: list[int]):
        import torch

        self.lm, self.torch = lm, torch
        self.kw = cache_kwarg(lm.model)
        self.device = lm.device
        self.prompt_ids = list(prompt_ids)
        self.cache, self.prompt_logits = None, None
        self.time_prompt()

    def _forward(self, ids: list[int], **kwargs):
        x = self.torch.tensor([ids], device=self.device)
        return self.lm.model(input_ids=x, use_cache=True, **{self.kw: self.cache}, **kwargs)

    def reset(self) -> None:
        extra = self.cache.get_seq_length() - len(self.prompt_ids)
        if extra > 0:
            self.cache.crop(-extra)

    def _sync(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def time_prompt(self) -> float:
        """The prompt's prefill on a fresh cache (time to first token; its logits give the first output
        token), which then becomes the cache every run starts from."""
        from transformers import DynamicCache

        self.cache = DynamicCache(config=self.lm.config)
        self._sync()
        with self.torch.inference_mode():
            started = time.perf_counter()
            out = self._forward(self.prompt_ids, logits_to_keep=1)
            self._sync()
            seconds = time.perf_counter() - started
        self.prompt_logits = out.logits[:, -1]
        return seconds

    # ---------------------------------------------------------------- the ways
    def autoregressive(self, ids: list[int]) -> tuple[Run, object]:
        self.reset()
        self._sync()
        with self.torch.inference_mode():
            started = time.perf_counter()
            out = None
            for token in ids:
                out = self._forward([token])
            self._sync()
            seconds = time.perf_counter() - started
        ones = (1,) * len(ids)
        return (Run(seconds, len(ids), len(ids), new_tokens=ones, emitted=ones),
                out.logits[:, -1] if out is not None else self.prompt_logits)

    def _decode(self, ids, out, log: list[tuple[int, int]]):
        """One forward per token; returns the last output (or `out` when there is none)."""
        for token in ids:
            out = self._forward([token])
            log.append((1, 1))
        return out

    def copy_as_decode(self, segments: list[Segment], directives: bool = False) -> tuple[Run, object]:
        """Serve the program's ops; with `directives`, also decode each op's directive tokens one
        step each (see the module docstring). `tokens` counts the output's tokens either way."""
        self.reset()
        self._sync()
        tokens, out, log = 0, None, []
        with self.torch.inference_mode():
            started = time.perf_counter()
            for seg in segments:
                rides = directives and seg.kind == "copy" and bool(seg.ids) and bool(seg.open_ids)
                if directives:  # the tag, but the last token of a copy's that rides with its prefill
                    out = self._decode(seg.open_ids[:-1] if rides else seg.open_ids, out, log)
                if seg.kind == "copy":
                    if seg.ids:  # a copy whose text has no token forwards nothing
                        ids = [*seg.open_ids[-1:], *seg.ids] if rides else list(seg.ids)
                        out = self._forward(ids, logits_to_keep=1)
                        log.append((len(ids), len(ids)))
                else:
                    out = self._decode(seg.emitted if directives else seg.ids, out, log)
                if directives:
                    out = self._decode(seg.close_ids, out, log)
                tokens += len(seg.ids)
            self._sync()
            seconds = time.perf_counter() - started
        run = Run(seconds, len(log), tokens, new_tokens=tuple(q for q, _ in log), emitted=tuple(e for _, e in log))
        return run, (out.logits[:, -1] if out is not None else self.prompt_logits)

    def speculative(self, gold: list[int], drafter, k: int) -> Run:
        """Gold-acceptance speculative decoding: each forward verifies the pending token and the
        drafter's whole draft of at most k tokens (however much of the gold is left: a drafter does not know),
        with a logit kept per verified position; the drafter is told every committed token (the first comes
        from the prompt's logits)."""
        self.reset()
        self._sync()
        accepted_runs, log, drafting = [], [], 0.0
        with self.torch.inference_mode():
            started = time.perf_counter()
            if gold:
                drafter.extend(gold[:1])
                pending, i = gold[0], 1
                while pending is not None:
                    asked = time.perf_counter()
                    draft = list(drafter.draft(k))
                    drafting += time.perf_counter() - asked
                    if len(draft) > k:
                        raise ValueError(f"a drafter returned {len(draft)} tokens for a cap of {k}")
                    self._forward([pending] + draft, logits_to_keep=len(draft) + 1)
                    accepted = 0
                    while accepted < min(len(draft), len(gold) - i) and draft[accepted] == gold[i + accepted]:
                        accepted += 1
                    accepted_runs.append(accepted)
                    log.append((len(draft) + 1, accepted + 1))
                    if len(draft) > accepted:
                        self.cache.crop(-(len(draft) - accepted))
                    start, i = i, i + accepted
                    pending, i = (gold[i], i + 1) if i < len(gold) else (None, i)
                    asked = time.perf_counter()
                    drafter.extend(gold[start:i])
                    drafting += time.perf_counter() - asked
            self._sync()
            seconds = time.perf_counter() - started
        return Run(seconds, len(log), len(gold), tuple(accepted_runs), tuple(q for q, _ in log),
                   tuple(e for _, e in log), drafting)
