import json

import numpy as np
import pytest
from conftest import ROOT

from analysis.errors import ParamsError
from analysis.stats import (
    mean_of_ratios,
    mean_of_ratios_ci,
    ratio_of_sums,
    ratio_of_sums_ci,
)


GOLDEN = json.loads((ROOT / "tests" / "golden" / "stats_bootstrap.json").read_text())


def _trial_inputs(trial):
    """The seeded inputs of one golden trial (some zero-token cases when trial % 3 == 0)."""
    gen = np.random.default_rng(1000 + trial)
    n = int(gen.integers(1, 60))
    total = gen.integers(0 if trial % 3 == 0 else 1, 400, size=n).astype(float)
    copied = np.floor(total * gen.random(n))
    resamples, seed, level = int(gen.integers(1, 400)), int(gen.integers(0, 10_000)), float(gen.choice([0.8, 0.9, 0.95]))
    return copied, total, resamples, seed, level


@pytest.mark.parametrize("row", GOLDEN, ids=lambda r: f"trial{r['trial']}")
def test_same_seed_gives_the_golden_interval(row):
    """tests/golden/stats_bootstrap.json pins the draw order and arithmetic (made when the two older
    bootstrap copies were checked equal to this one, bit for bit); the invariants hold on their own."""
    copied, total, resamples, seed, level = _trial_inputs(row["trial"])
    assert (len(total), resamples, seed, level) == (row["n"], row["resamples"], row["seed"], row["level"])
    new = ratio_of_sums_ci(copied, total, resamples, seed, level)
    assert (new.low, new.high, new.undefined) == pytest.approx((row["low"], row["high"], row["undefined"]),
                                                               nan_ok=True, abs=0, rel=0)
    bound = ratio_of_sums_ci(copied, total + 1.0, resamples, seed, level)  # positive denominators
    assert (bound.low, bound.high) == (row["positive_low"], row["positive_high"]) and bound.undefined == 0
    # invariants: an ordered interval inside the range of the per-case ratios, within [0, 1] here
    per_case = copied[total > 0] / total[total > 0]
    if not np.isnan(new.low):
        assert 0 <= new.low <= new.high <= 1
        assert per_case.min() - 1e-12 <= new.low and new.high <= per_case.max() + 1e-12
    assert new.undefined <= resamples and (new.undefined == 0 or (total == 0).any())
    assert ratio_of_sums_ci(copied, total, resamples, seed, level) == new  # same seed, same interval


def test_another_seed_gives_another_interval():
    copied, total, resamples, seed, level = _trial_inputs(1)
    first = ratio_of_sums_ci(copied, total, 400, seed, level)
    assert first != ratio_of_sums_ci(copied, total, 400, seed + 1, level)


def test_zero_denominator_resamples_are_left_out_and_counted():
    num, den = np.array([0.0, 5.0]), np.array([0.0, 10.0])
    interval = ratio_of_sums_ci(num, den, resamples=400, seed=3, level=0.9)
    assert interval.undefined > 0  # the resamples that drew case 0 twice
    assert interval.low == interval.high == 0.5
    empty = ratio_of_sums_ci(np.zeros(3), np.zeros(3), resamples=50, seed=0, level=0.9)
    assert np.isnan(empty.low) and empty.undefined == 50


def test_stratified_resamples_keep_each_stratum_and_narrow_the_interval():
    # two strata with very different ratios and sizes; unstratified draws mix them freely
    num = np.array([9.0] * 5 + [1.0] * 45)
    den = np.array([10.0] * 5 + [10.0] * 45)
    strata = np.array(["A"] * 5 + ["B"] * 45)
    flat = ratio_of_sums_ci(num, den, 2000, 0, 0.95)
    strat = ratio_of_sums_ci(num, den, 2000, 0, 0.95, strata=strata)
    assert strat.low == strat.high == pytest.approx(ratio_of_sums(num, den))  # within-stratum values are constant
    assert flat.high - flat.low > 0.05


def test_mean_of_ratios_weights_strata_equally():
    num = np.array([9.0, 9.0, 1.0, 1.0, 1.0, 1.0])
    den = np.full(6, 10.0)
    strata = ["A", "A", "B", "B", "B", "B"]
    assert mean_of_ratios(num, den, strata) == pytest.approx((0.9 + 0.1) / 2)
    assert ratio_of_sums(num, den) == pytest.approx(22 / 60)
    interval = mean_of_ratios_ci(num, den, strata, 300, 0, 0.9)
    assert interval.low == pytest.approx(0.5) and interval.high == pytest.approx(0.5)


def test_kernel_repeats_widen_the_interval_and_keep_the_case_draws():
    gen = np.random.default_rng(7)
    den = gen.uniform(1, 2, size=40)
    num = den * gen.uniform(2, 4, size=40)
    one = ratio_of_sums_ci(num, den, 1000, 5, 0.95)
    same = ratio_of_sums_ci(np.stack([num, num]), np.stack([den, den]), 1000, 5, 0.95)
    assert same.low == pytest.approx(one.low) and same.high == pytest.approx(one.high)  # identical repeats: no change
    spread = ratio_of_sums_ci(np.stack([num, num * 1.3, num * 0.7]), np.stack([den, den, den]), 1000, 5, 0.95)
    assert spread.high - spread.low > one.high - one.low


def test_bad_shapes_are_refused():
    with pytest.raises(ParamsError, match="shapes differ"):
        ratio_of_sums_ci(np.ones(3), np.ones(4), 10, 0, 0.9)
    with pytest.raises(ParamsError, match="one label per case"):
        ratio_of_sums_ci(np.ones(3), np.ones(3), 10, 0, 0.9, strata=["a"])
    with pytest.raises(ParamsError, match="ci level"):
        ratio_of_sums_ci(np.ones(3), np.ones(3), 10, 0, 1.5)
