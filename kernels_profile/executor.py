"""Running edits on a real model with a KV cache, three ways, from the same cached prompt.

- AR: regenerate the gold output, one forward per token (teacher-forced).
- PLD oracle: prompt lookup decoding with gold acceptance: draft up to k tokens by finding the last
  n-gram (n = ngram_max..1) earlier in prompt + output, verify the draft in one forward, keep the
  prefix that equals the gold, and take the next gold token as the correction. An upper bound on
  real PLD, which accepts by the model's own argmax instead.
- Copy-as-Decode executor: for each op of a program, a copy fills the cache with one forward of the
  copied text's tokens; a gen span is decoded token by token (teacher-forced: the oracle program's
  text). This is the upper bound the paper describes.

Each run starts from the cache holding exactly the prompt (cropped back after every run), and the
clock covers the forwards only. Token ids are the model tokenizer's: a copy's text is tokenized on its
own, so the executor's sequence can differ from the gold tokenization at span edges.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from analysis.errors import ProgramError
from analysis.program import Copy, Program
from analysis.resolver import resolve
from kernels_profile.models import LoadedModel, cache_kwarg


@dataclass(frozen=True)
class Segment:
    kind: str  # "copy" | "gen"
    ids: tuple[int, ...]


@dataclass(frozen=True)
class Run:
    seconds: float
    forwards: int
    tokens: int


def program_segments(program: Program, source: str, token_bounds, encode) -> list[Segment]:
    """Resolve each op to its text and tokenize it with the model's tokenizer (`encode`: str -> ids)."""
    segments = []
    for index, op in enumerate(program.ops):
        text = resolve(Program((op,)), source, token_bounds)
        ids = tuple(encode(text))
        if not ids:
            continue
        segments.append(Segment("copy" if isinstance(op, Copy) else "gen", ids))
    if not segments and program.ops:
        raise ProgramError("the program resolves to no tokens")
    return segments


class Executor:
    def __init__(self, lm: LoadedModel, prompt_ids: list[int]):
        import torch
        from transformers import DynamicCache

        self.lm, self.torch = lm, torch
        self.kw = cache_kwarg(lm.model)
        self.device = lm.device
        self.prompt_ids = list(prompt_ids)
        self.cache = DynamicCache(config=lm.config)
        with torch.inference_mode():
            out = self._forward(self.prompt_ids)
        self.prompt_logits = out.logits[:, -1]

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

    # ---------------------------------------------------------------- the three ways
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
        return Run(seconds, len(ids), len(ids)), (out.logits[:, -1] if out is not None else self.prompt_logits)

    def copy_as_decode(self, segments: list[Segment]) -> tuple[Run, object]:
        self.reset()
        self._sync()
        forwards, tokens, out = 0, 0, None
        with self.torch.inference_mode():
            started = time.perf_counter()
            for seg in segments:
                if seg.kind == "copy":
                    out = self._forward(list(seg.ids), logits_to_keep=1)
                    forwards += 1
                else:
                    for token in seg.ids:
                        out = self._forward([token])
                        forwards += 1
                tokens += len(seg.ids)
            self._sync()
            seconds = time.perf_counter() - started
        return Run(seconds, forwards, tokens), (out.logits[:, -1] if out is not None else self.prompt_logits)

    def pld_oracle(self, gold: list[int], k: int, ngram_max: int) -> Run:
        self.reset()
        self._sync()
        forwards = 0
        with self.torch.inference_mode():
            started = time.perf_counter()
            if gold:
                pending, i = gold[0], 1  # the first token comes from the prompt's logits
                while pending is not None:
                    draft = lookup_draft(self.prompt_ids + gold[:i], k, ngram_max)
                    draft = draft[: max(len(gold) - i, 0)]
                    self._forward([pending] + draft, logits_to_keep=1)
                    forwards += 1
                    accepted = 0
                    while accepted < len(draft) and draft[accepted] == gold[i + accepted]:
                        accepted += 1
                    rejected = len(draft) - accepted
                    if rejected:
                        self.cache.crop(-rejected)
                    i += accepted
                    pending, i = (gold[i], i + 1) if i < len(gold) else (None, i)
            self._sync()
            seconds = time.perf_counter() - started
        return Run(seconds, forwards, len(gold))


def lookup_draft(context: list[int], k: int, ngram_max: int) -> list[int]:
    """Prompt lookup: the k tokens after the latest earlier occurrence of the trailing n-gram."""
    n_ctx = len(context)
    for n in range(min(ngram_max, n_ctx - 1), 0, -1):
        tail = context[n_ctx - n:]
        for start in range(n_ctx - n - 1, -1, -1):
            if context[start:start + n] == tail:
                follow = context[start + n:start + n + k]
                if follow:
                    return follow
    return []
