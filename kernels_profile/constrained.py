"""Grammar-constrained generation of copy programs: the FSM as a transformers LogitsProcessor.

The processor advances the FSM on every token the model appended since its last call and sets the
logits of every token the FSM forbids to -inf, so whatever `generate` returns is a valid program
prefix. Completeness within a token budget: with MARGIN tokens left, no new op may start (only EOS
between ops), and inside an op only tokens that spell the shortest completion of the current state
(closing the body, finishing the numbers) are allowed, so the output is always a whole program.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.fsm import OPS, ProgramFSM
from analysis.text import split_lines
from analysis.tokenization import Tokenizer

SMOLLM2_TOKENIZER_CACHE = Path("models/smollm2-tokenizer")
# Tokens kept in reserve: the longest shortest-completion of any state is '<copy lines="' + '1-1"/>'
# (17 bytes; digits add at most a few), and every byte is a token, so 20 tokens always suffice.
MARGIN = 20


def completion(state) -> bytes:
    """The shortest bytes that take `state` to the accepting state."""
    kind = state[0]
    if kind == "ops":
        return b""
    if kind == "tag":
        prefix = state[1]
        for tag in (b"<gen>", b'<copy lines="', b'<copy tokens="'):
            if tag.startswith(prefix):
                rest = tag[len(prefix):]
                return rest + (b"x</gen>" if tag == b"<gen>" else b"1-1\"/>")
    if kind == "n1":
        value = state[2]
        digits = b"1" if value == 0 else b""
        first = value or 1
        return digits + b"-" + str(first).encode() + b'"/>'
    if kind == "n2":
        start, value = state[2], state[3]
        if value >= start:
            return b'"/>'
        if value == 0:
            return str(start).encode() + b'"/>'
        scale = 10
        while (value + 1) * scale - 1 < start:
            scale *= 10
        target = max(start, value * scale)
        return str(target).encode()[len(str(value)):] + b'"/>'
    if kind == "lit":
        return state[1][state[2]:]
    if kind == "body":
        nonempty, partial = state[1], state[2]
        if partial == b"</gen":
            return b">"
        return (b"" if nonempty or partial else b"x") + (b" " if partial else b"") + b"</gen>"
    raise AssertionError(state)


@dataclass
class FsmState:
    fsm: ProgramFSM
    state: tuple = OPS
    seen: int = 0


class ProgramLogitsProcessor:
    """A transformers LogitsProcessor (the call signature is all transformers asks for)."""

    def __init__(self, fsm: ProgramFSM, prompt_length: int, max_new_tokens: int):
        self.fsm, self.prompt_length, self.max_new_tokens = fsm, prompt_length, max_new_tokens
        self.state, self.seen = OPS, prompt_length
        self.forced: bytes | None = None
        self._all_ids = None

    def __call__(self, input_ids, scores):
        import torch

        for token in input_ids[0, self.seen:].tolist():
            self.state = self.fsm.advance(self.state, token)
            if self.forced is not None:
                self.forced = self.forced[len(self.fsm.pieces[token] or b""):]
        self.seen = input_ids.shape[1]
        generated = self.seen - self.prompt_length
        remaining = self.max_new_tokens - generated
        if self.forced is None and remaining <= MARGIN and self.state != OPS:
            self.forced = completion(self.state)
        if remaining <= MARGIN and self.state == OPS:
            mask = np.zeros(self.fsm.vocab_size, dtype=bool)  # no room to open another op: stop
            mask[list(self.fsm.eos_ids)] = True
        else:
            mask = self._forced_mask() if self.forced is not None else self.fsm.allowed(self.state)
        allowed = torch.from_numpy(mask[: scores.shape[-1]]).to(scores.device)
        if scores.shape[-1] > mask.shape[0]:  # embedding rows past the tokenizer's vocabulary
            allowed = torch.cat([allowed, torch.zeros(scores.shape[-1] - mask.shape[0], dtype=torch.bool, device=scores.device)])
        return scores.masked_fill(~allowed, float("-inf"))

    def _forced_mask(self) -> np.ndarray:
        mask = np.zeros(self.fsm.vocab_size, dtype=bool)
        if not self.forced:
            mask[list(self.fsm.eos_ids)] = True
            return mask
        allowed = self.fsm.allowed(self.state)
        for i in self.fsm.by_first.get(self.forced[0], []):
            piece = self.fsm.pieces[i]
            if allowed[i] and self.forced.startswith(piece):
                mask[i] = True
        return mask


# ---------------------------------------------------------------- SmolLM2 and the prompt

def smollm2_tokenizer():
    """SmolLM2's tokenizer: from the GGUF file once (~17 s), then from a cached tokenizer.json."""
    from transformers import AutoTokenizer

    from kernels_profile.models import smollm2_gguf_path

    if (SMOLLM2_TOKENIZER_CACHE / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(SMOLLM2_TOKENIZER_CACHE))
    path = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tok.save_pretrained(str(SMOLLM2_TOKENIZER_CACHE))
    return tok


def suite_tokenizer(hf_tokenizer, name: str) -> Tokenizer:
    return Tokenizer(hf_tokenizer.backend_tokenizer, name)


INSTRUCTION = (
    "Rewrite the input as an edit program. Use <copy lines=\"i-j\"/> to copy input lines i to j "
    "(numbered below) and <gen>text</gen> to write new text. Output only the program."
)


def numbered(source: str) -> str:
    return "".join(f"{k}: {line}" for k, line in enumerate(split_lines(source), start=1))


def edit_messages(source: str, instruction: str) -> list[dict]:
    return [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": f"{instruction}\n\nInput:\n{numbered(source)}"},
    ]
