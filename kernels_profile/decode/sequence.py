"""The sequence a Copy-as-Decode model sees, shared by training and decoding.

    prompt ids | op 1 | op 2 | ... | EOS

where a gen op is the tokens of `<gen>BODY</gen>` (tags included) and a copy op is the tokens of its
directive `<copy lines="i-j"/>` followed by the tokens of the text it copies. Each op's text is
tokenized on its own, so every op starts on a token boundary: that is what the decoder produces, since
it appends the copied tokens right after the token that closes a directive (and never lets a token run
past a directive's end, see kernels_profile.decode.decoder).

Token kinds: "prompt", "directive", "gen", "copied", "eos" (and "text" for the rewrite layout, where
the model writes the whole edited text). The loss covers the tokens the model writes: directive, gen
and the final EOS (without it a model never learns to stop); never the prompt nor the copied text,
which the decoder feeds in, not the model.

The prompt ids come from kernels_profile.runtime.hf (`prompt_ids`), as does the tokenizer interface
(`ModelTokenizer`) whose plain encoding tokenizes each op here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis.errors import ProgramError
from analysis.grammar.program import Copy, Program, render_op
from analysis.grammar.resolver import resolve
from analysis.text.lines import Source
from kernels_profile.runtime.hf import ModelTokenizer

KINDS = ("prompt", "directive", "gen", "copied", "eos", "text")
LOSS_KINDS = frozenset({"directive", "gen", "eos", "text"})
IGNORE = -100  # the label transformers' loss skips


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
    src = Source.of(source, token_bounds)  # split once, not once per copy
    for index, op in enumerate(program.ops):
        if isinstance(op, Copy):
            pieces.append(Piece("directive", tuple(tok.encode(render_op(op)))))
            copied = resolve(Program((op,)), src)
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
