"""Ratios measured as ratios: seeded alternating run order, and per-repeat-pair speedups.

A ratio of two medians taken minutes apart on a shared machine mixes the two methods' cost with
whatever the machine did in between. Here the methods being compared run back to back inside each
repeat, in an order that alternates from repeat to repeat (so neither method always runs first,
on a warmer cache or a quieter minute), and the speedup is computed within each repeat:
ratio_r = T_baseline,r / T_method,r. The report gives the median and IQR of those ratios.

Order. `interleaved_order` uses a Williams design over the methods (a Latin square in which every
method follows every other equally often, balancing first-order carry-over), with the methods'
roles and the starting row drawn from the seed. For two methods it alternates: [A, B], [B, A], ...
Row r depends only on (methods, seed, r), so asking for more repeats extends the schedule without
changing the earlier repeats (a resumed run keeps the order it started with).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from analysis.errors import CopyDecodeError, ParamsError


class TimingError(CopyDecodeError):
    """Timing records that cannot be paired (a method missing from a repeat, a duplicate, a zero time)."""


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


# ---------------------------------------------------------------- per-pair ratios

def _frame(records: Iterable[Mapping[str, Any]] | pl.DataFrame) -> pl.DataFrame:
    frame = records if isinstance(records, pl.DataFrame) else pl.DataFrame(list(records))
    missing = {"method", "repeat", "seconds"} - set(frame.columns)
    if missing:
        raise TimingError(f"timing records need columns method, repeat and seconds; missing {sorted(missing)}")
    return frame


def ratio_pairs(records: Iterable[Mapping[str, Any]] | pl.DataFrame, baseline_method: str,
                keys: Sequence[str] = ()) -> pl.DataFrame:
    """One row per (keys, repeat, method != baseline): ratio = baseline seconds / method seconds,
    both from the same repeat. Every repeat must hold the baseline and each method exactly once."""
    frame = _frame(records)
    keys = list(keys)
    unit = keys + ["repeat", "method"]
    dupes = frame.group_by(unit).len().filter(pl.col("len") > 1)
    if dupes.height:
        raise TimingError(f"more than one time per {unit}: {dupes.head(3).to_dicts()}")
    if (frame["seconds"] <= 0).any() or frame["seconds"].is_null().any():
        raise TimingError(f"timings must be > 0 s: {frame.filter(~(pl.col('seconds') > 0)).head(3).to_dicts()}")
    methods = sorted(set(frame["method"].to_list()))
    if baseline_method not in methods:
        raise TimingError(f"baseline method {baseline_method!r} not in the records' methods {methods}")
    counts = frame.group_by(keys + ["repeat"]).agg(n=pl.col("method").n_unique())
    incomplete = counts.filter(pl.col("n") != len(methods))
    if incomplete.height:
        raise TimingError(f"repeats without every method {methods}: {incomplete.head(3).to_dicts()}")
    base = frame.filter(pl.col("method") == baseline_method).select(
        keys + ["repeat", pl.col("seconds").alias("baseline_seconds")])
    others = frame.filter(pl.col("method") != baseline_method)
    extra = [c for c in ("order_index",) if c in frame.columns]
    return (
        others.select(unit + ["seconds"] + extra)
        .join(base, on=keys + ["repeat"], how="inner")
        .with_columns(ratio=pl.col("baseline_seconds") / pl.col("seconds"))
        .sort(keys + ["method", "repeat"])
    )


def summarize_ratios(pairs: pl.DataFrame, keys: Sequence[str] = ()) -> pl.DataFrame:
    """Median, quartiles, IQR and count of the per-pair ratios for every (keys, method)."""
    group = list(keys) + ["method"]
    return (
        pairs.group_by(group)
        .agg(
            ratio_median=pl.col("ratio").median(),
            ratio_q25=pl.col("ratio").quantile(0.25, interpolation="linear"),
            ratio_q75=pl.col("ratio").quantile(0.75, interpolation="linear"),
            ratio_min=pl.col("ratio").min(), ratio_max=pl.col("ratio").max(),
            pairs=pl.len(),
        )
        .with_columns(ratio_iqr=pl.col("ratio_q75") - pl.col("ratio_q25"))
        .sort(group)
    )


def paired_ratios(records: Iterable[Mapping[str, Any]] | pl.DataFrame, baseline_method: str,
                  keys: Sequence[str] = ()) -> pl.DataFrame:
    """Speedup of every method over `baseline_method`, per repeat pair, summarised per (keys, method)."""
    return summarize_ratios(ratio_pairs(records, baseline_method, keys), keys)
