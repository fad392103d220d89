"""kernels_profile.e2e.summary: per-pair ratios within a repeat, the per-case statistic robust to one
outlier repeat, the per-method summary (measured and predicted aggregated the same way, with the absolute
error), the per-case table and the pooled headline (ratio of summed times with a case-bootstrap CI, the
HEvalFix pool, the figure including the prompt). The measurements come from measure_case over a fake
executor whose costs are known."""

import numpy as np
import polars as pl
import pytest
from fixtures import E2E_COSTS, E2E_PLAN, E2E_SEGMENTS, FakeExecutor, e2e_measured, fake_drafters

from analysis.rivals.families.suffix import DEFAULTS
from analysis.rivals.methods import Method, parse_method
from analysis.rivals.settings import DraftSettings
from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e import summary as e2e_summary
from kernels_profile.e2e.settings import MethodPlan


def case_frame(records, case_id="C/1", corpus="C", model="m", predicted: dict | None = None) -> pl.DataFrame:
    """measure_case records as the stage's rows: the case's columns and a prediction per method."""
    predicted = predicted or {}
    frame = pl.DataFrame(records, schema_overrides={"accept_hist": pl.List(pl.Int64)})
    return frame.with_columns(
        model=pl.lit(model), corpus=pl.lit(corpus), case_id=pl.lit(case_id), gold_tokens=pl.lit(4),
        predicted_seconds=pl.col("method").replace_strict(predicted, default=None, return_dtype=pl.Float64),
        predicted_ar_seconds=pl.lit(predicted.get("ar"), dtype=pl.Float64),
        extrapolated_spans=pl.lit(0), lossless_ok=pl.lit(True),
    ).with_columns(predicted=pl.col("predicted_ar_seconds") / pl.col("predicted_seconds"))


def measured(costs: dict, speed: list[float], seed: str, plan=E2E_PLAN, prompt_seconds=0.5):
    fake = FakeExecutor(costs, speed, len(plan.methods), prompt_seconds)
    return e2e.measure_case({"rewrite": fake, "program": fake}, [1, 2, 3, 4], E2E_SEGMENTS, plan, len(speed), seed,
                            fake_drafters)


def test_per_pair_ratios_come_from_the_same_repeat():
    # the machine is 10x slower in repeat 1: a ratio across repeats would be off by 10x
    _, records = e2e_measured("s", 3, speed=[1.0, 10.0, 1.0])
    frame = case_frame(records)
    pairs = e2e_summary.per_pair_ratios(frame)
    for method, cost in E2E_COSTS.items():
        if method != "ar":
            assert pairs.filter(pl.col("method") == method)["ratio"].to_list() == pytest.approx([E2E_COSTS["ar"] / cost] * 3)
    summary = e2e_summary.speedup_summary(frame)
    line = summary.filter(pl.col("method") == "copy-line-ideal").row(0, named=True)
    assert line["pair_ratio_median"] == pytest.approx(4.0) and line["pair_ratio_iqr"] == pytest.approx(0.0)
    assert line["pairs"] == 3 and line["speedup_median"] == pytest.approx(4.0)


def test_one_slow_repeat_does_not_move_a_cases_seconds():
    """Review D15: AR's repeat 1 is 63% slow (the whole machine is, in that repeat). The lower median of
    2 repeats is the faster repeat, so every method keeps its quiet seconds and the ratio of sums its 4x;
    the mean of repeats would have inflated every figure on the case."""
    frame = case_frame(measured(E2E_COSTS, [1.0, 1.63], "d15"))
    cases = e2e_summary.case_table(frame)
    seconds = dict(cases.select("method", "seconds").iter_rows())
    assert seconds == pytest.approx(E2E_COSTS)
    with_three = e2e_summary.case_table(case_frame(measured(E2E_COSTS, [1.0, 3.0, 1.2], "three")))
    assert dict(with_three.select("method", "seconds").iter_rows())["ar"] == pytest.approx(8.0 * 1.2)  # the median


def test_cases_that_measure_different_methods_summarise_together():
    _, swept = e2e_measured("a", 2)
    plain = measured(E2E_COSTS, [1.0, 1.0], "b", MethodPlan((Method("ar"), parse_method("copy-line-ideal"), parse_method("copy-token-ideal")), DraftSettings(3, DEFAULTS, ())))
    frame = pl.concat([case_frame(swept, "C/1"), case_frame(plain, "C/2")], how="diagonal")
    cases = dict(e2e_summary.speedup_summary(frame).select("method", "cases").iter_rows())
    assert cases["copy-line-ideal"] == 2 and cases["pld-latest-k10"] == 1


def three_cases() -> pl.DataFrame:
    """A short HEvalFix-Py case where line programs win 8x, a long one where they win 2.2x, and a
    ProbeEdit-S case at 2x; every prompt's prefill 0.5 s."""
    frames = []
    for case_id, corpus, scale, line_cost in (("HEvalFix-Py/1", "HEvalFix-Py", 1.0, 1.0), ("HEvalFix-Py/2", "HEvalFix-Py", 10.0, 4.0),
                                              ("ProbeEdit-S/1", "ProbeEdit-S", 5.0, 4.0)):
        costs = {k: v * scale for k, v in {**E2E_COSTS, "copy-line-ideal": line_cost}.items()}
        predicted = {k: v * 1.25 for k, v in costs.items()}  # every method predicted 25% slow
        frames.append(case_frame(measured(costs, [1.0, 1.0], case_id), case_id, corpus, predicted=predicted))
    return pl.concat(frames)


def test_the_pooled_headline_is_the_ratio_of_summed_times_never_the_best_case():
    frame = three_cases()
    cases = e2e_summary.case_table(frame)
    assert cases.height == 3 * len(E2E_PLAN.methods)
    a1 = cases.filter((pl.col("case_id") == "HEvalFix-Py/1") & (pl.col("method") == "copy-line-ideal")).row(0, named=True)
    assert a1["ar_seconds"] == 8.0 and a1["seconds"] == 1.0 and a1["speedup"] == pytest.approx(8.0)
    assert a1["tokens_per_forward"] == pytest.approx(1.0) and a1["accept_hist"] is None
    assert a1["speedup_with_prompt"] == pytest.approx(8.5 / 1.5) and a1["abs_error"] == pytest.approx(1 / 1.25 - 1)
    pld = cases.filter(pl.col("method") == "pld-latest-k10")["accept_hist"].to_list()
    assert pld == ["0:4"] * 3  # the fake's four forwards accepted no draft token
    pooled = e2e_summary.pooled_summary(frame, 200, 0, 0.95)
    line = {r["pool"]: r for r in pooled.filter(pl.col("method") == "copy-line-ideal").iter_rows(named=True)}
    assert list(line) == ["HEvalFix-Py", "ProbeEdit-S", "HEvalFix", "pooled"]  # the corpora, then HEvalFix, then all
    assert line["HEvalFix-Py"]["cases"] == 2 and line["HEvalFix-Py"]["speedup_pooled"] == pytest.approx((8 + 80) / (1 + 40))
    assert line["HEvalFix"]["speedup_pooled"] == line["HEvalFix-Py"]["speedup_pooled"]
    assert line["ProbeEdit-S"]["speedup_pooled"] == pytest.approx(40 / 20)
    whole = line["pooled"]
    assert whole["cases"] == 3 and whole["speedup_pooled"] == pytest.approx((8 + 80 + 40) / (1 + 40 + 20))
    assert max(r["speedup_pooled"] for r in line.values()) < 8.0
    # a case bootstrap: the interval holds the point and lies within the cases' own ratios
    assert 2.0 <= whole["ci_low"] <= whole["speedup_pooled"] <= whole["ci_high"] <= 8.0
    assert whole["speedup_with_prompt"] == pytest.approx((8.5 + 80.5 + 40.5) / (1.5 + 40.5 + 20.5))
    assert whole["predicted_pooled"] == pytest.approx(whole["speedup_pooled"])  # both sides 25% off
    assert whole["abs_error"] == pytest.approx(1 / 1.25 - 1) and whole["ar_abs_error"] == pytest.approx(1 / 1.25 - 1)
    again = e2e_summary.pooled_summary(frame, 200, 0, 0.95)
    assert again.equals(pooled)  # seeded


def test_a_corpus_without_hevalfix_has_no_hevalfix_pool():
    frame = three_cases().filter(pl.col("corpus") == "ProbeEdit-S")
    assert set(e2e_summary.pooled_summary(frame, 0, 0, 0.95)["pool"]) == {"ProbeEdit-S", "pooled"}


# ---------------------------------------------------------------- like-for-like summary

def summary_frame(ar_s, line_s, pred_ar, pred_line) -> pl.DataFrame:
    rows = []
    for i, (a, m, pa, pm) in enumerate(zip(ar_s, line_s, pred_ar, pred_line)):
        for repeat in range(2):
            common = {"case_id": f"C/{i}", "repeat": repeat, "predicted_ar_seconds": pa, "gold_tokens": 10, "tokens": 10,
                      "prompt_tokens": 5, "prompt_seconds": 0.1, "draft_seconds": 0.0, "accept_hist": None,
                      "extrapolated_spans": 0, "lossless_ok": True}
            rows.append({**common, "method": "ar", "order_index": repeat, "seconds": a, "forwards": 10,
                         "predicted_seconds": pa, "predicted": 1.0})
            rows.append({**common, "method": "copy-line-ideal", "order_index": 1 - repeat, "seconds": m, "forwards": 2,
                         "predicted_seconds": pm, "predicted": pa / pm})
    return pl.DataFrame(rows, schema_overrides={"accept_hist": pl.List(pl.Int64)}).with_columns(
        model=pl.lit("m"), corpus=pl.lit("C"))


def test_predicted_and_measured_are_aggregated_the_same_way():
    ar, line = np.array([10.0, 2.0, 30.0]), np.array([1.0, 1.0, 10.0])
    pred_ar, pred_line = np.array([8.0, 4.0, 20.0]), np.array([2.0, 1.0, 4.0])
    row = e2e_summary.speedup_summary(summary_frame(ar, line, pred_ar, pred_line)).filter(pl.col("method") == "copy-line-ideal").row(0, named=True)
    assert row["speedup_total"] == pytest.approx(ar.sum() / line.sum())
    assert row["predicted_total"] == pytest.approx(pred_ar.sum() / pred_line.sum()) == row["predicted"]
    assert row["speedup_median"] == pytest.approx(np.median(ar / line))
    assert row["predicted_median"] == pytest.approx(np.median(pred_ar / pred_line))
    assert row["gap_total"] == pytest.approx(row["speedup_total"] / row["predicted_total"] - 1)
    assert row["gap_median"] == pytest.approx(row["speedup_median"] / row["predicted_median"] - 1)
    # the absolute errors, beside the ratio's: each side's summed seconds against its prediction
    assert row["abs_error_total"] == pytest.approx(line.sum() / pred_line.sum() - 1)
    assert row["ar_abs_error_total"] == pytest.approx(ar.sum() / pred_ar.sum() - 1)
    assert row["abs_error_median"] == pytest.approx(np.median(line / pred_line - 1))
    assert row["label"] == "Copy-as-Decode line, directives free (upper bound)"


def test_errors_that_cancel_in_the_ratio_still_show_in_the_absolute_error():
    """Review D7: both sides 20% below the prediction: the ratio agrees exactly, the seconds do not."""
    ar, line = np.array([10.0, 2.0, 30.0]), np.array([1.0, 1.0, 10.0])
    row = e2e_summary.speedup_summary(summary_frame(ar, line, ar / 0.8, line / 0.8)).filter(pl.col("method") == "copy-line-ideal").row(0, named=True)
    assert row["gap_total"] == pytest.approx(0.0) and row["gap_median"] == pytest.approx(0.0)
    assert row["abs_error_total"] == pytest.approx(-0.2) and row["ar_abs_error_total"] == pytest.approx(-0.2)
    assert row["speedup_total"] != pytest.approx(row["speedup_median"])  # the two bases differ (3.5x vs 3x)
