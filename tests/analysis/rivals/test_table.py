"""The rivals tables on made-up per-case prices: the pooled figure is the ratio of sums, the pools are the paper's
three corpora and every corpus, an ideal program is never the fastest, the runner-up is another family's best, and
Copy-as-Decode's ratio to the best rival is paired case by case."""

import numpy as np
import polars as pl
import pytest

from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED
from analysis.rivals.table import (
    best_pair_intervals,
    crossover,
    fastest,
    flip_point,
    percase_speedups,
    pooled_rows,
    with_band,
)

SECONDS = {"ar": 10.0, "copy-line-decoded": 4.0, "copy-line-ideal": 1.0, "pld-earliest-k10": 5.0,
           "pld-earliest-k64": 2.0, "suffix-k64": 2.5, "pld-earliest-kinf": 1.5, "pld-earliest-k128": 1.8}
K_MAX = 64


def percase(cases_per_corpus: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for corpus, framing in (("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("CommitEdits-click", "file")):
        for i in range(cases_per_corpus):
            scale = float(rng.uniform(0.5, 2.0))
            for method, seconds in SECONDS.items():
                rows.append({"kernel_source": "paper", "case_id": f"{corpus}/{i}", "corpus": corpus, "framing": framing,
                             "method": method, "gold_tokens": 100, "forwards": 10, "decode_steps": 5,
                             "seconds": seconds * scale * (1.1 if i % 2 and method == "suffix-k64" else 1.0),
                             "extrapolated_forwards": 2, "extrapolated_n_forwards": 1,
                             "extrapolated_context_forwards": 2})
    return percase_speedups(pl.DataFrame(rows))


def test_pooled_rows_are_ratios_of_sums_per_corpus_and_pool():
    cases = percase()
    table = pooled_rows(cases, 50, 0, 0.95)
    assert set(zip(table["corpus"], table["pool"])) >= {("HEvalFix-Py", "corpus"), (POOLED, PAPER_POOL), (POOLED, ALL_POOL)}
    paper = table.filter((pl.col("pool") == PAPER_POOL) & (pl.col("method") == "suffix-k64")).row(0, named=True)
    rows = cases.filter(pl.col("corpus").is_in(["HEvalFix-Py", "ProbeEdit-S"]) & (pl.col("method") == "suffix-k64"))
    assert paper["n_cases"] == 10
    assert paper["speedup"] == pytest.approx(rows["ar_seconds"].sum() / rows["seconds"].sum())
    assert table.filter(pl.col("method") == "ar")["speedup"].to_list() == [1.0] * 5
    assert table.filter(pl.col("method") == "copy-line-ideal")["role"].unique().to_list() == ["bound"]
    # the share of forwards priced by extrapolation, and split by cause (batch 1 is measured: never extrapolated)
    one = table.row(0, named=True)
    assert (one["extrapolated_share"], one["extrapolated_n_share"], one["extrapolated_context_share"],
            one["extrapolated_batch_share"]) == pytest.approx((0.2, 0.1, 0.2, 0.0))


def test_the_judged_pair_is_deployable_unbounded_drafts_and_budgets_past_the_cap_are_bounds():
    """Audit M3: the headline's winner was prompt lookup with unbounded drafts, a setting no engine serves. Drafts
    without a budget are a bound (role), a budget past rivals.deployable_k_max is not deployable, and the row says
    how many settings the pair was chosen among and under which cap."""
    cases = percase()
    table = pooled_rows(cases, 50, 0, 0.95)
    assert table.filter(pl.col("method") == "pld-earliest-kinf")["role"].unique().to_list() == ["bound"]
    row = fastest(table, cases, 50, 0, 0.95, K_MAX).filter(pl.col("pool") == ALL_POOL).row(0, named=True)
    assert row["best_rival"] == "pld-earliest-k64" and row["fastest"] == "pld-earliest-k64"  # not kinf, not k128
    assert (row["rival_settings"], row["copy_settings"], row["deployable_k_max"]) == (3, 1, K_MAX)
    wider = fastest(table, cases, 50, 0, 0.95, 128).filter(pl.col("pool") == ALL_POOL).row(0, named=True)
    assert wider["best_rival"] == "pld-earliest-k128"


def test_the_band_is_the_ratio_under_each_rule_and_the_crossover_names_where_the_ranking_flips():
    """Issue 46 section 2: the verdict's band (copy_over_rival under each rule past the profiled N) and the draft
    budget at which prompt lookup overtakes Copy-as-Decode."""
    cases = percase()
    table = pooled_rows(cases, 50, 0, 0.95)
    fast = fastest(table, cases, 50, 0, 0.95, K_MAX)
    slower_rival = cases.with_columns(seconds=pl.when(pl.col("method") == "pld-earliest-k64").then(pl.col("seconds") * 3)
                                      .otherwise(pl.col("seconds")))
    banded = with_band(fast, {"marginal": best_pair_intervals(cases, K_MAX, 50, 0, 0.95),
                              "linear": best_pair_intervals(percase_speedups(
                                  slower_rival.drop("ar_seconds", "speedup")), K_MAX, 50, 0, 0.95)})
    row = banded.filter(pl.col("pool") == ALL_POOL).row(0, named=True)
    # marginal: pld k64 (2 s) against 4 s: 0.5; linear: the best rival is now suffix decoding (2.5 s, 2.75 s)
    suffix, copy = (cases.filter(pl.col("method") == m)["seconds"].sum() for m in ("suffix-k64", "copy-line-decoded"))
    assert (row["copy_over_rival_band_low"], row["copy_over_rival_band_high"]) == pytest.approx((0.5, suffix / copy))
    # each rule's paired interval beside its value (every case alike here, so the interval is the point)
    assert (row["copy_over_rival_marginal_ci_low"], row["copy_over_rival_marginal_ci_high"]) == pytest.approx((0.5, 0.5))
    assert row["copy_over_rival_linear_ci_low"] <= suffix / copy <= row["copy_over_rival_linear_ci_high"]
    assert flip_point({5: 1.0, 10: 3.0, 16: 2.0, 64: 5.0, None: 9.0}, 2.5) == (5, 10, True)
    assert flip_point({5: 1.0, 10: 2.0}, 2.5) == (10, None, None)
    flips = crossover(table, K_MAX).filter((pl.col("pool") == ALL_POOL) & (pl.col("rival_group") == "pld-earliest"))
    flip = flips.row(0, named=True)
    # Copy-as-Decode 2.5x; prompt lookup 2x at k = 10 and 5x at k = 64 (and unbounded past it)
    assert (flip["copy_wins_up_to"], flip["rival_wins_from"], flip["unbounded_passes"]) == (10, 64, True)


def test_the_fastest_is_deployable_and_its_runner_up_another_family():
    cases = percase()
    fast = fastest(pooled_rows(cases, 50, 0, 0.95), cases, 50, 0, 0.95, K_MAX)
    row = fast.filter(pl.col("pool") == ALL_POOL).row(0, named=True)
    assert row["fastest"] == "pld-earliest-k64"          # the ideal program (10x) is faster but never a candidate
    assert row["runner_up"] == "suffix-k64"                   # not pld-earliest-k10, a sibling setting
    assert row["best_copy"] == "copy-line-decoded" and row["best_rival"] == "pld-earliest-k64"
    assert row["copy_over_rival"] == pytest.approx(0.5)   # 2 s against 4 s on every case
    assert row["copy_over_rival_ci_low"] == pytest.approx(0.5) and row["copy_over_rival_ci_high"] == pytest.approx(0.5)


def test_samples_lines_give_each_case_the_pooled_pair_and_its_own_ratio():
    """M5 of the UX review: samples.jsonl held no rivals rows; now one line per case names, per kernel source, the
    pooled head-to-head's pair (fastest deployable Copy-as-Decode and fastest rival over every case, never an ideal
    program) and this case's ratio, so "which edits does Copy-as-Decode win?" has a per-case answer."""
    import json

    import polars as pl

    from analysis.results.percase import rivals_sample_lines as sample_lines

    rows = []
    for case, copy_s in (("c/1", 1.0), ("c/2", 4.0)):
        for method, seconds in (("ar", 10.0), ("copy-line-decoded", copy_s), ("copy-line-ideal", 0.5),
                                ("pld-earliest-k5", 2.0), ("suffix-k64", 3.0)):
            rows.append({"kernel_source": "fit", "case_id": case, "corpus": "C", "framing": "body", "method": method,
                         "seconds": seconds, "speedup": 10.0 / seconds})
    lines = [json.loads(line) for line in sample_lines(pl.DataFrame(rows))]
    assert [(x["task"], x["case_id"]) for x in lines] == [("rivals", "c/1"), ("rivals", "c/2")]
    first, second = (x["by_kernel_source"]["fit"] for x in lines)
    assert (first["copy"], first["rival"]) == ("copy-line-decoded", "pld-earliest-k5")
    assert first["copy_over_rival"] == 2.0 and second["copy_over_rival"] == 0.5
