"""Threads and models for a measured run: `set_threads` (and the `threads` block) is the one place torch's
intra-op thread count is set; `load_model` builds a registry model and its transformers tokenizer, checks
that the two agree and gives the model's EOS ids."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kernels_profile.runtime.models import build_model, check_vocabulary, eos_ids, load_hf_tokenizer


# ---------------------------------------------------------------- threads

def set_threads(threads: int | None) -> int:
    """Set torch's intra-op thread count (None: leave it as it is); returns the count in force."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


@contextmanager
def threads(count: int) -> Iterator[int]:
    """Run a block with `count` torch threads, then restore the count that was in force."""
    before = set_threads(None)
    try:
        yield set_threads(count)
    finally:
        set_threads(before)


# ---------------------------------------------------------------- models

@dataclass(frozen=True)
class ModelAndTokenizer:
    """A registry model (kernels_profile.runtime.models.LoadedModel), its transformers tokenizer and EOS ids."""

    lm: Any
    hf_tok: Any
    eos_ids: tuple[int, ...]


def load_model(name: str, weights: str, dtype: str, device: str) -> ModelAndTokenizer:
    """Build the model and its tokenizer (a missing tokenizer or weights file is a ModelError naming it)
    and check that the tokenizer's ids fit the model's embedding."""
    hf_tok = load_hf_tokenizer(name)
    lm = build_model(name, weights, dtype, device)
    check_vocabulary(lm, hf_tok)
    return ModelAndTokenizer(lm, hf_tok, eos_ids(name, hf_tok))
