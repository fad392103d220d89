"""The step-cost model: its form recovered from points it generated, residuals, hold-out, the batch-1 points
and the datasheet terms of a one-context device-time source."""

import json

import numpy as np
import polars as pl
import pytest
from fixtures import ROOT, step_cost_model

from analysis.errors import ParamsError
from analysis.latency.roofline import device_roof
from analysis.latency.stepcost import (
    EXTRAPOLATED,
    MEASURED,
    StepCostModel,
    fit_step_cost,
    from_document,
    residuals,
    step_summary,
    to_document,
)
from analysis.latency.steppoints import batch1_points, device_fixed_terms, device_time_points, kv_bytes_per_token


def grid_points(model: StepCostModel, noise: float = 0.0, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for b in (1, 2, 4, 8, 16):
        for q in (1, 4, 16, 64):
            for c in (256, 1024):
                keys = b * q * (c + (q + 1) / 2)
                t = model.seconds(b, b * q, b * c, keys) * (1 + noise * rng.standard_normal())
                rows.append({"step_id": f"b{b}-q{q}-c{c}", "batch": b, "q": q, "context": c, "tokens": b * q,
                             "sum_context": b * c, "attention_keys": keys, "context_max": c, "seconds": t})
    return pl.DataFrame(rows)


def test_the_fit_recovers_the_terms_that_made_the_points():
    truth = step_cost_model()
    fit = fit_step_cost(grid_points(truth), "batched", MEASURED)
    for term, value in truth.terms().items():
        assert fit.terms()[term] == pytest.approx(value, rel=0.02, abs=1e-9), term
    assert fit.diagnostics["max_abs_rel_error"] < 1e-3
    assert fit.fitted_range.batch == 16 and fit.fitted_range.tokens == 1024 and fit.fitted_range.context == 1024


def test_holdout_predicts_the_left_out_grid_values_and_noise_shows_in_the_residuals():
    truth = step_cost_model()
    points = grid_points(truth, noise=0.05)
    fit = fit_step_cost(points, "batched", MEASURED, holdout=pl.col("batch").is_in([4]) | pl.col("q").is_in([16]))
    held = fit.diagnostics["holdout"]
    assert held["points"] == points.filter(pl.col("batch").is_in([4]) | pl.col("q").is_in([16])).height
    assert 0 < held["median_abs_rel_error"] < 0.2
    res = residuals(fit, points)
    assert res.height == points.height and res["rel_error"].abs().max() > 0.01  # 5% noise is not fitted away


def test_a_knee_and_a_per_sequence_term_change_the_prediction_as_the_form_says():
    m = step_cost_model(c0=0.01, c_w=0.008, t_star=8.0, c_seq=0.001, c_kv=0.0, c_a=0.0)
    assert m.seconds(1, 1, 0, 0) == pytest.approx(0.01 + 0.001 + 0.008)
    assert m.seconds(1, 8, 0, 0) == m.seconds(1, 1, 0, 0)  # below the ridge the weights cost the same
    assert m.seconds(1, 16, 0, 0) == pytest.approx(0.01 + 0.001 + 0.016)
    assert m.seconds(4, 4, 0, 0) - m.seconds(1, 4, 0, 0) == pytest.approx(0.003)
    assert m.outside(17, 10, 10) and m.outside(1, 2000, 10) and not m.outside(16, 1024, 1024)


def test_fixed_terms_stay_fixed_and_bad_points_are_named():
    points = grid_points(step_cost_model())
    fit = fit_step_cost(points, "x", EXTRAPOLATED, fixed={"c_seq": 0.0, "t_star": 8.0})
    assert fit.c_seq == 0.0 and fit.t_star == 8.0 and fit.fixed == ("c_seq", "t_star")
    with pytest.raises(ParamsError, match="unknown fixed terms"):
        fit_step_cost(points, "x", MEASURED, fixed={"c_x": 1.0})
    with pytest.raises(ParamsError, match="finite and > 0"):
        fit_step_cost(points.with_columns(seconds=pl.lit(0.0)), "x", MEASURED)
    with pytest.raises(ParamsError, match="lack"):
        fit_step_cost(points.drop("attention_keys"), "x", MEASURED)
    with pytest.raises(ParamsError, match="points for"):
        fit_step_cost(points.head(3), "x", MEASURED)


def test_the_document_round_trips_and_refuses_another_schema():
    fit = fit_step_cost(grid_points(step_cost_model()), "batched", MEASURED, assumptions=("said",))
    back = from_document(json.loads(json.dumps(to_document([fit]))))[0]
    assert back.terms() == fit.terms() and back.assumptions == ("said",) and back.fitted_range == fit.fitted_range
    with pytest.raises(ParamsError, match="unknown schema"):
        from_document({"schema": "other"})


def test_step_summary_takes_the_median_over_repeats():
    raw = pl.DataFrame({"step_id": ["a"] * 3, "batch": [2] * 3, "tokens": [8] * 3, "sum_context": [10] * 3,
                        "attention_keys": [50.0] * 3, "q_max": [4] * 3, "context_max": [5] * 3,
                        "seconds": [1.0, 3.0, 2.0], "noisy": [False, True, False]})
    row = step_summary(raw).row(0, named=True)
    assert row["seconds"] == 2.0 and row["repeats"] == 3 and row["noisy_share"] == pytest.approx(1 / 3)


def test_batch1_points_read_prefills_and_steady_decode_segments():
    rows = []
    for repeat in (0, 1):
        for n in (1, 2, 4, 8, 16, 32):
            rows.append({"model": "m", "method": "ar", "baseline": "eager", "pair_baseline": "eager", "context": 256,
                         "n": n, "repeat": repeat, "seconds": 0.005 + 0.02 * n})
            rows.append({"model": "m", "method": "prefill", "baseline": "eager", "pair_baseline": "eager",
                         "context": 256, "n": n, "repeat": repeat, "seconds": 0.02 + 0.0001 * n})
    points = batch1_points(pl.DataFrame(rows), "m", decode_from=8)
    decode = points.filter(pl.col("q") == 1).filter(pl.col("step_id").str.starts_with("decode"))
    assert decode["seconds"].to_list() == pytest.approx([0.02, 0.02])  # steps 8-16 and 16-32: the overhead is gone
    assert decode["context"].to_list() == [268, 280]
    assert points.filter(pl.col("step_id").str.starts_with("prefill")).height == 6
    with pytest.raises(ParamsError, match="no rows of model"):
        batch1_points(pl.DataFrame(rows), "other")


def test_a_device_time_source_gets_its_kv_attention_and_ridge_terms_from_the_datasheet():
    from kernels_profile.runtime.models import published_config

    roof = device_roof("NVIDIA H200", json.loads((ROOT / "analysis/data/devices.json").read_text()))
    config = published_config("qwen2.5-1.5b")
    fixed, why = device_fixed_terms(config, roof, "bfloat16")
    assert kv_bytes_per_token(config, "bfloat16") == 2 * 28 * 2 * 128 * 2
    assert fixed["c_kv"] == pytest.approx(28672 / 4.8e12)
    assert fixed["t_star"] == pytest.approx(989e12 * 2 / (2 * 4.8e12))
    assert "datasheet" in why[0]
    frame = pl.DataFrame({"model": ["m"] * 2, "device_name": ["NVIDIA H200"] * 2, "context": [256] * 2, "n": [8, 64],
                          "step_ms": [3.0, 3.0], "prefill_ms": [3.3, 3.8]})
    points = device_time_points(frame, "m")
    assert points["q"].to_list() == [1, 8, 64] and points["seconds"][0] == pytest.approx(0.003)


def eager_source(name: str = "h200/qwen2.5-7b/eager", model: str = "qwen2.5-7b"):
    from kernels_profile.stages.batched import Batch1Source

    return Batch1Source(name, "measured", model, "eager", (ROOT / "reports/kernels/frozen/h200/gpu-eager.parquet",), "")


def test_the_eager_h200_extrapolation_is_the_same_from_any_starting_point_or_row_order(monkeypatch):
    """Issue 46 (identifiability): the frozen h200/qwen2.5-7b/eager points leave the knee free past their largest
    step (t* = 530 on one machine, 957 on another, same error). The fit must not depend on where a solver
    starts or on the points' order: a frozen source gives the same tables everywhere."""
    import scipy.optimize

    from kernels_profile.stages.batched import batch1_fit

    roofs = json.loads((ROOT / "analysis/data/devices.json").read_text())
    base, points = batch1_fit(eager_source(), roofs)
    step = (16, 4096, 16 * 2048.0, 4096 * 2100.0)   # a C = 16 step past the profiled prefills
    real = scipy.optimize.least_squares
    monkeypatch.setattr(scipy.optimize, "least_squares",
                        lambda fun, x0, *a, **k: real(fun, np.asarray(x0, dtype=float) * 1.7, *a, **k))
    moved, _ = batch1_fit(eager_source(), roofs)
    shuffled = fit_step_cost(points.sample(fraction=1.0, shuffle=True, seed=7), base.source, base.basis,
                             fixed={k: getattr(base, k) for k in base.fixed}, floor=base.floor)
    for other in (moved, shuffled):
        for term, value in base.terms().items():
            assert other.terms()[term] == pytest.approx(value, rel=1e-6, abs=1e-12), term
        assert other.seconds(*step) == pytest.approx(base.seconds(*step), rel=1e-9)
    assert "t_star" in base.fixed and base.t_star == pytest.approx(989e12 * 2 / (2 * 4.8e12))


def test_a_knee_past_the_largest_step_is_reported_as_not_identified():
    flat = grid_points(step_cost_model(t_star=5000.0, c_kv=0.0, c_a=0.0, c_seq=0.0))   # the grid stops at 1,024
    assert fit_step_cost(flat, "x", MEASURED).diagnostics["t_star_identified"] is False
    assert fit_step_cost(grid_points(step_cost_model()), "x", MEASURED).diagnostics["t_star_identified"] is True


def test_past_the_fitted_tokens_a_step_costs_at_least_the_last_segments_marginal_and_never_below_the_floor():
    """The serving step price respects the one prefill rule: past the largest profiled step no cheaper than the
    last profiled segment's marginal cost per token, and nowhere below the datasheet floor."""
    from dataclasses import replace

    from analysis.latency.stepcost import MARGINAL_RULE, StepFloor, StepRange

    m = replace(step_cost_model(c0=0.01, c_seq=0.0, c_w=0.008, t_star=8.0, c_kv=0.0, c_a=0.0),
                fitted_range=StepRange(1, 512, 256), marginal_s=0.002)
    # inside the range the form holds; past it the form gives 1 ms a token, the last segment 2 ms
    assert m.seconds(1, 256, 0, 0) == pytest.approx(0.01 + 0.008 * 32)
    at_top = 0.01 + 0.008 * 64
    assert m.seconds(1, 1024, 0, 0) == pytest.approx(at_top + 0.002 * 512)
    assert m.priced(1, 1024, 0, 0)[2] is True and m.priced(1, 256, 0, 0)[2] is False
    cheap = replace(m, marginal_s=0.0005)   # a flatter last segment: the headline keeps the form, the low rule does not
    assert cheap.seconds(1, 1024, 0, 0) == pytest.approx(0.01 + 0.008 * 128)
    assert cheap.with_rule(MARGINAL_RULE).seconds(1, 1024, 0, 0) == pytest.approx(at_top + 0.0005 * 512)
    floored = replace(cheap, floor=StepFloor(read_s=0.0, token_s=0.002, key_s=0.0, seq_s=0.0, source="test"))
    assert floored.seconds(1, 1024, 0, 0) == pytest.approx(2.048)   # the floor: 2 ms a token at peak
    assert floored.seconds(1, 4, 0, 0) == pytest.approx(0.01 + 0.008)   # above the floor, the form
    back = StepCostModel.from_record(json.loads(json.dumps(floored.to_record())))
    assert back.floor == floored.floor and back.marginal_s == floored.marginal_s
    with pytest.raises(ParamsError, match="unknown price rule"):
        m.with_rule("flat")
