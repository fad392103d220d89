"""The one losslessness criterion: two logits rows agree when their largest absolute difference,
relative to the largest magnitude compared, is within a tolerance and their argmax is the same.

Copy by prefill is lossless: one forward of N tokens leaves the same KV cache and next-token logits as N
one-token steps over the same tokens, up to floating-point reassociation (the two paths differ only in
how matrix products are batched). The e2e stage checks every Copy-as-Decode run against AR with
`compare_logits` (kernels_profile.e2e.methods); tests/kernels_profile/measure/test_equivalence.py checks
the cache and logits of prefill against steps on a tiny model and on SmolLM2.
"""

from __future__ import annotations

from dataclasses import dataclass


def rel_diff(a, b) -> float:
    """Largest absolute difference, relative to the largest magnitude of either tensor."""
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-12)
    return float((a.float() - b.float()).abs().max()) / scale


@dataclass(frozen=True)
class LogitsCheck:
    rel_diff: float
    argmax_equal: bool
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.rel_diff <= self.tolerance and self.argmax_equal


def compare_logits(a, b, tolerance: float) -> LogitsCheck:
    """The one losslessness criterion: the same logits (within `tolerance`, relative) and the same argmax."""
    return LogitsCheck(rel_diff(a, b), bool((a.argmax(-1) == b.argmax(-1)).all()), tolerance)
