"""The sequence a Copy-as-Decode model sees, shared by training and decoding.

    prompt ids | op 1 | op 2 | ... | EOS

where a gen op is the tokens of `<gen>BODY</gen>` (tags included) and a copy op is the tokens of its
directive `<copy lines="i-j"/>` followed by the tokens of the text it copies. Each op's text is
tokenized on its own, so every op starts on a token boundary: that is what the decoder produces, since
it appends the copied tokens right after the token that closes a directive (and never lets a token run
past a directive's end, see kernels_profile.decoder).

Token kinds: "prompt", "directive", "gen", "copied", "eos" (and "text" for the rewrite layout, where
the model writes the whole edited text). The loss covers the tokens the model writes: directive, gen
and the final EOS (without it a model never learns to stop); never the prompt nor the copied text,
which the decoder feeds in, not the model.

A `ModelTokenizer` is the one tokenizer interface the decoder and the training code use: plain
encoding (added-token strings spelled with ordinary tokens, so text never turns into control tokens),
the chat prompt, the FSM's byte-level view and the EOS ids. `from_hf` builds it from a transformers
tokenizer; tests build one over a toy byte vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from analysis.errors import ProgramError
from analysis.program import Copy, Program, render_op
from analysis.resolver import resolve

KINDS = ("prompt", "directive", "gen", "copied", "eos", "text")
LOSS_KINDS = frozenset({"directive", "gen", "eos", "text"})
IGNORE = -100  # the label transformers' loss skips


@dataclass(frozen=True)
class PromptTemplate:
    """How an edit is asked for: a system text, and the user turn (`{instruction}`, `{source}`)."""

    name: str
    system: str
    user: str = "{instruction}\n\nInput:\n{source}"
    numbered: bool = True  # source lines written "k: line" so that the instruction can name them


def _program_template() -> PromptTemplate:
    from kernels_profile.constrained import INSTRUCTION

    return PromptTemplate("program", INSTRUCTION)


PROGRAM_TEMPLATE = _program_template()  # the e2e stage's prompt (kernels_profile.e2e.prompt_ids)
REWRITE_TEMPLATE = PromptTemplate(
    "rewrite", "Rewrite the input with the edit applied. Output only the edited text, without line numbers."
)
TEMPLATES = {t.name: t for t in (PROGRAM_TEMPLATE, REWRITE_TEMPLATE)}


@dataclass(frozen=True)
class ModelTokenizer:
    """What the decoder and the trainer need of a model's tokenizer (see the module docstring)."""

    name: str
    fsm_tokenizer: object  # vocab_size, piece(id) -> bytes, added_token_ids (analysis.fsm.ProgramFSM)
    encode: Callable[[str], list[int]]  # plain text -> ids, no special tokens
    chat: Callable[[list[dict]], list[int]] | None  # messages -> ids ending in the assistant turn
    eos_ids: tuple[int, ...]

    @classmethod
    def from_hf(cls, hf_tok, eos_ids: Sequence[int], name: str = "") -> ModelTokenizer:
        from kernels_profile.constrained import suite_tokenizer

        suite = suite_tokenizer(hf_tok, name or type(hf_tok).__name__)
        chat = None
        if getattr(hf_tok, "chat_template", None):
            def chat(messages: list[dict]) -> list[int]:
                ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
                return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        return cls(suite.name, suite, lambda text: list(suite.encode_program(text).ids), chat, tuple(eos_ids))

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.fsm_tokenizer.piece(i) for i in ids)


def numbered(source: str) -> str:
    from kernels_profile.constrained import numbered as number_lines

    return number_lines(source)


def messages(template: PromptTemplate, source: str, instruction: str) -> list[dict]:
    shown = numbered(source) if template.numbered else source
    return [{"role": "system", "content": template.system},
            {"role": "user", "content": template.user.format(instruction=instruction, source=shown)}]


def prompt_ids(tok: ModelTokenizer, template: PromptTemplate, source: str, instruction: str) -> list[int]:
    """The prompt: the chat template where the tokenizer has one, else the turns joined by blank lines."""
    turns = messages(template, source, instruction)
    if tok.chat is not None:
        return tok.chat(turns)
    return tok.encode("\n\n".join(m["content"] for m in turns) + "\n\n")


@dataclass(frozen=True)
class Piece:
    kind: str
    ids: tuple[int, ...]


@dataclass(frozen=True)
class TrainingSequence:
    pieces: tuple[Piece, ...]

    @property
    def ids(self) -> list[int]:
        return [t for p in self.pieces for t in p.ids]

    @property
    def kinds(self) -> list[str]:
        return [p.kind for p in self.pieces for _ in p.ids]

    @property
    def loss_mask(self) -> list[bool]:
        return [k in LOSS_KINDS for k in self.kinds]

    @property
    def labels(self) -> list[int]:
        """Labels for a causal LM loss (transformers shifts them): the id where the loss applies."""
        return [t if k in LOSS_KINDS else IGNORE for t, k in zip(self.ids, self.kinds)]

    @property
    def prompt_length(self) -> int:
        return sum(len(p.ids) for p in self.pieces if p.kind == "prompt")

    def __len__(self) -> int:
        return sum(len(p.ids) for p in self.pieces)


def op_pieces(tok: ModelTokenizer, program: Program, source: str, token_bounds=None) -> list[Piece]:
    """Each op's own tokens, and after each copy directive the tokens of the text it copies."""
    pieces: list[Piece] = []
    for index, op in enumerate(program.ops):
        if isinstance(op, Copy):
            pieces.append(Piece("directive", tuple(tok.encode(render_op(op)))))
            copied = resolve(Program((op,)), source, token_bounds)
            ids = tuple(tok.encode(copied))
            if not ids:
                raise ProgramError(f"op {index}: copy {op.unit} {op.start}-{op.end} copies no tokens")
            pieces.append(Piece("copied", ids))
        else:
            pieces.append(Piece("gen", tuple(tok.encode(render_op(op)))))
    return pieces


def program_sequence(tok: ModelTokenizer, prompt: Sequence[int], program: Program, source: str,
                     token_bounds=None, eos: bool = True) -> TrainingSequence:
    pieces = [Piece("prompt", tuple(prompt)), *op_pieces(tok, program, source, token_bounds)]
    if eos:
        pieces.append(Piece("eos", (tok.eos_ids[0],)))
    return TrainingSequence(tuple(pieces))


def rewrite_sequence(tok: ModelTokenizer, prompt: Sequence[int], target: str, eos: bool = True) -> TrainingSequence:
    """The rewrite baseline's layout: the prompt, then the whole edited text, all of it in the loss."""
    pieces = [Piece("prompt", tuple(prompt)), Piece("text", tuple(tok.encode(target)))]
    if eos:
        pieces.append(Piece("eos", (tok.eos_ids[0],)))
    return TrainingSequence(tuple(pieces))
