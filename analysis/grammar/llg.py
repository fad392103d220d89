"""llguidance over the exported grammars: its tokenizer for a suite vocabulary, a matcher with named errors,
its masks as boolean rows. Torch-free (llguidance's numpy helpers); llguidance is a dependency.

llguidance never raises on a bad grammar, a resource limit or a refused token: its matcher enters an
error state (`is_error`, `get_error`), and a grammar past its u16 symbol table panics inside that
state. `compile_matcher` turns such a state into a GrammarError that names what was compiled and,
for the symbol table, the limit (analysis.grammar.export states the measured line limits).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.errors import GrammarError

_SYMBOLS_PANIC = "grammar.symbols.len()"


@dataclass
class _Wrapper:
    """What llguidance's TokenizerWrapper reads from a tokenizer: the byte pieces and an encoder."""

    tokens: list[bytes]
    eos_token_id: int
    encode: object
    special_token_ids: list[int]
    bos_token_id: int | None = None

    def __call__(self, text) -> list[int]:
        return list(self.encode(text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text))


def ll_tokenizer(tokenizer, eos_ids: Sequence[int], encode=None):
    """An llguidance LLTokenizer for a suite tokenizer (analysis.text.tokens.Tokenizer: read from its
    tokenizers JSON, the normalizer-free copy the suite tokenizes with) or any object with `vocab_size`,
    `piece(id)` and `added_token_ids` plus an `encode(text) -> ids` (the tests' byte-level toy)."""
    import llguidance

    eos = [int(e) for e in eos_ids]
    if not eos:
        raise GrammarError("llguidance needs at least one EOS token id")
    backend = getattr(tokenizer, "backend", None)
    if backend is not None and hasattr(backend, "to_str"):
        return llguidance.LLTokenizer(backend.to_str(), eos_token=eos)
    if encode is None:
        raise GrammarError(f"an llguidance tokenizer for {type(tokenizer).__name__} needs its encode function")
    special = sorted(set(getattr(tokenizer, "added_token_ids", ())) | set(eos))
    pieces = [b"" if i in special else tokenizer.piece(i) for i in range(tokenizer.vocab_size)]
    wrapper = _Wrapper(pieces, eos[0], encode, special)
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(wrapper), eos_token=eos)


@dataclass(frozen=True)
class Compiled:
    matcher: object
    seconds: float  # grammar text -> a matcher ready for its first mask (llguidance builds lazily after that)


def compile_matcher(ll_tok, lark: str, what: str) -> Compiled:
    """An LLMatcher over `lark`, timed; a GrammarError naming `what` if llguidance refuses it."""
    import llguidance

    started = time.perf_counter()
    matcher = llguidance.LLMatcher(ll_tok, llguidance.LLMatcher.grammar_from_lark(lark), log_level=0)
    seconds = time.perf_counter() - started
    if matcher.is_error():
        raise GrammarError(f"llguidance refused the grammar of {what}: {engine_error(matcher)}")
    return Compiled(matcher, seconds)


def engine_error(matcher) -> str:
    """The matcher's error, its first line (a panic brings a backtrace), the symbol limit named."""
    message = matcher.get_error().strip().splitlines()
    first = message[0] if message else "unknown error"
    if _SYMBOLS_PANIC in first:
        return (f"{first} (llguidance's symbol table holds fewer than 65,525 symbols; the forced-span form "
                "spends about six per source line)")
    return first


def consume(matcher, tokens: Sequence[int], what: str) -> None:
    if tokens and not matcher.consume_tokens(list(tokens)):
        raise GrammarError(f"llguidance rejected {what}: {engine_error(matcher)}")


class MaskBuffer:
    """One bit-packed mask row and its boolean view over the tokenizer's vocabulary."""

    def __init__(self, vocab_size: int):
        from llguidance.numpy import allocate_token_bitmask

        self.vocab_size = vocab_size
        self.bits = allocate_token_bitmask(1, vocab_size)

    def fill(self, matcher) -> None:
        """The next-token mask of `matcher` into the packed row (the step an engine pays per token)."""
        from llguidance.numpy import fill_next_token_bitmask

        fill_next_token_bitmask(matcher, self.bits)

    def allowed(self) -> np.ndarray:
        """The packed row as booleans, one per token id (bit k of word w is id 32 w + k)."""
        return np.unpackbits(self.bits.view(np.uint8), bitorder="little")[: self.vocab_size].astype(bool)
