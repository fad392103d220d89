"""Kernel timing tables (analysis.latency.tables): summaries, paired speedups, AR-step level shifts."""

import numpy as np
import polars as pl
import pytest

from analysis.latency.sources import format_name
from analysis.latency.tables import ar_step_segments, ar_step_shifts, paired_kernel_ratios, speedup_table, summarize
from analysis.latency.model import QuadraticAR, QuadraticPrefill
from fixtures import KERNEL_NS as NS
from fixtures import TRUE_AR, TRUE_PREFILL, raw_from


def test_summary_and_speedup_table_pair_repeats():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], repeats=3, baselines=("eager", "static"))
    summary = summarize(raw)
    row = summary.filter((pl.col("method") == "prefill") & (pl.col("n") == 8)).row(0, named=True)
    values = raw.filter((pl.col("method") == "prefill") & (pl.col("n") == 8))["seconds"].to_numpy()
    assert row["median"] == pytest.approx(np.median(values)) and row["repeats"] == 3
    table = speedup_table(raw)
    one = table.filter((pl.col("n") == 64) & (pl.col("baseline") == "eager")).row(0, named=True)
    ratios = [raw.filter((pl.col("method") == m) & (pl.col("n") == 64) & (pl.col("repeat") == r)
                         & (pl.col("baseline") == "eager"))["seconds"][0] for r in range(3) for m in ("ar", "prefill")]
    assert one["speedup"] == pytest.approx(np.median([ratios[2 * r] / ratios[2 * r + 1] for r in range(3)]))
    assert table.group_by("context", "n").agg(pl.col("is_strongest").sum())["is_strongest"].to_list() == [1] * len(NS)


def test_the_speedup_table_keeps_its_column_order():
    """The kernel_speedup table's columns, in order (the median/quartile aggregation is analysis.stats')."""
    from fixtures import ROOT

    table = speedup_table(pl.read_parquet(ROOT / "reports/kernels/frozen/h200/gpu-eager.parquet"))
    assert table.columns == ["model", "weights", "dtype", "device", "context", "n", "baseline", "prefill", "t_ar",
                             "t_prefill", "speedup", "speedup_q25", "speedup_q75", "repeats", "strongest",
                             "is_strongest", "overhead_share"]


def test_step_shift_finds_a_level_shift():
    raw = pl.DataFrame({"model": ["m"] * 4, "baseline": ["eager"] * 4, "context": [0] * 4, "repeat": [0] * 4,
                        "method": ["ar"] * 4, "n": [4, 8, 16, 32], "seconds": [0.04, 0.08, 0.16 + 0.24, 0.4 + 0.48]})
    shifts = ar_step_shifts(ar_step_segments(raw), early_until=8, late_from=16)
    assert shifts["early_ms"][0] == pytest.approx(10) and shifts["late_ms"][0] == pytest.approx(30)


def test_prefill_kinds_pair_within_their_own_pair():
    base = {"model": "m", "weights": "random", "dtype": "float32", "device": "cpu", "context": 0, "repeat": 0}
    rows = [{**base, "method": "ar", "baseline": "static_compiled", "pair_baseline": "static_compiled", "n": 8, "seconds": 0.08},
            {**base, "method": "prefill", "baseline": "eager", "pair_baseline": "static_compiled", "n": 8, "seconds": 0.04},
            {**base, "method": "prefill", "baseline": "compiled", "pair_baseline": "static_compiled", "n": 8, "seconds": 0.01}]
    table = speedup_table(pl.DataFrame(rows)).sort("prefill")
    assert table["speedup"].to_list() == [8.0, 2.0] and table["is_strongest"].to_list() == [True, False]
    assert format_name("h200", "m", "static_compiled", "compiled") == "h200/m/static_compiled/compiled_prefill"


def synthetic_raw(a=2e-3, b=1e-6, p=(1e-3, 1e-4, 1e-8, 1e-7), noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    ar, prefill = QuadraticAR(a, b), QuadraticPrefill(*p)
    for c in (0, 256, 1024):
        for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
            for r in range(3):
                jitter = 1 + noise * rng.standard_normal()
                rows.append(("m", "random", "float32", "cpu", "ar", "eager", c, n, r, float(ar.evaluate(n, c)) * jitter))
                rows.append(("m", "random", "float32", "cpu", "prefill", "eager", c, n, r, float(prefill.evaluate(n, c)) * jitter))
    return pl.DataFrame(rows, orient="row", schema=["model", "weights", "dtype", "device", "method", "baseline",
                                                    "context", "n", "repeat", "seconds"])


def test_speedup_table_pairs_repeats_and_marks_the_strongest():
    raw = synthetic_raw()
    static = raw.filter(pl.col("method") == "ar").with_columns(baseline=pl.lit("static"), seconds=pl.col("seconds") * 0.5)
    table = speedup_table(pl.concat([raw, static]))
    row = table.filter((pl.col("n") == 64) & (pl.col("context") == 0) & (pl.col("baseline") == "static")).row(0, named=True)
    ar, prefill = QuadraticAR(2e-3, 1e-6), QuadraticPrefill(1e-3, 1e-4, 1e-8, 1e-7)
    assert row["speedup"] == pytest.approx(0.5 * float(ar.evaluate(64, 0)) / float(prefill.evaluate(64, 0)))
    assert row["is_strongest"] and row["overhead_share"] == pytest.approx(0.5)
    assert summarize(raw)["repeats"].unique().to_list() == [3]


def _timing(method, baseline, repeat, seconds, pair_baseline=None):
    row = {"model": "m", "weights": "random", "dtype": "float32", "device": "cpu", "context": 0, "n": 8,
           "method": method, "baseline": baseline, "repeat": repeat, "seconds": seconds}
    return row if pair_baseline is None else {**row, "pair_baseline": pair_baseline}


def test_each_ar_timing_is_divided_by_the_prefill_of_its_own_pair_and_repeat():
    rows = [_timing("ar", b, r, t, b) for b, r, t in (("eager", 0, 8.0), ("eager", 1, 9.0), ("static", 0, 4.0))]
    rows += [_timing("prefill", "eager", r, t, b)
             for b, r, t in (("eager", 0, 2.0), ("eager", 1, 3.0), ("static", 0, 1.0))]
    ratios = paired_kernel_ratios(pl.DataFrame(rows))
    got = {(r["baseline"], r["repeat"]): r["ratio"] for r in ratios.iter_rows(named=True)}
    assert got == {("eager", 0): 4.0, ("eager", 1): 3.0, ("static", 0): 4.0}
    assert set(ratios["prefill"]) == {"eager"}


def test_unpaired_raw_shares_one_prefill_per_repeat_across_baselines():
    rows = [_timing("ar", "eager", 0, 8.0), _timing("ar", "static", 0, 4.0), _timing("prefill", "eager", 0, 2.0)]
    ratios = paired_kernel_ratios(pl.DataFrame(rows))
    assert dict(zip(ratios["baseline"], ratios["ratio"])) == {"eager": 4.0, "static": 2.0}


def test_speedup_summary_is_the_profile_result_in_milliseconds():
    from fixtures import TRUE_AR, TRUE_PREFILL, raw_from

    from analysis.latency.tables import speedup_summary

    table = speedup_summary(raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0))
    for row in table.iter_rows(named=True):
        ar, prefill = TRUE_AR.evaluate(row["n"], 256), TRUE_PREFILL.evaluate(row["n"], 256)
        assert row["t_ar_ms"] == pytest.approx(ar * 1e3) and row["t_prefill_ms"] == pytest.approx(prefill * 1e3)
        assert row["speedup"] == pytest.approx(ar / prefill) and row["repeats"] == 3
