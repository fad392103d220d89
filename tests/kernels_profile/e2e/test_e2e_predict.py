"""kernels_profile.e2e.predict: the AR points a curve keeps, the latency model fitted from a curve in the
params' form, the executor's segments as the bound's ops and the per-method predictions (AR and PLD get none;
the overhead variant costs the directive tokens). Curves and segments are synthetic."""

from types import SimpleNamespace

import pytest

from analysis.errors import ParamsError
from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e import predict as e2e_predict


def test_the_fit_form_changes_the_prediction_and_a_bad_one_is_named():
    curve = {"prefill": [{"n": n, "context": 16, "median": 0.01 + 0.001 * n} for n in (1, 4, 16, 64, 256)],
             "ar": [{"n": n, "context": 16, "median": 0.01 * n + 0.0001 * n * n} for n in (1, 2, 4, 8, 16, 32)]}
    interp = e2e_predict.curve_model(curve, "tiny", "interp")
    quadratic = e2e_predict.curve_model(curve, "tiny", "quadratic")
    assert float(interp.t_prefill(100, 16, extrapolate=True).seconds) != float(quadratic.t_prefill(100, 16, extrapolate=True).seconds)
    with pytest.raises(ParamsError, match="latency form must be one of"):
        e2e_predict.curve_model(curve, "tiny", "cubic")


CURVE = {"prefill": [{"n": n, "context": c, "median": 0.01 + 0.001 * n} for c in (8, 64) for n in (1, 4, 16, 64, 256)],
         "ar": [{"n": n, "context": c, "median": 0.01 * n} for c in (8, 64) for n in (1, 2, 4, 8, 16, 32)]}


def segment(kind, tokens, directive=0):
    return SimpleNamespace(kind=kind, ids=list(range(tokens)), directive_tokens=directive)


def test_ar_points_keep_the_grid_up_to_the_steps_and_the_steps_themselves():
    assert e2e_predict.ar_points((1, 4, 64), 10) == [1, 4, 10]
    assert e2e_predict.ar_points((2, 8), 8) == [2, 8]
    assert e2e_predict.curve_ar_points(CURVE) == [1, 2, 4, 8, 16, 32]


def test_span_ops_forward_a_copys_tokens_and_none_for_gen():
    ops = e2e_predict.span_ops([segment("copy", 5, 3), segment("gen", 2, 4)])
    assert [(o.kind, o.n_tokens, o.n_tokens_src, o.directive_tokens) for o in ops] == [("copy", 5, 5, 3), ("gen", 2, 0, 4)]


def test_method_predictions_cost_only_copy_as_decode_and_the_overhead_costs_more():
    model = e2e_predict.curve_model(CURVE, "tiny", "interp")
    segments = {"line": [segment("copy", 20, 6), segment("gen", 3, 5)], "token": [segment("copy", 22, 2), segment("gen", 1, 4)]}
    plan = e2e.MethodPlan((e2e.PldSettings(10, 3, "latest"),), ("line",))
    records = {r["method"]: r for r in e2e_predict.method_predictions(segments, model, 8, plan)}
    assert "ar" not in records and not any(m.startswith("pld_") for m in records)
    assert {"cad_line", "cad_token", "cad_line_overhead"} <= set(records)
    ideal, overhead = records["cad_line"], records["cad_line_overhead"]
    assert ideal["predicted_ar_seconds"] == overhead["predicted_ar_seconds"]
    assert overhead["predicted_seconds"] > ideal["predicted_seconds"]
    for r in records.values():
        assert r["predicted"] == pytest.approx(r["predicted_ar_seconds"] / r["predicted_seconds"])
    cost = e2e_predict.predicted_cost(segments["token"], model, 8)
    assert records["cad_token"]["predicted_seconds"] == cost.program_ideal
