"""Fitting latency models to kernel timings (analysis.latency.fit): recovery, interp, holdout, options."""

import math

import numpy as np
import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.latency.tables import summarize
from analysis.latency.model import RooflinePrefill, select_model
from analysis.latency.fit import FitOptions, fit_latency, fit_points, holdout_table
from fixtures import KERNEL_KEY as KEY
from fixtures import KERNEL_NS as NS
from fixtures import TRUE_AR, TRUE_PREFILL, raw_from
from fixtures import method_points as points


def test_synthetic_quadratic_parameters_are_recovered_within_5_percent():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], noise=0.005)
    model = select_model(fit_latency(raw, FitOptions("quadratic", (4, 32, 256))), "m", "float32", "cpu", "eager")
    for name in ("a", "b"):
        assert getattr(model.ar, name) == pytest.approx(getattr(TRUE_AR, name), rel=0.05), name
    for name in ("p0", "p1", "p2", "p3"):
        assert getattr(model.prefill, name) == pytest.approx(getattr(TRUE_PREFILL, name), rel=0.05), name
    n, c = np.array(NS * 2, dtype=float), np.array([300.0] * len(NS) + [900.0] * len(NS))
    for fitted, true in ((model.t_prefill(n, c).seconds, TRUE_PREFILL.evaluate(n, c)),
                         (model.t_ar(n, c).seconds, TRUE_AR.evaluate(n, c))):
        assert np.max(np.abs(fitted / true - 1)) < 0.05
    assert model.diagnostics["prefill"]["holdout_max_rel_error"] < 0.05


def test_one_context_quadratic_drops_the_collinear_term_and_says_so():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0)
    dropped = fit_latency(raw, FitOptions("quadratic"))[0]
    assert dropped.prefill.p2 == 0.0
    assert any("N*c term (p2) is dropped" in note for note in dropped.diagnostics["prefill"]["notes"])
    # the per-token slope at c=256 is still right: it is p1 + p2*256 of the truth
    assert dropped.prefill.p1 == pytest.approx(TRUE_PREFILL.p1 + TRUE_PREFILL.p2 * 256, rel=0.05)
    with pytest.raises(ParamsError, match=r"c=1024.*c = 256"):
        dropped.t_prefill(100, 1024)
    kept = fit_latency(raw, FitOptions("quadratic", one_context="keep"))[0]
    assert any("not separately identified" in note for note in kept.diagnostics["prefill"]["notes"])


def test_interp_passes_through_the_medians_and_is_monotone():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [0, 256, 1024], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("interp"))[0]
    assert model.form == "interp"
    for n, c in ((8, 256), (512, 0), (1, 1024)):
        assert float(model.t_prefill(n, c).seconds) == pytest.approx(float(TRUE_PREFILL.evaluate(n, c)), rel=1e-12)
    n = np.exp(np.linspace(0, math.log(512), 200))
    for c in (0, 100, 256, 700, 1024):
        values = model.t_prefill(n, c).seconds
        assert np.all(np.diff(values) >= 0)
    c = np.linspace(0, 1024, 200)
    assert np.all(np.diff(model.t_prefill(np.full_like(c, 40.0), c).seconds) >= 0)
    assert float(model.t_step(256).seconds) == pytest.approx(float(TRUE_AR.evaluate(1, 256)), rel=1e-12)


def test_interp_raises_dips_to_keep_the_curve_monotone_and_lists_them():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0, repeats=1)
    dip = raw.with_columns(seconds=pl.when((pl.col("method") == "prefill") & (pl.col("n") == 16))
                           .then(pl.col("seconds") * 0.5).otherwise(pl.col("seconds")))
    model = fit_latency(dip, FitOptions("interp"))[0]
    assert float(model.t_prefill(16, 256).seconds) == pytest.approx(float(TRUE_PREFILL.evaluate(8, 256)))
    assert any("N=16" in note and "raised" in note for note in model.diagnostics["prefill"]["notes"])


def test_interp_holdout_error_is_small_on_a_power_law_and_reported_per_form():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], noise=0.0, repeats=1)
    table = holdout_table(summarize(raw), [4, 32, 256])
    assert set(table["form"]) == {"interp", "quadratic", "roofline"}
    interp = table.filter((pl.col("form") == "interp") & (pl.col("curve") == "prefill"))["holdout_max_rel_error"][0]
    quad = table.filter((pl.col("form") == "quadratic") & (pl.col("curve") == "prefill"))["holdout_max_rel_error"][0]
    assert quad < 1e-6 < interp < 0.1  # the truth is quadratic: v1 is exact, interp (gaps of 4x in N) close


def test_out_of_range_is_refused_unless_extrapolating():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("interp"))[0]
    with pytest.raises(ParamsError, match=r"N=2761.*N in \[1, 512\]"):
        model.t_prefill([100, 2761], 256)
    with pytest.raises(ParamsError, match=r"c=3000.*c in \[256, 1024\]"):
        model.t_prefill(100, 3000)
    result = model.t_prefill([0, 100, 1024, 2048], [256, 256, 256, 256], extrapolate=True)
    assert result.extrapolated.tolist() == [False, False, True, True]
    assert result.seconds[0] == 0.0  # a copy forwarding nothing costs nothing
    # the last log-log segment (256 -> 512) is extended
    t256, t512 = (float(TRUE_PREFILL.evaluate(n, 256)) for n in (256, 512))
    slope = math.log(t512 / t256) / math.log(2)
    assert result.seconds[2] == pytest.approx(t512 * 2 ** slope, rel=1e-9)
    assert result.seconds[3] == pytest.approx(t512 * 4 ** slope, rel=1e-9)


def test_one_context_interp_refuses_other_contexts_and_holds_them_when_extrapolating():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("interp"))[0]
    with pytest.raises(ParamsError, match="c=900"):
        model.t_prefill(64, 900)
    held = model.t_prefill(64, 900, extrapolate=True)
    assert bool(held.extrapolated) and float(held.seconds) == float(model.t_prefill(64, 256).seconds)


def test_roofline_parameters_are_recovered():
    truth = RooflinePrefill(p0=0.002, w=0.010, k1=2e-4, k2=1e-7)
    raw = raw_from(TRUE_AR, truth, [0, 256, 1024], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("roofline"))[0]
    n, c = np.array(NS * 2, dtype=float), np.array([100.0] * len(NS) + [800.0] * len(NS))
    assert np.max(np.abs(model.t_prefill(n, c).seconds / truth.evaluate(n, c) - 1)) < 0.05
    assert model.prefill.w == pytest.approx(truth.w, rel=0.05)


def test_each_kernel_repeat_gets_its_own_curve():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=3, noise=0.05)
    model = fit_latency(raw, FitOptions("interp"))[0]
    repeats = model.repeat_models()
    assert len(repeats) == 3
    for r, rep in enumerate(repeats):
        measured = raw.filter((pl.col("method") == "prefill") & (pl.col("n") == 32) & (pl.col("context") == 1024)
                              & (pl.col("repeat") == r))["seconds"][0]
        assert float(rep.t_prefill(32, 1024).seconds) >= measured - 1e-12  # equal, or raised to stay monotone
    values = sorted(float(rep.t_prefill(256, 256).seconds) for rep in repeats)
    assert values[0] < values[-1]  # noise: the repeats differ


def test_fit_options_are_validated():
    with pytest.raises(ParamsError, match="form"):
        FitOptions("spline").validate()
    with pytest.raises(ParamsError, match="one_context"):
        FitOptions("quadratic", one_context="guess").validate()
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=1).filter(
        ~((pl.col("context") == 1024) & (pl.col("n") == 8)))
    with pytest.raises(ParamsError, match="missing"):
        fit_latency(raw, FitOptions("interp"))
    summary = summarize(raw)
    with pytest.raises(ParamsError):
        fit_points(points(summary, "ar").head(2), points(summary, "prefill"), KEY, FitOptions("quadratic"))
