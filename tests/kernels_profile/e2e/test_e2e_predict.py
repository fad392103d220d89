"""kernels_profile.e2e.predict: the latency curve as a value (its JSON round trip, its AR points, the fit
form), the per-case prefill sizes, and the price of a measured forward log (the suite's one price,
analysis.rivals.pricing.price_log), which for AR and the ideal programs is the bounds' own cost
(analysis.bounds.case_cost) to the bit. Curves and logs are synthetic."""

import pytest

from fixtures import params_with

from analysis.bounds import SpanOp, case_cost, log_cost_settings
from analysis.errors import ParamsError
from analysis.latency.model import ModelKey
from kernels_profile.e2e import predict as e2e_predict
from analysis.rivals.forwards import Forwards
from analysis.rivals.pricing import price_log
from kernels_profile.e2e.predict import CurvePoint, LatencyCurve

KEY = ModelKey("tiny", "random", "float32", "cpu", "eager")
PRICE = log_cost_settings(params_with())  # the bounds' step pricing from params.yaml (bounds.steady_max_n)

# T_ar grows with N and with the context, T_prefill with N and context: every rule shows in a price
CURVE = LatencyCurve(
    prefill=tuple(CurvePoint(n, c, 0.01 + 0.001 * n + 0.00001 * c * n) for c in (8, 512) for n in (1, 4, 16, 64, 256)),
    ar=tuple(CurvePoint(n, c, 0.004 + 0.01 * n + 0.00002 * c * n) for c in (8, 512) for n in (1, 2, 4, 8, 16, 32)),
    contexts=(8, 512))


def test_the_curve_round_trips_through_its_json_and_a_bad_record_is_named():
    record = CURVE.to_json()
    assert set(record) == {"prefill", "ar", "contexts"} and record["ar"][0] == {"n": 1, "context": 8, "median": pytest.approx(0.01416)}
    assert LatencyCurve.from_json(record) == CURVE
    assert CURVE.ar_points() == [1, 2, 4, 8, 16, 32]
    with pytest.raises(ParamsError, match="latency curve record is malformed"):
        LatencyCurve.from_json({"prefill": [{"n": 1}], "ar": [], "contexts": []})


def test_the_fit_form_changes_the_prediction_and_a_bad_one_is_named():
    interp, quadratic = CURVE.model(KEY, "interp"), CURVE.model(KEY, "quadratic")
    assert float(interp.t_prefill(100, 16, extrapolate=True).seconds) != float(quadratic.t_prefill(100, 16, extrapolate=True).seconds)
    with pytest.raises(ParamsError, match="latency form must be one of"):
        CURVE.model(KEY, "cubic")


def test_ar_points_and_prefill_sizes():
    assert e2e_predict.ar_points((1, 4, 64), 10) == [1, 4, 10]
    assert e2e_predict.ar_points((2, 8), 8) == [2, 8]
    grid = (1, 4, 16, 64, 256, 1024)
    assert e2e_predict.prefill_sizes(grid, 65) == (1, 4, 16, 64, 256)  # a k = 64 verify forwards 65 tokens
    assert e2e_predict.prefill_sizes(grid, 16) == (1, 4, 16)
    assert e2e_predict.prefill_sizes(grid, 5000) == grid  # past the grid: every size, the rest is extrapolated


def ideal_log(ops: list[SpanOp]) -> tuple[list[int], list[int]]:
    """The executor's forward log of an ideal program: one prefill per copy, one step per gen token."""
    q, e = [], []
    for op in ops:
        if op.kind == "copy":
            q.append(op.n_tokens_src)
            e.append(op.n_tokens_src)
        else:
            q += [1] * op.n_tokens
            e += [1] * op.n_tokens
    return q, e


def price_forwards(model, cost, prompt_tokens, new_tokens, emitted):
    """The e2e stage's prediction of one logged run (kernels_profile.e2e.methods.predictions)."""
    return price_log(Forwards.from_log(new_tokens, emitted), prompt_tokens, model, cost)


OPS = [SpanOp("copy", 40, 40, 6), SpanOp("gen", 3, 0, 5), SpanOp("copy", 12, 12, 6), SpanOp("gen", 7, 0, 5)]


def test_the_forward_price_is_the_bounds_cost_for_ar_and_the_ideal_program():
    model = CURVE.model(KEY, "interp")
    assert (PRICE.context_mode, PRICE.extrapolate, PRICE.step_cost, PRICE.steady_max_n) == ("running", True, "steady", 8)
    bound = case_cost(OPS, model, PRICE, prompt_tokens=20)
    gold = sum(op.n_tokens for op in OPS)
    ar = price_forwards(model, PRICE, 20, [1] * gold, [1] * gold)
    assert ar.seconds == pytest.approx(bound.regen, rel=1e-12)
    program = price_forwards(model, PRICE, 20, *ideal_log(OPS))
    assert program.seconds == pytest.approx(bound.program_ideal, rel=1e-12)
    assert ar.extrapolated == 0 and program.extrapolated == 0
    # the first-step overhead is paid once per decode run: AR's one run costs less than 62 single steps
    first, steady = model.step_costs(20.0, PRICE.steady_max_n, extrapolate=True)
    assert float(first.seconds) > 0 and ar.seconds < gold * float(model.t_step(20.0).seconds)
    # bounds.step_cost first_step prices every step at T_ar(1, c): the log follows the bounds' setting
    v1 = log_cost_settings(params_with(**{"bounds.step_cost": "first_step"}))
    assert price_forwards(model, v1, 20, [1] * gold, [1] * gold).seconds == pytest.approx(
        sum(float(model.t_step(20.0 + j).seconds) for j in range(gold)), rel=1e-12)


def test_a_verify_forward_is_a_prefill_at_its_context_and_rejected_tokens_do_not_count():
    model = CURVE.model(KEY, "interp")
    # PLD: a 1 + 10-token verify accepting 4 (5 emitted), then a lone step, then a 1 + 3 verify accepting all
    priced = price_forwards(model, PRICE, 30, [11, 1, 4], [5, 1, 4])
    first, steady = model.step_costs(35.0, PRICE.steady_max_n, extrapolate=True)
    expected = (float(model.t_prefill(11, 30.0).seconds) + float(first.seconds + steady.seconds)
                + float(model.t_prefill(4, 36.0).seconds))
    assert priced.seconds == pytest.approx(expected)
    assert price_forwards(model, PRICE, 30, [], []).seconds == 0.0
    with pytest.raises(ParamsError, match="forward log"):
        price_forwards(model, PRICE, 30, [1, 2], [1])
    with pytest.raises(ParamsError, match="one-token forward"):
        price_forwards(model, PRICE, 30, [1, 1], [1, 2])


def test_forwards_outside_the_curve_are_counted():
    model = CURVE.model(KEY, "interp")
    assert price_forwards(model, PRICE, 600, [1, 1], [1, 1]).extrapolated == 2  # past the longest context
    assert price_forwards(model, PRICE, 20, [300], [300]).extrapolated == 1       # past the largest prefill
    assert CURVE.model(ModelKey("tiny", "random", "bfloat16", "cuda", "eager"), "interp").key.device == "cuda"
