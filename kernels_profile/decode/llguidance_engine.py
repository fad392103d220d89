"""The decoder's llguidance engine: llguidance's matcher over the source's forced-span grammar decides the
masks, and its fast-forward tokens after a closed directive are the copy's one prefill.

Per decode, the forced-span Lark grammar of the source (analysis.grammar.export) is compiled into an
LLMatcher over the model's vocabulary. Each step:

1. the mask is llguidance's (`fill_next_token_bitmask`), widened where llguidance narrows it: when
   the grammar forces bytes (after '<c' it forces 'opy lines="'), llguidance lets only their canonical
   first token through (measured on Qwen2.5: 'opy', where the program language allows 'o', 'op' and
   'opy'); the engine adds back every token the matcher accepts there (the forced bytes' prefixes, and
   the tokens that run past them, each checked with `validate_tokens`), so the model chooses among
   the same tokens as under the suite FSM;
2. the decoder's own rules, the same as the suite engine's (kernels_profile.decode.decoder): a token
   may close a copy directive only with its last byte (op boundaries stay token boundaries), and with
   the budget's margin or less left only the shortest completion of the program may follow. Both are
   functions of the program's bytes, tracked with the suite's byte automaton, never of llguidance's
   internals;
3. after a token that closes a directive, `compute_ff_tokens()` gives the copied text's tokens; they
   join that token's forward (one prefill) and the matcher consumes them. llguidance holds back the
   last token(s) of forced text that a longer token could span (its canonical-tokenization rule);
   the rest of the span is then decoded token by token under the same mask, restricted to the span's
   remaining bytes (`copy_decoded_tokens` counts them), as an engine that executes ff tokens would.

So the grammar and the copy primitive are llguidance's; with ff tokens equal to the suite's layout
(the copied text tokenized on its own: tested per corpus in the grammar_forcing stage) the model sees
exactly the suite path's sequence and writes the same program.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from analysis.errors import ProgramError
from analysis.grammar.export import export
from analysis.grammar.fsm import OPS, ByteAutomaton
from analysis.grammar.llg import MaskBuffer, compile_matcher, consume, engine_error, ll_tokenizer
from analysis.grammar.program import COPY_END
from analysis.text.lines import split_lines
from kernels_profile.decode.decoder import DecodeError, Step, closes_copy_bytes, closes_copy_inside
from kernels_profile.runtime.hf import ModelTokenizer

_END = COPY_END.encode("ascii")
_GT = _END[-1]
_COPY_STATES = ("n2", "lit")  # the byte states from which a byte can close a copy directive


class LLGuidanceVocab:
    """What every decode with one model's tokenizer shares: llguidance's tokenizer and an index of the
    token pieces (the suite's view: added tokens and EOS spell nothing)."""

    def __init__(self, tok: ModelTokenizer):
        self.tok = tok
        self.ll = ll_tokenizer(tok.fsm_tokenizer, tok.eos_ids, tok.encode)
        self.vocab_size = int(self.ll.vocab_size)
        excluded = set(getattr(tok.fsm_tokenizer, "added_token_ids", ())) | set(tok.eos_ids)
        self.pieces: list[bytes] = []
        for i in range(self.vocab_size):
            piece = None if i in excluded else _piece(tok.fsm_tokenizer, i)
            self.pieces.append(piece or b"")
        self.by_piece: dict[bytes, list[int]] = defaultdict(list)
        self.by_first: dict[int, list[int]] = defaultdict(list)
        for i, piece in enumerate(self.pieces):
            if piece:
                self.by_piece[piece].append(i)
                self.by_first[piece[0]].append(i)
        # the tokens that could close a directive before their last byte: from inside a number or the closing
        # literal any token with an inner '>', from elsewhere only one holding all of '"/>' (as the MaskTable)
        self.inner_gt = np.array([i for i, p in enumerate(self.pieces) if _GT in p[:-1]], dtype=np.int64)
        self.inner_end = np.array([i for i, p in enumerate(self.pieces) if _END in p[:-1]], dtype=np.int64)
        # llguidance reads an added token that is not special (Qwen's '<tool_call>') as its text; the
        # program grammar never does (analysis.text.tokens), so only text pieces and EOS stay usable
        self.usable = np.array([bool(p) for p in self.pieces])
        self.usable[[e for e in tok.eos_ids if e < self.vocab_size]] = True

    def spelling_prefixes(self, data: bytes) -> list[int]:
        """Ids of the tokens whose piece is a non-empty prefix of `data`."""
        return [i for k in range(1, len(data) + 1) for i in self.by_piece.get(data[:k], ())]

    def extending(self, data: bytes) -> list[int]:
        """Ids of the tokens whose piece starts with `data` and is longer."""
        if not data:
            return []
        return [i for i in self.by_first.get(data[0], ()) if len(self.pieces[i]) > len(data)
                and self.pieces[i].startswith(data)]


def _piece(tokenizer, token_id: int) -> bytes | None:
    try:
        return tokenizer.piece(token_id)
    except Exception:  # an id with no vocabulary entry
        return None


class LLGuidanceEngine:
    """One decode's matcher, program bookkeeping and budget (module docstring)."""

    name = "llguidance"

    def __init__(self, vocab: LLGuidanceVocab, source: str, budget: int, margin: int | None, width: int,
                 device, case: str):
        import torch

        self.vocab, self.torch, self.width, self.device, self.case = vocab, torch, width, device, case
        self.source = source
        lines = split_lines(source)
        grammar = export(source, "lark", forced=True, name=case)
        compiled = compile_matcher(vocab.ll, grammar.text, f"{case} ({len(lines)} lines)")
        self.matcher, self.compile_s = compiled.matcher, compiled.seconds
        self.automaton = ByteAutomaton({"lines": len(lines)})
        needed = self.automaton.max_completion()
        if margin is not None and margin < needed:
            raise DecodeError(f"{case}: walker margin {margin} is below the longest completion ({needed} tokens)")
        self.margin = needed if margin is None else margin
        self.budget = budget
        self.generated = 0
        self.state: tuple = OPS
        self.program = bytearray()
        self.tail = b""  # copied bytes llguidance did not fast-forward, still to be decoded
        self.buffer = MaskBuffer(vocab.vocab_size)
        self.masks_computed = 0
        self.ff_seconds: list[float] = []

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.generated

    @property
    def forcing(self) -> bool:
        return self.budget is not None and self.remaining <= self.margin and not self.tail

    # ------------------------------------------------------------ masks

    def allowed(self) -> np.ndarray:
        """The next token's mask over the tokenizer's ids (module docstring, steps 1 and 2)."""
        self.buffer.fill(self.matcher)
        self.masks_computed += 1
        if self.matcher.is_error():
            raise ProgramError(f"{self.case}: llguidance: {engine_error(self.matcher)}")
        mask = self.buffer.allowed() & self.vocab.usable
        forced = self.matcher.compute_ff_bytes()
        if forced:
            mask[self.vocab.spelling_prefixes(forced)] = True
            for i in self.vocab.extending(forced):
                if not mask[i] and self.matcher.validate_tokens([i]) == 1:
                    mask[i] = True
        if self.tail:
            only = np.zeros_like(mask)
            only[self.vocab.spelling_prefixes(self.tail)] = True
            return mask & only
        suspects = self.vocab.inner_gt if self.state[0] in _COPY_STATES else self.vocab.inner_end
        for i in suspects[mask[suspects]]:
            if closes_copy_inside(self.automaton, self.state, self.vocab.pieces[int(i)]):
                mask[i] = False
        if self.forcing:
            mask &= self._completion_mask()
        if not mask.any():
            raise ProgramError(f"{self.case}: no token is allowed after {bytes(self.program)[-40:]!r} "
                               f"(llguidance engine, forcing={self.forcing})")
        return mask

    def _completion_mask(self) -> np.ndarray:
        only = np.zeros(self.vocab.vocab_size, dtype=bool)
        if self.state == OPS:
            only[list(self.vocab.tok.eos_ids)] = True
        else:
            only[self.vocab.spelling_prefixes(self.automaton.completion(self.state))] = True
        return only

    def bias(self):
        full = np.zeros(self.width, dtype=bool)
        allowed = self.allowed()
        n = min(self.width, allowed.shape[0])
        full[:n] = allowed[:n]
        mask = self.torch.from_numpy(full).to(self.device)
        return self.torch.zeros(self.width, device=self.device).masked_fill_(~mask, float("-inf"))

    # ------------------------------------------------------------ steps

    def advance(self, token: int) -> Step:
        if self.tail:
            return self._tail_step(token)
        forcing = self.forcing
        self.generated += 1
        if token in self.vocab.tok.eos_ids:
            if self.state != OPS:
                raise ProgramError(f"{self.case}: EOS inside an op ({bytes(self.program)[-40:]!r})")
            return Step(eos=True, forcing=forcing)
        piece = self.vocab.pieces[token]
        closing = closes_copy_bytes(self.automaton, self.state, piece)
        self.state = self._walk(piece)
        self.program += piece
        consume(self.matcher, [token], f"{self.case}: token {token} ({piece!r})")
        if not closing:
            return Step(eos=False, forcing=forcing)
        t0 = time.perf_counter()
        ff = self.matcher.compute_ff_tokens()
        forced = self.matcher.compute_ff_bytes()
        self.ff_seconds.append(time.perf_counter() - t0)
        consume(self.matcher, ff, f"{self.case}: its own fast-forward tokens")
        self.tail = self.matcher.compute_ff_bytes()
        if b"".join(self.vocab.pieces[i] for i in ff) + self.tail != forced:
            raise ProgramError(f"{self.case}: llguidance's fast-forward tokens do not spell its forced bytes")
        return Step(eos=False, forcing=forcing, copied=tuple(ff), closing=True)

    def _tail_step(self, token: int) -> Step:
        piece = self.vocab.pieces[token]
        if not self.tail.startswith(piece) or not piece:
            raise ProgramError(f"{self.case}: token {token} ({piece!r}) is not the copied text {self.tail[:20]!r}")
        consume(self.matcher, [token], f"{self.case}: copied-text token {token}")
        self.tail = self.tail[len(piece):]
        return Step(eos=False, forcing=False, tail=True)

    def _walk(self, piece: bytes) -> tuple:
        state = self.automaton.walk(self.state, piece)
        if state is None:
            raise ProgramError(f"{self.case}: llguidance let through {piece!r}, which the program grammar rejects "
                               f"after {bytes(self.program)[-40:]!r}")
        return state

    def finish(self, case: str) -> bytes:
        if self.state != OPS or self.tail:
            raise ProgramError(f"{case}: the budget ran out inside an op ({bytes(self.program)[-40:]!r}); the "
                               "margin should have prevented this")
        return bytes(self.program)
