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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.errors import ParamsError


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
