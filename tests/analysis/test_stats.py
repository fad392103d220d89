import json
import math

import numpy as np
import polars as pl
import pytest
from fixtures import ROOT

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


# ---------------------------------------------------------------- exact tests and intervals for small counts

from analysis.stats import (  # noqa: E402
    CountError,
    clopper_pearson,
    mcnemar_exact,
)


@pytest.mark.parametrize("b, c", [(0, 2), (2, 0), (1, 5), (3, 3), (0, 0), (4, 12), (10, 25)])
def test_mcnemar_exact_matches_scipys_binomial_test(b, c):
    scipy_stats = pytest.importorskip("scipy.stats")
    want = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-12)


def test_mcnemar_exact_known_values():
    assert mcnemar_exact(0, 2) == 0.5  # the pilot's 0/33 -> 2/33: two discordant pairs, both one way
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(0, 0) == 1.0


@pytest.mark.parametrize("k, n", [(2, 33), (0, 33), (33, 33), (5, 20), (1, 1), (17, 164)])
def test_clopper_pearson_matches_scipys_exact_interval(k, n):
    scipy_stats = pytest.importorskip("scipy.stats")
    want = scipy_stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    got = clopper_pearson(k, n)
    assert got[0] == pytest.approx(want.low, abs=1e-9) and got[1] == pytest.approx(want.high, abs=1e-9)


def test_clopper_pearson_known_value():
    low, high = clopper_pearson(2, 33)  # the correctness review's [0.7%, 20.2%]
    assert round(100 * low, 1) == 0.7 and round(100 * high, 1) == 20.2


@pytest.mark.parametrize("call", [lambda: clopper_pearson(3, 2), lambda: clopper_pearson(0, 0),
                                  lambda: mcnemar_exact(-1, 2), lambda: mcnemar_exact(1.5, 3),
                                  lambda: clopper_pearson(1, 3, level=1.5), lambda: mcnemar_exact(True, 2)])
def test_small_count_statistics_reject_bad_input_by_name(call):
    with pytest.raises(CountError):
        call()


# ---------------------------------------------------------------- per-pair ratios (the profiler's and e2e's paired timings)

from analysis.stats import TimingError, ratio_pairs, summarize_ratios  # noqa: E402

def _records(ar, other, method="line", case="c1"):
    rows = [{"case_id": case, "method": "ar", "repeat": r, "seconds": s} for r, s in enumerate(ar)]
    return rows + [{"case_id": case, "method": method, "repeat": r, "seconds": s} for r, s in enumerate(other)]


def test_ratios_are_taken_within_each_repeat():
    ar, line = [2.0, 30.0, 200.0], [1.0, 10.0, 100.0]
    pairs = ratio_pairs(_records(ar, line), "ar", keys=["case_id"])
    assert pairs["ratio"].to_list() == [a / b for a, b in zip(ar, line)]
    summary = summarize_ratios(ratio_pairs(_records(ar, line), "ar", ["case_id"]), ["case_id"]).row(0, named=True)
    per_pair = sorted(a / b for a, b in zip(ar, line))
    assert summary["ratio_median"] == per_pair[1]
    assert summary["ratio_median"] != sorted(ar)[1] / sorted(line)[1]  # not a ratio of medians
    assert summary["pairs"] == 3
    assert math.isclose(summary["ratio_iqr"], summary["ratio_q75"] - summary["ratio_q25"])


def test_ratios_group_by_keys_and_methods():
    records = _records([2.0, 4.0], [1.0, 1.0], case="a") + _records([9.0, 9.0], [3.0, 3.0], case="b")
    records += [{"case_id": c, "method": "pld", "repeat": r, "seconds": 1.0} for c in "ab" for r in range(2)]
    summary = summarize_ratios(ratio_pairs(pl.DataFrame(records), "ar", ["case_id"]), ["case_id"])
    got = {(r["case_id"], r["method"]): r["ratio_median"] for r in summary.iter_rows(named=True)}
    assert got == {("a", "line"): 3.0, ("a", "pld"): 3.0, ("b", "line"): 3.0, ("b", "pld"): 9.0}


@pytest.mark.parametrize("records, fragment", [
    (_records([1.0, 2.0], [1.0]), "without every method"),
    (_records([1.0], [1.0]) + _records([1.0], [1.0]), "more than one time"),
    (_records([1.0], [0.0]), "> 0 s"),
    ([{"method": "line", "repeat": 0, "seconds": 1.0}], "baseline method 'ar'"),
    ([{"method": "ar", "seconds": 1.0}], "missing \\['repeat'\\]"),
])
def test_unpairable_records_are_timing_errors(records, fragment):
    with pytest.raises(TimingError, match=fragment):
        ratio_pairs(records, "ar", keys=["case_id"] if "case_id" in records[0] else [])
