"""Ratios measured as ratios: seeded alternating run order, and per-repeat-pair speedups.

A ratio of two medians taken minutes apart on a shared machine mixes the two methods' cost with
whatever the machine did in between. Here the methods being compared run back to back inside each
repeat, in an order that alternates from repeat to repeat (so neither method always runs first,
on a warmer cache or a quieter minute), and the speedup is computed within each repeat:
ratio_r = T_baseline,r / T_method,r. The report gives the median and IQR of those ratios
(`analysis.stats.ratio_pairs` / `summarize_ratios`, the one pairing and summary).

Order. `interleaved_order` uses a Williams design over the methods (a Latin square in which every
method follows every other equally often, balancing first-order carry-over), with the methods'
roles and the starting row drawn from the seed. For two methods it alternates: [A, B], [B, A], ...
Row r depends only on (methods, seed, r), so asking for more repeats extends the schedule without
changing the earlier repeats (a resumed run keeps the order it started with).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from analysis.errors import ParamsError


def williams_rows(n: int) -> list[list[int]]:
    """The rows of a Williams design on n treatments (n rows if n is even, 2n if odd)."""
    first = [0]
    low, high = 1, n - 1
    for k in range(1, n):
        if k % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = [[(x + shift) % n for x in first] for shift in range(n)]
    if n % 2:  # odd n: the mirrored square completes the carry-over balance
        rows += [list(reversed(row)) for row in rows]
    return rows


def interleaved_order(methods: Sequence[str], repeats: int, seed: int | str) -> list[list[str]]:
    """Per repeat, the order in which to run `methods` (each exactly once), seeded and alternating."""
    methods = list(methods)
    if not methods:
        raise ParamsError("interleaved_order: no methods to order")
    if len(set(methods)) != len(methods):
        raise ParamsError(f"interleaved_order: methods must be distinct, got {methods}")
    if not isinstance(repeats, int) or repeats < 0:
        raise ParamsError(f"interleaved_order: repeats must be an integer >= 0, got {repeats!r}")
    rng = random.Random(f"interleave/{seed}")  # str seeds hash with sha512: stable across processes
    roles = rng.sample(methods, len(methods))
    rows = williams_rows(len(methods))
    offset = rng.randrange(len(rows))
    return [[roles[i] for i in rows[(offset + r) % len(rows)]] for r in range(repeats)]
