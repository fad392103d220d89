"""Percentile bootstrap intervals for ratios of sums (one implementation for coverage and bounds).

A ratio of sums over cases i is  R = sum_i num_i / sum_i den_i  (coverage: copied / gold tokens;
bound: regeneration time / program time). One bootstrap resample draws the cases with replacement
and recomputes R; the interval is the (alpha, 1 - alpha) percentile pair of the resampled R, with
alpha = (1 - level) / 2.

Undefined resamples (the rule). A resample whose denominator sums to 0 (every drawn case has
den = 0) has no ratio; it is left out and the percentiles are taken over the others. The count of
such resamples is returned (`Interval.undefined`) so that nothing is dropped unseen; if every
resample is undefined, or there are no cases or no resamples, the interval is (nan, nan).
(Program times are positive, so the bound never meets one; coverage can, on zero-token cases.)

Strata (optional, e.g. the corpus of each case). Cases are drawn with replacement within each
stratum, keeping each stratum's size, so a pooled resample always holds every corpus in its
proportion. Without strata the draws are `rng.integers(0, n, size=(resamples, n))` from
`np.random.default_rng(seed)`; tests/golden/stats_bootstrap.json pins the intervals they give.

Kernel repeats (optional second dimension). `num` and `den` may be 2-D, shape (k, n): row r holds
each case's value under the latency curve measured in repeat r. Each resample then also draws k
repeats with replacement and uses, per case, the mean over the drawn repeats; the case draws come
first, so the case part of the resample is the same as in the 1-D case.

`mean_of_ratios_ci` is the same resampling for the other pooled statistic: the mean over strata of
each stratum's ratio of sums (the mean of per-corpus bounds).

Paired ratios (the one pairing and median/IQR summary of timings). `ratio_pairs` pairs each method's
time with the baseline's time from the same repeat (ratio = baseline seconds / method seconds);
`summarize_ratios` gives their median, quartiles and IQR per (keys, method); `quartiles` is the
median/quartile aggregation (linear interpolation) every timing summary uses.

Portable elementary functions (`portable_log`, `portable_log1p`, `portable_exp`, `portable_power`).
numpy picks the implementation of log, exp, log1p and power by CPU at run time (AVX-512 on one machine,
AVX2 or plain C on another), and they differ in the last bit: the latency models' log-log curves, and
so reports/tables/bounds.csv, differed in the 16th digit between two machines. These go through the C
library (Python's math) on each distinct value, which gives the same bits on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from analysis.errors import CopyDecodeError, ParamsError


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    undefined: int  # resamples left out because their denominator summed to 0


NO_INTERVAL = Interval(float("nan"), float("nan"), 0)


def _as_matrix(values, name: str) -> np.ndarray:
    """(k, n) float matrix; a 1-D input is one 'repeat'."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 1:
        return array[None, :]
    if array.ndim != 2:
        raise ParamsError(f"bootstrap: {name} must be 1-D (cases) or 2-D (repeats x cases), got shape {array.shape}")
    return array


def _strata_positions(n: int, strata) -> list[np.ndarray]:
    if strata is None:
        return [np.arange(n)]
    labels = np.asarray(strata)
    if labels.shape != (n,):
        raise ParamsError(f"bootstrap: strata must have one label per case ({n}), got shape {labels.shape}")
    return [np.flatnonzero(labels == label) for label in sorted(set(labels.tolist()))]


def _stratum_sums(num: np.ndarray, den: np.ndarray, resamples: int, rng: np.random.Generator, strata):
    """Per resample and stratum, the sums of num and den: two arrays of shape (resamples, strata).

    Case draws for every stratum come first (in sorted label order), then the repeat draws.
    """
    k, n = num.shape
    case_sums = []  # per stratum: (k, resamples) sums of num and den for each repeat's row
    for positions in _strata_positions(n, strata):
        idx = positions[rng.integers(0, len(positions), size=(resamples, len(positions)))]
        case_sums.append((np.stack([row[idx].sum(axis=1) for row in num]),
                          np.stack([row[idx].sum(axis=1) for row in den])))
    if k == 1:
        weights = np.ones((resamples, 1))
    else:
        drawn = rng.integers(0, k, size=(resamples, k))
        weights = np.stack([(drawn == r).sum(axis=1) for r in range(k)], axis=1) / k
    num_sums = np.stack([(s[0].T * weights).sum(axis=1) for s in case_sums], axis=1)
    den_sums = np.stack([(s[1].T * weights).sum(axis=1) for s in case_sums], axis=1)
    return num_sums, den_sums


def _percentiles(values: np.ndarray, level: float) -> Interval:
    undefined = int(np.isnan(values).sum())
    if undefined == len(values):
        return Interval(float("nan"), float("nan"), undefined)
    alpha = (1 - level) / 2
    lo, hi = np.nanquantile(values, [alpha, 1 - alpha])
    return Interval(float(lo), float(hi), undefined)


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def _check(num: np.ndarray, den: np.ndarray, level: float) -> None:
    if num.shape != den.shape:
        raise ParamsError(f"bootstrap: num and den shapes differ: {num.shape} vs {den.shape}")
    if not 0 < level < 1:
        raise ParamsError(f"bootstrap: ci level must be in (0, 1), got {level}")


def ratio_of_sums_ci(num, den, resamples: int, seed: int, level: float, strata=None) -> Interval:
    """Percentile interval of sum(num) / sum(den) over cases (see the module docstring)."""
    num, den = _as_matrix(num, "num"), _as_matrix(den, "den")
    _check(num, den, level)
    if num.shape[1] == 0 or resamples == 0:
        return NO_INTERVAL
    rng = np.random.default_rng(seed)
    num_sums, den_sums = _stratum_sums(num, den, resamples, rng, strata)
    if num_sums.shape[1] == 1:
        num_total, den_total = num_sums[:, 0], den_sums[:, 0]
    else:
        num_total, den_total = num_sums.sum(axis=1), den_sums.sum(axis=1)
    return _percentiles(_safe_ratio(num_total, den_total), level)


def mean_of_ratios_ci(num, den, strata, resamples: int, seed: int, level: float) -> Interval:
    """Percentile interval of the mean over strata of sum_stratum(num) / sum_stratum(den)."""
    num, den = _as_matrix(num, "num"), _as_matrix(den, "den")
    _check(num, den, level)
    if num.shape[1] == 0 or resamples == 0:
        return NO_INTERVAL
    rng = np.random.default_rng(seed)
    num_sums, den_sums = _stratum_sums(num, den, resamples, rng, strata)
    # a stratum with an undefined ratio makes the whole mean undefined (nan propagates)
    return _percentiles(_safe_ratio(num_sums, den_sums).mean(axis=1), level)


def ratio_of_sums(num, den) -> float:
    """The point estimate: sum(num) / sum(den), nan when the denominator sums to 0."""
    total = float(np.sum(den))
    return float(np.sum(num)) / total if total > 0 else float("nan")


def mean_of_ratios(num, den, strata) -> float:
    """Mean over strata of each stratum's ratio of sums."""
    num, den, labels = np.asarray(num, dtype=float), np.asarray(den, dtype=float), np.asarray(strata)
    return float(np.mean([ratio_of_sums(num[labels == s], den[labels == s]) for s in sorted(set(labels.tolist()))]))


# ---------------------------------------------------------------- paired ratios: median and IQR

class TimingError(CopyDecodeError):
    """Timing records that cannot be paired (a method missing from a repeat, a duplicate, a zero time)."""


def quartiles(column: str, median: str, q25: str, q75: str) -> list[pl.Expr]:
    """The median and linear-interpolated quartiles of `column`, named `median`, `q25`, `q75`."""
    values = pl.col(column)
    return [values.median().alias(median), values.quantile(0.25, interpolation="linear").alias(q25),
            values.quantile(0.75, interpolation="linear").alias(q75)]


def _timing_frame(records: Iterable[Mapping[str, Any]] | pl.DataFrame) -> pl.DataFrame:
    frame = records if isinstance(records, pl.DataFrame) else pl.DataFrame(list(records))
    missing = {"method", "repeat", "seconds"} - set(frame.columns)
    if missing:
        raise TimingError(f"timing records need columns method, repeat and seconds; missing {sorted(missing)}")
    return frame


def ratio_pairs(records: Iterable[Mapping[str, Any]] | pl.DataFrame, baseline_method: str,
                keys: Sequence[str] = ()) -> pl.DataFrame:
    """One row per (keys, repeat, method != baseline): ratio = baseline seconds / method seconds,
    both from the same repeat. Every repeat must hold the baseline and each method exactly once."""
    frame = _timing_frame(records)
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
            *quartiles("ratio", "ratio_median", "ratio_q25", "ratio_q75"),
            ratio_min=pl.col("ratio").min(), ratio_max=pl.col("ratio").max(),
            pairs=pl.len(),
        )
        .with_columns(ratio_iqr=pl.col("ratio_q75") - pl.col("ratio_q25"))
        .sort(group)
    )


# ---------------------------------------------------------------- small counts: exact tests and intervals
#
# For exact-match counts on a few dozen cases (the pilot): a before/after difference is judged by the
# exact McNemar test on the discordant pairs (paired: the same cases before and after), and a share k/n
# gets a 95% Clopper-Pearson (exact binomial) interval. Both from the binomial distribution alone.


class CountError(CopyDecodeError):
    """A count, share or level given to an exact test or interval is out of range."""


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1)))


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise CountError(f"{name} must be a count (an int >= 0), got {value!r}")
    return int(value)


def mcnemar_exact(before_only: int, after_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: cases right only before (b) and right
    only after (c). Under no change each discordant pair goes either way with probability 1/2, so
    p = min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2); 1.0 when there is no discordant pair."""
    b, c = _count(before_only, "before_only"), _count(after_only, "after_only")
    if b + c == 0:
        return 1.0
    return min(1.0, 2 * _binom_cdf(min(b, c), b + c, 0.5))


def _bisect(f, lo: float, hi: float, iterations: int = 200) -> float:
    """The root of an increasing-or-decreasing f on [lo, hi] where f(lo) and f(hi) differ in sign."""
    f_lo = f(lo)
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if (f(mid) > 0) == (f_lo > 0):
            lo, f_lo = mid, f(mid)
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a share k/n: the p at which P(X >= k) and P(X <= k) equal
    (1 - level) / 2; 0 and 1 at the ends (k = 0, k = n)."""
    k, n = _count(k, "k"), _count(n, "n")
    if n == 0 or k > n:
        raise CountError(f"clopper_pearson needs 0 <= k <= n and n > 0, got k={k}, n={n}")
    if not 0 < level < 1:
        raise CountError(f"level must lie in (0, 1), got {level!r}")
    alpha = (1 - level) / 2
    low = 0.0 if k == 0 else _bisect(lambda p: (1 - _binom_cdf(k - 1, n, p)) - alpha, 0.0, 1.0)
    high = 1.0 if k == n else _bisect(lambda p: _binom_cdf(k, n, p) - alpha, 0.0, 1.0)
    return low, high


SIGNIFICANCE = 0.05  # a before/after difference with an exact McNemar p at or above this is "not significant"




# ---------------------------------------------------------------- paired runs (`copydecode compare`)
# A percentile bootstrap of a difference of ratios of sums that resamples paired units together, and the
# exact sign test of paired per-case values (with one 0/1 value per case: McNemar's test, above, on the
# discordant cases; the sign test takes the binomial from scipy, which holds for thousands of pairs).

CHUNK_CELLS = 1 << 22  # bootstrap indices drawn at once (4M: ~50 MB with the gathered values)


def nonzero_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den where den is not 0, else NaN (elementwise; a negative denominator divides)."""
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
        diffs.append(nonzero_ratio(sums[2], sums[3]) - nonzero_ratio(sums[0], sums[1]))
    values = np.concatenate(diffs)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def sign_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact sign test of paired per-case values: the binomial test of how many nonzero differences
    favour B. With one 0/1 value per case this is McNemar's exact test on the discordant cases
    (`mcnemar_exact`, which sums the binomial itself for the pilot's few dozen cases)."""
    from scipy.stats import binomtest

    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    up, down = int((diff > 0).sum()), int((diff < 0).sum())
    if up + down == 0:
        return 1.0
    return float(binomtest(up, up + down, 0.5).pvalue)


# ---------------------------------------------------------------- portable elementary functions


def _libm_log(v: float) -> float:
    return math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)


def _libm_log1p(v: float) -> float:
    return math.log1p(v) if v > -1 else (-math.inf if v == -1 else math.nan)


def _libm_exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _portable(function: Callable[[float], float], x) -> np.ndarray:
    """`function` on every element of `x`, evaluated once per distinct value (spans repeat their sizes)."""
    values = np.asarray(x, dtype=float)
    distinct, inverse = np.unique(values.ravel(), return_inverse=True)
    out = np.fromiter((function(float(v)) for v in distinct), dtype=float, count=distinct.size)
    return out[inverse].reshape(values.shape)


def portable_log(x) -> np.ndarray:
    """np.log with the same bits on every CPU (-inf at 0, nan below)."""
    return _portable(_libm_log, x)


def portable_log1p(x) -> np.ndarray:
    """np.log1p with the same bits on every CPU."""
    return _portable(_libm_log1p, x)


def portable_exp(x) -> np.ndarray:
    """np.exp with the same bits on every CPU (inf on overflow)."""
    return _portable(_libm_exp, x)


def portable_power(x, exponent: float) -> np.ndarray:
    """x ** exponent (a scalar exponent) with the same bits on every CPU."""
    return _portable(lambda v: _libm_pow(v, exponent), x)


def _libm_pow(v: float, exponent: float) -> float:
    try:
        return math.pow(v, exponent)
    except (ValueError, OverflowError):
        return float(np.power(v, exponent))
