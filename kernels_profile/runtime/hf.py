"""The transformers glue of every model-running stage: the edit prompt (the instruction, the templates,
the numbered source, the chat application), the tokenizer adapter, and the FSM as a LogitsProcessor.

One prompt path: the decoder, the pilot's training sequences, the e2e stage and grammar-constrained
generation all build their prompt with `prompt_ids(tok, template, source, instruction)`.

A `ModelTokenizer` is the one tokenizer interface the decoder and the training code use: plain
encoding (added-token strings spelled with ordinary tokens, so text never turns into control tokens),
the chat prompt, the FSM's byte-level view and the EOS ids. `from_hf` builds it from a transformers
tokenizer; tests build one over a toy byte vocabulary.

`ProgramLogitsProcessor` advances an `analysis.grammar.fsm.FsmWalker` on every token the model appended since
its last call and sets the logits of every token the walker forbids to -inf, so whatever `generate`
returns is a valid program prefix; the walker's budget logic (no new op within its margin of the end,
then only the completion's tokens) makes it a whole program. Only the walker's public API is used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analysis.errors import ProgramError
from analysis.grammar.fsm import FsmWalker, ProgramFSM
from analysis.grammar.program import COPY_END, COPY_TAGS, GEN_CLOSE, GEN_OPEN, RANGE_SEP
from analysis.text.lines import Source, numbered
from analysis.text.tokens import Tokenizer

# ---------------------------------------------------------------- the prompt

INSTRUCTION = (
    f"Rewrite the input as an edit program. Use {COPY_TAGS['lines']}i{RANGE_SEP}j{COPY_END} to copy input "
    f"lines i to j (numbered below) and {GEN_OPEN}text{GEN_CLOSE} to write new text. Output only the program."
)


@dataclass(frozen=True)
class PromptTemplate:
    """How an edit is asked for: a system text, and the user turn (`{instruction}`, `{source}`)."""

    name: str
    system: str
    user: str = "{instruction}\n\nInput:\n{source}"
    user_without_instruction: str = "Input:\n{source}"  # a case with no instruction (ProbeEdit-S)
    numbered: bool = True  # source lines written "k: line" so that the instruction can name them


PROGRAM_TEMPLATE = PromptTemplate("program", INSTRUCTION)
REWRITE_TEMPLATE = PromptTemplate(
    "rewrite", "Rewrite the input with the edit applied. Output only the edited text, without line numbers."
)
# What a plain regeneration (and a drafter reading its prompt) is given: the source as it is, no line
# numbers (which would lengthen every step's context and break every prompt-lookup draft at a line end).
# The pilot's `rewrite` mode keeps the numbered input so that both of its modes read the same prompt.
PLAIN_REWRITE_TEMPLATE = PromptTemplate(
    "rewrite-plain", "Rewrite the input with the edit applied. Output only the edited text.", numbered=False
)
TEMPLATES = {t.name: t for t in (PROGRAM_TEMPLATE, REWRITE_TEMPLATE, PLAIN_REWRITE_TEMPLATE)}


def messages(template: PromptTemplate, source: str | Source, instruction: str | None) -> list[dict]:
    """The chat turns. A case without an instruction (ProbeEdit-S has none) gets the template's user
    turn without its instruction paragraph, never the text "None"."""
    shown = numbered(source) if template.numbered else source.text if isinstance(source, Source) else source
    if instruction is not None and instruction.strip():
        user = template.user.format(instruction=instruction, source=shown)
    else:
        user = template.user_without_instruction.format(source=shown)
    return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]


# ---------------------------------------------------------------- the tokenizer adapter

def suite_tokenizer(hf_tokenizer, name: str) -> Tokenizer:
    """The FSM's byte-level view (analysis.text.tokens) of a transformers tokenizer."""
    return Tokenizer(hf_tokenizer.backend_tokenizer, name)


@dataclass(frozen=True)
class ModelTokenizer:
    """What the decoder and the trainer need of a model's tokenizer (see the module docstring)."""

    name: str
    fsm_tokenizer: object  # vocab_size, piece(id) -> bytes, added_token_ids (analysis.grammar.fsm.ProgramFSM)
    encode: Callable[[str], list[int]]  # plain text -> ids, no special tokens
    chat: Callable[[list[dict]], list[int]] | None  # messages -> ids ending in the assistant turn
    eos_ids: tuple[int, ...]

    @classmethod
    def from_hf(cls, hf_tok, eos_ids: Sequence[int], name: str = "") -> ModelTokenizer:
        suite = suite_tokenizer(hf_tok, name or type(hf_tok).__name__)
        chat = None
        if getattr(hf_tok, "chat_template", None):
            def chat(turns: list[dict]) -> list[int]:  # noqa: F811 (stays None without a chat template)
                ids = hf_tok.apply_chat_template(turns, add_generation_prompt=True, tokenize=True)
                return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        return cls(suite.name, suite, lambda text: list(suite.encode_program(text).ids), chat, tuple(eos_ids))

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.fsm_tokenizer.piece(i) for i in ids)


def prompt_ids(tok: ModelTokenizer, template: PromptTemplate, source: str | Source, instruction: str | None) -> list[int]:
    """The prompt: the chat template where the tokenizer has one, else the turns joined by blank lines."""
    turns = messages(template, source, instruction)
    if tok.chat is not None:
        return tok.chat(turns)
    return tok.encode("\n\n".join(m["content"] for m in turns) + "\n\n")


# ---------------------------------------------------------------- the FSM as a LogitsProcessor

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
