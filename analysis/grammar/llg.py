"""llguidance as this suite uses it: a tokenizer for its matcher, and matchers over the exported grammars.

`LLMatcher` never raises on a bad grammar: it enters an error state. `compile_grammar` turns that state
into a named error (GrammarLimitError where llguidance's symbol table overflowed, else GrammarError),
so that a caller never walks a matcher that refuses everything.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.errors import GrammarError, GrammarLimitError
from analysis.grammar.export import FORMATS, Exported

SYMBOL_LIMIT_MESSAGE = "symbols.len() < u16::MAX"


class _PiecesTokenizer:
    """What llguidance's `LLTokenizer` reads from a tokenizer that is not a Hugging Face one (the tests'
    byte-level toy): the bytes of every id, EOS, and an encoder for the text it fast-forwards."""

    is_tokenizer_wrapper = True

    def __init__(self, tokenizer, encode, eos_ids: Sequence[int], n_vocab: int):
        self.tokens = [tokenizer.piece(i) if i < tokenizer.vocab_size else b"" for i in range(n_vocab)]
        self.eos_token_id = eos_ids[0]
        self.bos_token_id = None
        self.special_token_ids = sorted(set(eos_ids) | set(getattr(tokenizer, "added_token_ids", ())))
        self._encode = encode

    def __call__(self, text) -> list[int]:
        return list(self._encode(text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text))


def ll_tokenizer(tokenizer, eos_ids: Sequence[int], n_vocab: int | None = None, encode=None):
    """llguidance's tokenizer for a suite tokenizer (analysis.text.tokens: its backend's JSON, without
    the normalizer the suite drops too) or any tokenizer with `piece` and an `encode` function.
    `n_vocab`: the logits width, when the model has more rows than the tokenizer has ids."""
    import llguidance

    if not eos_ids:
        raise GrammarError("llguidance needs at least one EOS id")
    backend = getattr(tokenizer, "backend", None)
    if backend is not None:
        return llguidance.LLTokenizer(backend.to_str(), n_vocab=n_vocab, eos_token=list(eos_ids))
    if encode is None:
        raise GrammarError("a tokenizer without a tokenizers backend needs an `encode` function for llguidance")
    wrapper = _PiecesTokenizer(tokenizer, encode, eos_ids, n_vocab or tokenizer.vocab_size)
    return llguidance.LLTokenizer(wrapper, n_vocab=n_vocab, eos_token=list(eos_ids))


def lark_of(exported: Exported) -> str:
    """The grammar as llguidance reads it: Lark as is, GBNF through llguidance's own converter (the
    parser test of the EBNF export), a regex through `grammar_from_regex`."""
    import llguidance

    if exported.format == "lark":
        return llguidance.LLMatcher.grammar_from_lark(exported.text())
    if exported.format == "ebnf":
        from llguidance.gbnf_to_lark import gbnf_to_lark

        return llguidance.LLMatcher.grammar_from_lark(gbnf_to_lark(exported.text()))
    if exported.format == "regex":
        return llguidance.LLMatcher.grammar_from_regex(exported.grammar)
    raise GrammarError(f"grammar format must be one of {', '.join(FORMATS)}, got {exported.format!r}")


@dataclass
class Compiled:
    matcher: object   # llguidance.LLMatcher
    seconds: float    # building the matcher: parsing, grammar and lexer construction


def compile_grammar(lltok, exported: Exported) -> Compiled:
    import llguidance

    started = time.perf_counter()
    matcher = llguidance.LLMatcher(lltok, lark_of(exported), log_level=0)
    seconds = time.perf_counter() - started
    if matcher.is_error():
        error = matcher.get_error()
        head = error.splitlines()[0] if error else "unknown error"
        if SYMBOL_LIMIT_MESSAGE in error:
            raise GrammarLimitError(f"llguidance refused the {exported.form} {exported.format} grammar of a "
                                    f"{exported.n_lines}-line source: its symbol table (u16) is full ({head})")
        raise GrammarError(f"llguidance refused the {exported.form} {exported.format} grammar of a "
                           f"{exported.n_lines}-line source: {head}")
    return Compiled(matcher, seconds)


def accepts(matcher, ids: Sequence[int]) -> bool:
    """Does a copy of the (fresh) matcher take `ids` and end in an accepting state? A copy, because a
    rejected token leaves a matcher in an error state that `reset()` does not clear."""
    walk = matcher.deep_copy()
    return bool(walk.consume_tokens(list(ids))) and walk.is_accepting()


class StepMasks:
    """The next-token mask of a matcher as a byte-level decoder needs it, in llguidance's bitmask layout.

    Where nothing is forced this is llguidance's own mask. Where bytes are forced (`compute_ff_bytes()`
    is not empty: a tag after its first letters, a directive's close once its end line is unambiguous, a
    copied span) llguidance's mask holds only the first token of the forced bytes' canonical tokenization.
    A decoder that keeps op boundaries on token boundaries (kernels_profile.decode.sequence) needs every
    token spelling a prefix of the forced bytes (`"/>` where llguidance offers `"/>\\n`), and those that
    run past them where the matcher takes them, exactly as this suite's FSM allows; so there the mask is
    built from the token pieces and `validate_tokens`."""

    def __init__(self, pieces: Sequence[bytes | None], n_vocab: int):
        import numpy as np

        self.n_vocab = n_vocab
        self._by_piece: dict[bytes, list[int]] = {}
        for i, piece in enumerate(pieces):
            if piece:
                self._by_piece.setdefault(piece, []).append(i)
        self._sorted = sorted((p, i) for i, p in enumerate(pieces) if p)
        self._keys = [p for p, _ in self._sorted]
        self._longest = max((len(p) for p in self._keys), default=0)
        self.forced_steps = 0
        self.np = np

    def ids_spelling(self, data: bytes) -> list[int]:
        """The ids whose piece is exactly `data`."""
        return self._by_piece.get(data, [])

    def allocate(self):
        from llguidance.numpy import allocate_token_bitmask

        return allocate_token_bitmask(1, self.n_vocab)

    def fill(self, matcher, bitmask) -> bytes:
        """Fill `bitmask` (1 x words) for the matcher's next token; returns the forced bytes (b'' if none)."""
        from llguidance.numpy import fill_next_token_bitmask

        forced = matcher.compute_ff_bytes()
        if not forced:
            fill_next_token_bitmask(matcher, bitmask)
            return forced
        self.forced_steps += 1
        bitmask[:] = 0
        words = bitmask.view(self.np.uint32)
        for token in self.forced_ids(matcher, forced):
            words[0, token >> 5] |= self.np.uint32(1 << (token & 31))
        return forced

    def forced_ids(self, matcher, forced: bytes) -> list[int]:
        import bisect

        ids = [i for k in range(1, min(len(forced), self._longest) + 1) for i in self._by_piece.get(forced[:k], ())]
        lo = bisect.bisect_right(self._keys, forced)
        hi = bisect.bisect_left(self._keys, forced + b"\xff" * (self._longest + 1), lo)
        longer = [self._sorted[k][1] for k in range(lo, hi) if self._keys[k].startswith(forced)]
        return ids + [t for t in longer if matcher.validate_tokens([t]) == 1]


def allowed(bitmask, token: int) -> bool:
    return bool((int(bitmask[0, token >> 5]) >> (token & 31)) & 1)


def allowed_among(bitmask, ids):
    """The ids (a numpy int array) whose bit is set."""
    import numpy as np

    ids = np.asarray(ids, dtype=np.int64)
    words = bitmask.view(np.uint32)[0]
    return ids[((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)]


def suite_pieces(tokenizer, eos_ids: Sequence[int], n_vocab: int) -> list[bytes | None]:
    """Each id's bytes as program text (None for EOS, added tokens and ids past the vocabulary), as the
    suite's FSM reads them."""
    excluded = set(eos_ids) | set(getattr(tokenizer, "added_token_ids", ()))
    out: list[bytes | None] = []
    for i in range(n_vocab):
        if i in excluded or i >= tokenizer.vocab_size:
            out.append(None)
            continue
        try:
            out.append(tokenizer.piece(i))
        except Exception:  # an id with no vocabulary entry
            out.append(None)
    return out
