"""kernels_profile.e2e.summary: per-pair ratios within a repeat, the per-method summary (measured and predicted
aggregated the same way), the per-case table and the pooled headline (ratio of summed times). The
measurements come from measure_case over a fake executor whose costs are known."""

import numpy as np
import polars as pl
import pytest
from fixtures import E2E_COSTS, E2E_PLAN, E2E_SEGMENTS, FakeExecutor, e2e_measured

from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e import summary as e2e_summary
from kernels_profile.stages import e2e as stage


def test_per_pair_ratios_come_from_the_same_repeat():
    # the machine is 10x slower in repeat 1: a ratio across repeats would be off by 10x
    _, records = e2e_measured("s", 3, speed=[1.0, 10.0, 1.0])
    frame = pl.DataFrame(records).with_columns(model=pl.lit("m"), corpus=pl.lit("C"), case_id=pl.lit("C/1"))
    pairs = e2e_summary.per_pair_ratios(frame)
    for method, cost in E2E_COSTS.items():
        if method != "ar":
            assert pairs.filter(pl.col("method") == method)["ratio"].to_list() == pytest.approx([E2E_COSTS["ar"] / cost] * 3)
    summary = e2e_summary.speedup_summary(frame)
    line = summary.filter(pl.col("method") == "cad_line").row(0, named=True)
    assert line["pair_ratio_median"] == pytest.approx(4.0) and line["pair_ratio_iqr"] == pytest.approx(0.0)
    assert line["pairs"] == 3 and line["speedup_median"] == pytest.approx(4.0)


def test_cases_that_measure_different_methods_summarise_together():
    _, swept = e2e_measured("a", 2)
    plan = e2e.MethodPlan((), ())
    fake = FakeExecutor(E2E_COSTS, [1.0, 1.0], len(plan.methods()))
    plain = e2e.measure_case(fake, [1], E2E_SEGMENTS, plan, 2, "b")
    frame = pl.concat([pl.DataFrame(swept).with_columns(case_id=pl.lit("C/1")),
                       pl.DataFrame(plain).with_columns(case_id=pl.lit("C/2"))]).with_columns(
        model=pl.lit("m"), corpus=pl.lit("C"))
    cases = dict(e2e_summary.speedup_summary(frame).select("method", "cases").iter_rows())
    assert cases["cad_line"] == 2 and cases["pld_latest_k10"] == 1


def test_the_pooled_headline_is_the_ratio_of_summed_times_never_the_best_case():
    """Two corpora: a short case where line programs win 8x and a long one where they win 2x. The
    pooled figure is (sum AR) / (sum method) over all three cases, with the count, per corpus and
    overall; the best case's 8x is no pool's figure."""
    frames = []
    for case_id, corpus, scale, line_cost in (("A/1", "A", 1.0, 1.0), ("A/2", "A", 10.0, 4.0), ("B/1", "B", 5.0, 4.0)):
        costs = {**E2E_COSTS, "cad_line": line_cost}
        fake = FakeExecutor({k: v * scale for k, v in costs.items()}, [1.0, 1.0], len(E2E_PLAN.methods()))
        frames.append(pl.DataFrame(e2e.measure_case(fake, [1, 2, 3, 4], E2E_SEGMENTS, E2E_PLAN, 2, case_id)).with_columns(
            case_id=pl.lit(case_id), corpus=pl.lit(corpus), model=pl.lit("m"), gold_tokens=pl.lit(4)))
    frame = pl.concat(frames)
    cases = e2e_summary.case_table(frame)
    assert cases.height == 3 * len(E2E_PLAN.methods())
    a1 = cases.filter((pl.col("case_id") == "A/1") & (pl.col("method") == "cad_line")).row(0, named=True)
    assert a1["ar_seconds"] == 8.0 and a1["seconds"] == 1.0 and a1["speedup"] == pytest.approx(8.0)
    assert a1["tokens_per_forward"] == pytest.approx(4.0) and a1["accept_hist"] is None
    pld = cases.filter(pl.col("method") == "pld_latest_k10")["accept_hist"].to_list()
    assert pld == ["0:1"] * 3  # the fake's one forward accepted no draft token
    pooled = e2e_summary.pooled_summary(cases)
    line = {r["pool"]: r for r in pooled.filter(pl.col("method") == "cad_line").iter_rows(named=True)}
    assert set(line) == {"A", "B", "pooled"}
    assert line["A"]["cases"] == 2 and line["A"]["speedup_pooled"] == pytest.approx((8 + 80) / (1 + 40))
    assert line["B"]["speedup_pooled"] == pytest.approx(40 / 20)
    assert line["pooled"]["cases"] == 3
    assert line["pooled"]["speedup_pooled"] == pytest.approx((8 + 80 + 40) / (1 + 40 + 20))
    assert max(r["speedup_pooled"] for r in line.values()) < 8.0
    assert pooled["pool"].to_list()[-1] == "pooled"  # the overall pool after the corpora
    assert stage.pooled_metrics(pooled)["m/pooled/cad_line"]["cases"] == 3


# ---------------------------------------------------------------- like-for-like summary

def summary_frame(ar_s, line_s, pred_ar, pred_line) -> pl.DataFrame:
    rows = []
    for i, (a, m, pa, pm) in enumerate(zip(ar_s, line_s, pred_ar, pred_line)):
        for repeat in range(2):
            rows.append({"case_id": f"C/{i}", "method": "ar", "repeat": repeat, "order_index": repeat,
                         "seconds": a, "forwards": 10, "predicted_ar_seconds": None, "predicted_seconds": None,
                         "predicted": None})
            rows.append({"case_id": f"C/{i}", "method": "cad_line", "repeat": repeat, "order_index": 1 - repeat,
                         "seconds": m, "forwards": 2, "predicted_ar_seconds": pa, "predicted_seconds": pm,
                         "predicted": pa / pm})
    return pl.DataFrame(rows).with_columns(model=pl.lit("m"), corpus=pl.lit("C"))


def test_predicted_and_measured_are_aggregated_the_same_way():
    ar, line = np.array([10.0, 2.0, 30.0]), np.array([1.0, 1.0, 10.0])
    pred_ar, pred_line = np.array([8.0, 4.0, 20.0]), np.array([2.0, 1.0, 4.0])
    row = e2e_summary.speedup_summary(summary_frame(ar, line, pred_ar, pred_line)).filter(pl.col("method") == "cad_line").row(0, named=True)
    assert row["speedup_total"] == pytest.approx(ar.sum() / line.sum())
    assert row["predicted_total"] == pytest.approx(pred_ar.sum() / pred_line.sum()) == row["predicted"]
    assert row["speedup_median"] == pytest.approx(np.median(ar / line))
    assert row["predicted_median"] == pytest.approx(np.median(pred_ar / pred_line))
    assert row["gap_total"] == pytest.approx(row["speedup_total"] / row["predicted_total"] - 1)
    assert row["gap_median"] == pytest.approx(row["speedup_median"] / row["predicted_median"] - 1)
    assert row["label"] == "Copy-as-Decode, line level"


def test_a_prediction_that_matches_every_case_has_no_gap_on_either_basis():
    ar, line = np.array([10.0, 2.0, 30.0]), np.array([1.0, 1.0, 10.0])
    row = e2e_summary.speedup_summary(summary_frame(ar, line, ar, line)).filter(pl.col("method") == "cad_line").row(0, named=True)
    # the two bases differ (3.5x vs 3x), yet each is compared with its own kind of prediction
    assert row["speedup_total"] != pytest.approx(row["speedup_median"])
    assert row["gap_total"] == pytest.approx(0.0) and row["gap_median"] == pytest.approx(0.0)
    ar_row = e2e_summary.speedup_summary(summary_frame(ar, line, ar, line)).filter(pl.col("method") == "ar").row(0, named=True)
    assert ar_row["predicted"] is None and ar_row["gap_total"] is None and ar_row["speedup_total"] == pytest.approx(1.0)


def test_each_model_pools_its_own_cases_and_tokens_per_forward_is_a_ratio_of_sums():
    rows = []
    for model, case_id, corpus, ar, line, tokens, forwards in (("m1", "B/1", "B", 4.0, 2.0, 10, 2), ("m1", "A/1", "A", 6.0, 1.0, 30, 3),
                                                               ("m2", "A/1", "A", 9.0, 3.0, 5, 5)):
        rows.append({"model": model, "corpus": corpus, "case_id": case_id, "method": "cad_line", "label": "line",
                     "seconds": line, "ar_seconds": ar, "tokens": tokens, "forwards": forwards})
    pooled = e2e_summary.pooled_summary(pl.DataFrame(rows))
    assert pooled.filter(pl.col("model") == "m1")["pool"].to_list() == ["A", "B", "pooled"]  # the overall pool last
    m1 = pooled.filter((pl.col("model") == "m1") & (pl.col("pool") == "pooled")).row(0, named=True)
    assert m1["cases"] == 2 and m1["speedup_pooled"] == pytest.approx((4 + 6) / (2 + 1))
    assert m1["tokens_per_forward"] == pytest.approx((10 + 30) / (2 + 3))  # not the mean of 5 and 10
    m2 = pooled.filter((pl.col("model") == "m2") & (pl.col("pool") == "pooled")).row(0, named=True)
    assert m2["cases"] == 1 and m2["speedup_pooled"] == pytest.approx(3.0)
