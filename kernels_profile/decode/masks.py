"""The decoder's masks over the grammar automaton, built in one place: `MaskTables` builds the
`ProgramFSM` of a vocabulary once per set of unit limits (a source's line or token count) and its
`MaskTable` once, and shares both between decodes, as a server keeps them. The Copy-as-Decode decoder
(kernels_profile.decode.decoder), the pilot's evaluation, grammar-constrained `generate`
(kernels_profile.decode.constrained) and the mask benchmark (kernels_profile.decode.maskbench) all take
their automaton and masks from here.

On top of the FSM's own mask, the layout rule (`LayoutRule`): a token may close a copy directive only with
its last byte, so that ops start on token boundaries (kernels_profile.decode.sequence's layout), whichever
engine gives the mask (the llguidance engine applies it too).
"""

from __future__ import annotations

import numpy as np

from analysis.errors import ProgramError
from analysis.grammar.fsm import OPS, ByteAutomaton, FsmWalker, ProgramFSM
from analysis.grammar.program import COPY_END

_END = COPY_END.encode("ascii")
_COPY_STATES = ("n2", "lit")  # the states from which a byte can close a copy directive


def _closes_copy_inside(automaton: ByteAutomaton, state: tuple, piece: bytes) -> bool:
    """Does walking `piece` from `state` close a copy directive before its last byte?"""
    step = automaton.step
    for k, byte in enumerate(piece):
        nxt = step(state, byte)
        if nxt is None:
            return False
        if k < len(piece) - 1 and nxt == OPS and state[0] in _COPY_STATES:
            return True
        state = nxt
    return False


def closes_copy_bytes(automaton: ByteAutomaton, state: tuple, piece: bytes | None) -> bool:
    """Does `piece` in `state` end exactly on the last byte of a copy directive?"""
    if not piece or not piece.endswith(_END[-1:]):
        return False
    step = automaton.step
    for byte in piece[:-1]:
        state = step(state, byte)
        if state is None:
            return False
    return state[0] in _COPY_STATES and step(state, piece[-1]) == OPS


def closes_copy(fsm: ProgramFSM, state: tuple, token_id: int) -> bool:
    """Does `token_id` in `state` end exactly on the last byte of a copy directive?"""
    return closes_copy_bytes(fsm.automaton, state, fsm.piece(token_id))


class LayoutRule:
    """The decoder's rule that a token may close a copy directive only with its last byte (so that ops
    start on token boundaries, kernels_profile.decode.sequence's layout), whichever engine gives the mask.
    Only tokens that could break it are walked: from inside a number or the closing literal any token with
    an inner '>', from elsewhere only one holding all of '"/>'."""

    def __init__(self, pieces: list[bytes]):
        gt = _END[-1]
        self.pieces = pieces
        self.inner_gt = np.array([i for i, p in enumerate(pieces) if gt in p[:-1]], dtype=np.int64)
        self.inner_end = np.array([i for i, p in enumerate(pieces) if _END in p[:-1]], dtype=np.int64)

    def suspects(self, state: tuple) -> np.ndarray:
        return self.inner_gt if state[0] in _COPY_STATES else self.inner_end

    def blocked(self, automaton: ByteAutomaton, state: tuple, candidates) -> list[int]:
        """The candidate ids that would run past a directive's end."""
        return [int(i) for i in candidates if _closes_copy_inside(automaton, state, self.pieces[int(i)])]


class MaskTable:
    """Per FSM state, the boolean tensor of allowed ids (logits width wide), built once and cached,
    with its additive form (0 where allowed, -inf where blocked) that the decoder applies.

    Applying by addition: on this CPU one `add_` of a 151,936-wide float row takes ~15 us on one
    thread where `masked_fill_` with a boolean mask takes ~380 us (kernels_profile.decode.maskbench measures
    both). The additive form costs 4 bytes per id per visited state (~0.6 MB per state for Qwen2.5)."""

    def __init__(self, fsm: ProgramFSM, width: int, device: str = "cpu"):
        import torch

        self.fsm, self.width, self.device, self.torch = fsm, width, device, torch
        self._cache: dict[tuple, tuple] = {}
        self.layout = LayoutRule([fsm.piece(i) or b"" for i in range(fsm.vocab_size)])
        self.computed = 0

    def allowed(self, walker: FsmWalker) -> np.ndarray:
        """The walker's mask minus the tokens that would run past a directive's end."""
        mask = walker.allowed().copy()
        suspects = self.layout.suspects(walker.state)
        mask[self.layout.blocked(self.fsm.automaton, walker.state, suspects[mask[suspects]])] = False
        return mask

    def _entry(self, walker: FsmWalker) -> tuple:
        key = (walker.forcing, walker.state)
        entry = self._cache.get(key)
        if entry is None:
            allowed = self.allowed(walker)
            full = np.zeros(self.width, dtype=bool)  # ids past the tokenizer's vocabulary stay blocked
            n = min(self.width, allowed.shape[0])
            full[:n] = allowed[:n]
            if not full.any():
                raise ProgramError(f"no token is allowed in FSM state {walker.state!r} (forcing={walker.forcing})")
            mask = self.torch.from_numpy(full).to(self.device)
            bias = self.torch.zeros(self.width, device=self.device).masked_fill_(~mask, float("-inf"))
            entry = (mask, bias)
            self._cache[key] = entry
            self.computed += 1
        return entry

    def mask(self, walker: FsmWalker):
        """The cached boolean tensor of allowed ids for the walker's next token."""
        return self._entry(walker)[0]

    def bias(self, walker: FsmWalker):
        """The cached additive mask (0 / -inf) for the walker's next token."""
        return self._entry(walker)[1]

    def cached(self) -> list[tuple]:
        return list(self._cache.values())


def apply_mask(logits, bias):
    """Mask one logits row in place: add the state's 0 / -inf row (cheaper than masked_fill_)."""
    return logits.add_(bias.to(logits.dtype) if bias.dtype != logits.dtype else bias)


def logits_width(lm) -> int | None:
    """A loaded model's logits row width (its embedding rows, which may pass the tokenizer's vocabulary)."""
    model = lm.model
    return int(model.get_input_embeddings().weight.shape[0]) if hasattr(model, "get_input_embeddings") else None


class MaskTables:
    """The automata and mask tables of one vocabulary (a tokenizer with its EOS ids, logits `width` wide
    on `device`), one per set of unit limits, each built once: the one place a `ProgramFSM` is built for
    decoding. Limits below 1 are left out (the automaton's own rule), so `{"lines": 0}` and `{}` share one."""

    def __init__(self, tokenizer, eos_ids: tuple[int, ...], width: int | None = None, device: str = "cpu"):
        self.tokenizer, self.eos_ids, self.width, self.device = tokenizer, tuple(eos_ids), width, device
        self._fsms: dict[tuple, ProgramFSM] = {}
        self._tables: dict[tuple, MaskTable] = {}

    @classmethod
    def for_model(cls, lm, tok) -> MaskTables:
        """The tables of a loaded model (its embedding rows wide, on its device) and its ModelTokenizer."""
        return cls(tok.fsm_tokenizer, tok.eos_ids, logits_width(lm), lm.device)

    @staticmethod
    def _key(limits: dict[str, int]) -> tuple:
        return tuple(sorted((unit, n) for unit, n in limits.items() if n >= 1))

    def fsm(self, limits: dict[str, int]) -> ProgramFSM:
        """The grammar automaton over this vocabulary for a source of these unit counts."""
        key = self._key(limits)
        if key not in self._fsms:
            self._fsms[key] = ProgramFSM(self.tokenizer, limits, eos_ids=self.eos_ids)
        return self._fsms[key]

    def table(self, limits: dict[str, int]) -> MaskTable:
        """The decoder's mask table (torch) over `fsm(limits)`."""
        key = self._key(limits)
        if key not in self._tables:
            fsm = self.fsm(limits)
            self._tables[key] = MaskTable(fsm, self.width or fsm.vocab_size, self.device)
        return self._tables[key]
