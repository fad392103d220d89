"""One price: a method's forwards priced by analysis.rivals.pricing give the Copy-as-Decode bounds' own figures
(analysis.bounds.case_costs) for AR (regen) and for the copy programs' ideal and directive-decoded forms,
under a measured H200 CUDA-graph model (a real first-step overhead), both step pricings and both context
modes; and a verify or jump forward is priced as a prefill of its q tokens."""

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from analysis.bounds import CostSettings, case_costs
from analysis.coverage.spans import SpanRow
from analysis.latency.sources import load_fitted_models, select_measured
from analysis.rivals.forced import OpForcing
from analysis.rivals.families.copy import copy_forwards
from analysis.rivals.forwards import decode_forwards
from analysis.rivals.pricing import price
from fixtures import ROOT

RUNNING = CostSettings(context_mode="running", extrapolate=True, context=256, step_cost="steady", steady_max_n=8,
                       prefill_past_n="marginal")


@pytest.fixture(scope="module")
def graph_model():
    models = load_fitted_models(ROOT / "reports/kernels/latency_model.json")
    return select_measured(models, "h200/qwen2.5-1.5b/static_compiled", "interp")


def random_program(rng, case: int) -> list[SpanRow]:
    ops, kind = [], rng.choice(["copy", "gen"])
    for i in range(int(rng.integers(1, 9))):
        n = int(rng.integers(1, 400)) if kind == "copy" else int(rng.integers(0, 30))
        ops.append(SpanRow(i, kind, n, n + int(rng.integers(0, 2)) if kind == "copy" else 0, 1,
                           int(rng.integers(4, 12))))
        kind = "gen" if kind == "copy" else "copy"
    return ops


def frames(n_cases: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    spans, forwards = [], []
    for case in range(n_cases):
        ops, prompt = random_program(rng, case), int(rng.integers(50, 3000))
        for op in ops:
            spans.append({"case_id": f"c{case}", "corpus": "x", "framing": "body", "level": "line",
                          "op_index": op.op_index, "kind": op.kind, "n_tokens": op.n_tokens,
                          "n_tokens_src": op.n_tokens_src, "directive_tokens": op.directive_tokens,
                          "prompt_tokens": prompt})
        gold = sum(op.n_tokens for op in ops)
        none = [OpForcing(())] * len(ops)
        for method, f in (("ar", decode_forwards(gold)), ("ideal", copy_forwards(ops, none, "ideal")),
                          ("decoded", copy_forwards(ops, none, "decoded"))):
            forwards.append({"case_id": f"c{case}", "method": method, "prompt_tokens": prompt,
                             "new_tokens": f.new_tokens, "emitted": f.emitted, "prefill": f.prefill})
    return pl.DataFrame(spans), pl.DataFrame(forwards)


@pytest.mark.parametrize("settings", [RUNNING, replace(RUNNING, step_cost="first_step"),
                                      replace(RUNNING, context_mode="fixed", context=1024)])
def test_forwards_price_to_the_bounds_figures(graph_model, settings):
    spans, forwards = frames()
    bounds = case_costs(spans, graph_model, settings).sort("case_id")
    priced = price(forwards, graph_model, settings)
    by = {m: priced.filter(pl.col("method") == m).sort("case_id")["seconds"].to_numpy() for m in ("ar", "ideal", "decoded")}
    np.testing.assert_allclose(by["ar"], bounds["regen"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(by["ideal"], bounds["program_ideal"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(by["decoded"], bounds["program_overhead"].to_numpy(), rtol=1e-12)


def test_a_verify_is_a_prefill_and_the_next_decode_starts_a_run(graph_model):
    frame = pl.DataFrame({"prompt_tokens": [300], "new_tokens": [[1, 5, 1]], "emitted": [[1, 3, 1]],
                          "prefill": [[False, True, False]]})
    seconds = price(frame, graph_model, RUNNING)["seconds"][0]
    first, step = graph_model.step_costs(np.array([300.0, 304.0]), RUNNING.steady_max_n, extrapolate=True)
    verify = graph_model.t_prefill(5, 301, extrapolate=True).seconds
    expected = first.seconds[0] + step.seconds[0] + verify + first.seconds[1] + step.seconds[1]
    assert seconds == pytest.approx(float(expected), rel=1e-12)
    assert first.seconds[0] > 0  # the CUDA-graph loop's first step costs more: the run rule matters here


def test_a_prefill_past_the_profiled_n_is_never_under_the_marginal_cost_or_the_compute_floor():
    """Audit H2: the judged source (H200 device time, 7B, profiled at N = 8, 64, 512) priced a 4,096-token prefill
    at 29.6 ms along its last log-log segment (N^0.35), under the H200's own compute floor (57.9 ms), where the
    serving stage priced the same source at 109.5 ms. Under params' rule (bounds.prefill_past_n, marginal) a verify or
    copy past N = 512 costs at least the last segment continued at its marginal cost per token and at least the
    floor; the rivals table's split says it lies past the profiled N."""
    from fixtures import params_with

    from analysis.bounds import cost_settings
    from analysis.latency.roofline import BYTES_PER_PARAM, decoder_weights, device_roof, prefill_floor_s, read_devices
    from kernels_profile.runtime.models import published_config

    model = select_measured(load_fitted_models(ROOT / "reports/kernels/latency_model.json"), "h200-devtime/qwen2.5-7b",
                            "interp")
    settings = cost_settings(params_with())
    assert settings.prefill_past_n == "marginal"
    priced = price(pl.DataFrame({"prompt_tokens": [256], "new_tokens": [[4096]], "emitted": [[4096]], "prefill": [[True]]}),
                   model, settings).row(0, named=True)
    at = lambda n: float(model.t_prefill(n, 256).seconds)  # noqa: E731  (inside the profiled range)
    marginal = at(512) + (4096 - 512) * (at(512) - at(64)) / (512 - 64)
    floor = float(prefill_floor_s(decoder_weights(published_config("qwen2.5-7b")), 4096,
                                  device_roof("NVIDIA H200", read_devices()), BYTES_PER_PARAM["bfloat16"], 256))
    assert priced["seconds"] >= marginal * (1 - 1e-12) and priced["seconds"] >= floor * (1 - 1e-12)
    assert priced["seconds"] == pytest.approx(max(marginal, floor), rel=1e-12)
    assert floor > 0.05 and priced["seconds"] > 2 * 0.0296  # well above the log-log price it replaced
    assert (priced["extrapolated_forwards"], priced["extrapolated_n_forwards"]) == (1, 1)
