"""The decoder's llguidance engine (params `decode.mask_engine: llguidance`): masks from llguidance's
matcher over the source's forced-span grammar, each copy's fast-forward tokens run as one prefill.

Per step the mask is llguidance's (analysis.grammar.llg.StepMasks: its bitmask, or where bytes are forced
the tokens that spell them), with the decoder's layout rule on top (kernels_profile.decode.masks.
LayoutRule: a token may close a directive only with its last byte), applied with llguidance's own
`apply_token_bitmask_inplace`. When a token closes a directive the matcher has the copied lines forced:
`compute_ff_tokens()` gives their tokens, which go into the KV cache in one forward with that token,
as the suite engine's copy does. Where llguidance holds back the span's last tokens (they might merge
with what follows; analysis.grammar.forcing's ff-prefix spans) the rest of the span is tokenized on its
own and joins the same forward, so the model never decodes copied text.

The budget is the suite's: the program bytes are walked through the grammar's byte automaton
(analysis.grammar.fsm.ByteAutomaton), and with `margin` or fewer tokens left only tokens spelling its
shortest completion (or EOS) are allowed, intersected with llguidance's mask. So on a case whose
fast-forward tokens equal the copied text's own tokens the two engines feed the model the same ids and
greedy decoding writes the same program (tests/kernels_profile/decode/test_llg_engine.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.errors import ProgramError
from analysis.grammar.export import export
from analysis.grammar.fsm import END, OPS, ByteAutomaton
from analysis.grammar.llg import StepMasks, allowed, allowed_among, compile_grammar, ll_tokenizer, suite_pieces
from analysis.grammar.program import Copy
from analysis.text.lines import Source
from kernels_profile.decode.masks import LayoutRule, closes_copy_bytes
from kernels_profile.runtime.hf import ModelTokenizer


@dataclass
class LlgVocabulary:
    """What every llguidance decode of one model shares: its llguidance tokenizer, the token pieces."""

    lltok: object
    steps: StepMasks
    layout: LayoutRule
    pieces: list[bytes | None]
    width: int
    device: str

    @classmethod
    def build(cls, tok: ModelTokenizer, width: int, device: str = "cpu") -> LlgVocabulary:
        lltok = ll_tokenizer(tok.fsm_tokenizer, tok.eos_ids, n_vocab=width, encode=tok.encode)
        pieces = suite_pieces(tok.fsm_tokenizer, tok.eos_ids, width)
        vocab = cls(lltok, StepMasks(pieces, width), LayoutRule([p or b"" for p in pieces]), pieces, width, device)
        vocab.warm_up()
        return vocab

    def warm_up(self) -> None:
        """llguidance's bitmask kernel is compiled (torch.compile) on first use: once per process, here,
        so that no decode's mask time holds the compilation."""
        import torch
        from llguidance.torch import apply_token_bitmask_inplace

        apply_token_bitmask_inplace(torch.zeros(1, self.width), torch.full((1, (self.width + 31) // 32), -1,
                                                                           dtype=torch.int32))


class LlguidanceEngine:
    """One decode's walk under llguidance (module docstring); the decoder's engine interface."""

    name = "llguidance"

    def __init__(self, vocab: LlgVocabulary, source: str | Source, budget: int | None, margin: int | None,
                 eos_ids: tuple[int, ...]):
        import torch

        source = Source.of(source)
        self.vocab, self.eos_ids, self.torch = vocab, tuple(eos_ids), torch
        self.compiled = compile_grammar(vocab.lltok, export(source.text, "lark", forced=True))
        self.matcher = self.compiled.matcher
        self.automaton = ByteAutomaton({"lines": source.n_lines})
        needed = self.automaton.max_completion()
        if margin is not None and margin < needed:
            raise ProgramError(f"walker margin {margin} is below the longest completion ({needed} tokens)")
        self.margin = needed if margin is None else margin
        self.budget, self.generated, self.state = budget, 0, OPS
        self.bitmask = vocab.steps.allocate()
        self._mask = torch.from_numpy(self.bitmask)  # shares the memory StepMasks fills
        self.computed = 0
        self.ff_seconds: list[float] = []

    # ------------------------------------------------------------ budget (the suite walker's rule)

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.generated

    @property
    def forcing(self) -> bool:
        return self.budget is not None and self.remaining <= self.margin

    def done(self) -> bool:
        return self.state in (OPS, END)

    # ------------------------------------------------------------ masks

    def fill(self) -> None:
        """The next token's bitmask: llguidance's, the layout rule, and the budget's completion."""
        steps = self.vocab.steps
        steps.fill(self.matcher, self.bitmask)
        self.computed += 1
        words = self.bitmask.view(np.uint32)
        if self.forcing:
            keep = self._completion_ids()
            self.bitmask[:] = 0
            for token in keep:
                words[0, token >> 5] |= np.uint32(1 << (token & 31))
        live = allowed_among(self.bitmask, self.vocab.layout.suspects(self.state))
        for token in self.vocab.layout.blocked(self.automaton, self.state, live):
            words[0, token >> 5] &= np.uint32(~(1 << (token & 31)) & 0xFFFFFFFF)
        if not self.bitmask.any():
            raise ProgramError(f"llguidance engine: no token is allowed after {self.state!r} (forcing={self.forcing})")

    def _completion_ids(self) -> list[int]:
        """While forcing: EOS between ops, else the allowed tokens spelling a prefix of the completion."""
        if self.state == OPS:
            return [e for e in self.eos_ids if allowed(self.bitmask, e)]
        rest = self.automaton.completion(self.state)
        by_piece = self.vocab.steps.ids_spelling
        return [i for k in range(1, len(rest) + 1) for i in by_piece(rest[:k]) if allowed(self.bitmask, i)]

    def mask_logits(self, logits):
        from llguidance.torch import apply_token_bitmask_inplace

        self.fill()
        apply_token_bitmask_inplace(logits[None], self._mask)
        return logits

    # ------------------------------------------------------------ advancing

    def piece(self, token: int) -> bytes:
        return self.vocab.pieces[token] or b""

    def closing(self, token: int) -> bool:
        return closes_copy_bytes(self.automaton, self.state, self.vocab.pieces[token])

    def advance(self, token: int) -> None:
        if not self.matcher.consume_token(token):
            raise ProgramError(f"llguidance engine: token {token} ({self.piece(token)!r}) refused: "
                               f"{self.matcher.get_error()}")
        self.generated += 1
        if token in self.eos_ids:
            self.state = END
            return
        state = self.automaton.walk(self.state, self.piece(token))
        if state is None:
            raise ProgramError(f"llguidance engine: token {token} ({self.piece(token)!r}) leaves the program grammar")
        self.state = state

    def copy_ids(self, op: Copy, text: str, tok: ModelTokenizer) -> list[int]:
        """The copied span's tokens: llguidance's fast-forward tokens, and the span's rest (if it held some
        back) tokenized on its own; all consumed by the matcher."""
        import time

        t0 = time.perf_counter()
        ff = list(self.matcher.compute_ff_tokens())
        self.ff_seconds.append(time.perf_counter() - t0)
        span, done = text.encode("utf-8"), b"".join(self.piece(i) for i in ff)
        if not span.startswith(done):
            raise ProgramError(f"llguidance engine: fast-forward {done[:40]!r} is not the copied text of lines "
                               f"{op.start}-{op.end} ({span[:40]!r})")
        try:
            rest = list(tok.encode(span[len(done):].decode("utf-8"))) if len(done) < len(span) else []
        except UnicodeDecodeError:
            raise ProgramError(f"llguidance engine: fast-forward of lines {op.start}-{op.end} stops inside a "
                               "UTF-8 character") from None
        if not self.matcher.consume_tokens(ff + rest):
            raise ProgramError(f"llguidance engine: the copied text of lines {op.start}-{op.end} was refused: "
                               f"{self.matcher.get_error()}")
        return ff + rest
