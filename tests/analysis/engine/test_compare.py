"""The simulator-against-engine logic on hand-made numbers (analysis.engine.compare)."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.engine.compare import (SimulationInputs, comparison, copy_forwards_of, error_summary, method_trace,
                                     rankings, speedups, step_bins)
from analysis.engine.methods import EngineMethod
from analysis.serving.scheduler import EngineConfig


def runs(values: dict[tuple[str, int], list[float]]) -> pl.DataFrame:
    return pl.DataFrame([{"method": m, "concurrency": c, "repeat": r, "output_throughput": v, "ttft_p50_s": 1.0,
                          "tpot_p50_s": 0.1, "same_text_share": 1.0}
                         for (m, c), vs in values.items() for r, v in enumerate(vs)])


def test_errors_are_against_the_median_of_the_repeats_and_rankings_compare_orders():
    measured = runs({("ar", 1): [1.0, 3.0, 2.0], ("copy", 1): [4.0, 4.0, 4.0], ("ngram-k5", 1): [3.0, 3.0, 3.0]})
    predicted = runs({("ar", 1): [2.2], ("copy", 1): [3.0], ("ngram-k5", 1): [3.3]}).with_columns(
        fit=pl.lit("f"), extrapolated_step_share=pl.lit(0.0))
    table = comparison(measured, predicted)
    ar = table.filter(pl.col("method") == "ar").row(0, named=True)
    assert ar["output_throughput_measured"] == 2.0 and ar["output_throughput_error"] == pytest.approx(0.1)
    ranks = rankings(table)
    row = ranks.row(0, named=True)
    assert row["measured_order"] == "copy > ngram-k5 > ar" and row["predicted_order"] == "ngram-k5 > copy > ar"
    assert not row["same_ranking"] and row["kendall_tau"] == pytest.approx(1 / 3)
    summary = error_summary(table, ranks, target=0.15).row(0, named=True)
    assert summary["output_throughput_mdape"] == pytest.approx(0.1) and summary["within_target"]
    assert (summary["loads_same_ranking"], summary["loads"]) == (0, 1)


def test_speedups_pair_requests_by_request_and_repeat():
    records = pl.DataFrame([{"method": m, "concurrency": 1, "rid": f"r{i}", "repeat": 0, "e2e_s": e}
                            for m, es in (("ar", [2.0, 4.0]), ("copy", [1.0, 1.0])) for i, e in enumerate(es)])
    gains = speedups(records, runs({("ar", 1): [1.0], ("copy", 1): [3.0]}), 200, 0)
    copy = gains.filter(pl.col("method") == "copy").row(0, named=True)
    assert copy["throughput_over_ar"] == 3.0 and copy["pairs"] == 2  # (2 + 4) / (1 + 1): summed latencies
    assert copy["makespan_ratio"] == 3.0  # the runs' own throughputs
    assert copy["ci_low"] <= 3.0 <= copy["ci_high"]


def test_copy_as_decode_is_set_against_the_fastest_rival_of_each_load_with_a_paired_interval():
    """The measured decision: the rival is the speculative method fastest over AR at that load (ngram k=5 here),
    the ratio is its summed latencies over Copy-as-Decode's on the same requests, and the claim reads it as a
    decision scope with basis `measured` (no null value or interval)."""
    from analysis.claims.decision import MEASURED, SLOWER
    from analysis.claims.real_engine import decision_scope
    from analysis.engine.compare import decisions

    lat = {"ar": [4.0, 4.0], "ngram-k5": [1.0, 2.0], "ngram-k48": [3.0, 3.0], "copy": [2.0, 4.0]}
    records = pl.DataFrame([{"method": m, "concurrency": 4, "rid": f"r{i}", "repeat": 0, "e2e_s": e}
                            for m, es in lat.items() for i, e in enumerate(es)])
    gains = speedups(records, runs({(m, 4): [1.0] for m in lat}), 200, 0)
    decided = decisions(records, gains, 200, 0)
    row = decided.row(0, named=True)
    assert row["rival"] == "ngram-k5" and row["copy_over_rival"] == 0.5  # (1 + 2) / (2 + 4)
    assert row["copy_over_rival_ci_low"] <= 0.5 <= row["copy_over_rival_ci_high"] and row["pairs"] == 2
    scope = decision_scope(row, gains, {"frozen_run": "run", "engine_version": "0.0", "requests": 2}, "r")
    assert scope.basis == MEASURED and scope.value == 0.5 and scope.ci is not None
    assert scope.decision == (SLOWER if row["copy_over_rival_ci_high"] < 1 else scope.decision)
    assert scope.detail["concurrency"] == 4 and scope.detail["rival"] == "ngram-k5"


def test_the_simulated_forwards_follow_the_engine_run():
    plan = {"chain": [{"append_ids": [], "forced_ids": [7, 8]}, {"append_ids": [1, 1, 1], "forced_ids": [9, 2]}]}
    forwards = copy_forwards_of(plan, end_id=2)
    assert forwards.new_tokens == [1, 1, 3, 1] and forwards.emitted == [1, 1, 3, 1]  # the final end token is not a step
    inp = SimulationInputs(("r0",), {"r0": [5, 6, 7, 8, 5, 6]}, {"r0": [1]}, {"r0": [7, 8, 5, 6, 7]}, {"r0": plan}, 2,
                           1, 2, 0, EngineConfig(2048, 16))
    ngram = method_trace(EngineMethod("ngram", 5), "r0", inp)
    assert sum(ngram.emitted) == 5 and len(ngram.new_tokens) < 5  # drafts from the prompt were accepted
    assert method_trace(EngineMethod("ar"), "r0", inp).new_tokens == (1,) * 5


def test_steps_are_binned_by_shape_with_their_mean_time():
    steps = pl.DataFrame({"method": ["ar"] * 3, "batch": [1.0, 1.0, 4.0], "tokens": [1.0, 1.0, 4.0],
                          "sum_context": [10.0, 12.0, 40.0], "attention_keys": [11.0, 13.0, 50.0],
                          "seconds": [1.0, 3.0, 2.0], "context_max": [10, 12, 10]})
    bins = step_bins(steps)
    assert bins.height == 2 and bins.filter(pl.col("batch") == 1.0)["seconds"].item() == 2.0
