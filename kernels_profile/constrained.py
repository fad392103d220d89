"""Grammar-constrained generation of copy programs: the FSM walker as a transformers LogitsProcessor.

The processor advances an `analysis.fsm.FsmWalker` on every token the model appended since its last
call and sets the logits of every token the walker forbids to -inf, so whatever `generate` returns is
a valid program prefix; the walker's budget logic (no new op within its margin of the end, then only
the completion's tokens) makes it a whole program. Only the walker's public API is used here.
"""

from __future__ import annotations

from analysis.errors import ProgramError
from analysis.fsm import FsmWalker, ProgramFSM
from analysis.program import COPY_END, COPY_TAGS, GEN_CLOSE, GEN_OPEN, RANGE_SEP
from analysis.text import split_lines
from analysis.tokenization import Tokenizer


class ProgramLogitsProcessor:
    """A transformers LogitsProcessor (the call signature is all transformers asks for); batch size 1."""

    def __init__(self, fsm: ProgramFSM, prompt_length: int, max_new_tokens: int, margin: int | None = None):
        self.walker = FsmWalker(fsm, budget=max_new_tokens, margin=margin)
        self.prompt_length = prompt_length
        self.seen = prompt_length

    @property
    def state(self) -> tuple:
        return self.walker.state

    def __call__(self, input_ids, scores):
        import torch

        if input_ids.shape[0] != 1:
            raise ProgramError(f"ProgramLogitsProcessor walks one sequence; got a batch of {input_ids.shape[0]}")
        for token in input_ids[0, self.seen:].tolist():
            self.walker.advance(token)
        self.seen = input_ids.shape[1]
        mask = self.walker.allowed()
        allowed = torch.from_numpy(mask[: scores.shape[-1]]).to(scores.device)
        if scores.shape[-1] > mask.shape[0]:  # embedding rows past the tokenizer's vocabulary
            allowed = torch.cat([allowed, torch.zeros(scores.shape[-1] - mask.shape[0], dtype=torch.bool, device=scores.device)])
        return scores.masked_fill(~allowed, float("-inf"))


# ---------------------------------------------------------------- SmolLM2 and the prompt

def suite_tokenizer(hf_tokenizer, name: str) -> Tokenizer:
    return Tokenizer(hf_tokenizer.backend_tokenizer, name)


INSTRUCTION = (
    f"Rewrite the input as an edit program. Use {COPY_TAGS['lines']}i{RANGE_SEP}j{COPY_END} to copy input "
    f"lines i to j (numbered below) and {GEN_OPEN}text{GEN_CLOSE} to write new text. Output only the program."
)


def numbered(source: str) -> str:
    return "".join(f"{k}: {line}" for k, line in enumerate(split_lines(source), start=1))


def edit_messages(source: str, instruction: str) -> list[dict]:
    return [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": f"{instruction}\n\nInput:\n{numbered(source)}"},
    ]
