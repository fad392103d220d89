"""The paired statistics of `copydecode compare`: a percentile bootstrap of a difference of ratios of sums
that resamples paired units together, and the exact sign test of paired per-case values."""

from __future__ import annotations

import math
import zlib

import numpy as np
from scipy.stats import binomtest

CHUNK_CELLS = 1 << 22  # bootstrap indices drawn at once (4M: ~50 MB with the gathered values)


def _rng(seed: int, figure: str, corpus: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(f"{figure}/{corpus}".encode())])


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1), np.nan)


def paired_bootstrap(a_num, a_den, b_num, b_den, resamples: int, rng: np.random.Generator,
                     level: float, chunk_cells: int = CHUNK_CELLS) -> tuple[float, float]:
    """Percentile CI of ratio_b - ratio_a (ratios of sums), resampling the paired units together, in chunks
    of at most `chunk_cells` indices (memory stays bounded whatever the case count). Resamples whose ratio is
    undefined (a zero denominator) are dropped; all undefined -> NaN."""
    arrays = [np.asarray(x, dtype=float) for x in (a_num, a_den, b_num, b_den)]
    n = arrays[0].size
    if n == 0:
        return math.nan, math.nan
    chunk = max(1, chunk_cells // n)
    diffs = []
    for start in range(0, resamples, chunk):
        idx = rng.integers(0, n, size=(min(chunk, resamples - start), n), dtype=np.int64 if n > 2**31 - 1 else np.int32)
        sums = [x[idx].sum(axis=1) for x in arrays]
        diffs.append(_ratio(sums[2], sums[3]) - _ratio(sums[0], sums[1]))
    values = np.concatenate(diffs)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def sign_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact sign test of paired per-case values: the binomial test of how many nonzero differences
    favour B. With one 0/1 value per case this is McNemar's exact test on the discordant cases."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    up, down = int((diff > 0).sum()), int((diff < 0).sum())
    if up + down == 0:
        return 1.0
    return float(binomtest(up, up + down, 0.5).pvalue)


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact McNemar p-value of paired booleans (the sign test on 0/1 values)."""
    return sign_test(np.asarray(a, dtype=bool), np.asarray(b, dtype=bool))


