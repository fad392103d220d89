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
