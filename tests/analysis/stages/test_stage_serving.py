"""`copydecode serving simulate`: bad settings are named at settings time; a run on a fixture forwards table and
step-cost document writes every method at every load point, the claims row and the replay's step sample."""

import json

import polars as pl
import pytest
from fixtures import forwards_frame, serving_cases, serving_params, step_cost_model

from analysis.errors import ParamsError
from analysis.latency.stepcost import to_document
from analysis.stages import serving


@pytest.mark.parametrize("changes, message", [
    ({"serving.slo.ttft_x": -1.0}, "ttft_x"),
    ({"serving.closed_loop.concurrency": [0, 1]}, r"concurrency.* must lie in \[1, inf\)"),
    ({"serving.methods": {"ar": "baseline", "copy-line-decoded": "copy"}}, "'serving.methods' must be list"),
    ({"serving.methods": ["ar", "copy-line"]}, "method 'copy-line' is not spelled copy-<line|token>-<decoded|jump|ideal>"),
    ({"serving.methods": ["ar", "pld-earliest-k5"]}, "names no Copy-as-Decode method"),
    ({"serving.methods": ["copy-line-decoded"]}, "exactly one baseline"),
    ({"serving.speculative": ["pld-earliest-k5"]}, "unknown setting 'serving.speculative'"),
    ({"serving.engine.max_num_batched_tokens": [4]}, "below one step's decode tokens"),
    ({"serving.headline_concurrency": [1, 64]}, "not in serving.closed_loop.concurrency"),
    ({"serving.replay.source": "h200/x/eager"}, "not one of serving.sources"),
    ({"serving.gain_threshold": 0.5}, "gain_threshold"),
    ({"serving.best_of": {"pld-best": ["copy-line-decoded"]}}, "must list rival methods"),
    ({"serving.methods": ["ar", "copy-line-decoded", "copy-pld-line-decoded-k64"]},
     "names copy-pld-line-decoded-k64, which the serving simulation cannot schedule"),
])
def test_bad_settings_are_named_errors(changes, message):
    with pytest.raises(ParamsError, match=message):
        serving.settings(serving_params(**changes))


def test_roles_and_speculative_come_from_the_vocabulary():
    """Review round 6, item 1: serving.methods names the methods, the vocabulary gives their roles and which
    verifies are atomic (never restated in params, so never out of step with the rivals stage)."""
    methods = serving.settings(serving_params()).methods
    assert methods.roles == {"ar": "baseline", "pld-earliest-k5": "rival", "copy-line-decoded": "copy",
                             "copy-line-ideal": "bound"}
    assert methods.atomic == frozenset({"pld-earliest-k5"})


def test_an_unknown_serving_key_is_named():
    params = serving_params()
    params["serving"]["workers"] = 4
    with pytest.raises(ParamsError, match="serving.workers"):
        serving.settings(params)


def stage_inputs(tmp_path, cases: int = 6):
    (tmp_path / "data/rivals").mkdir(parents=True)
    (tmp_path / "data/corpora").mkdir(parents=True)
    forwards = forwards_frame(cases)
    forwards.write_parquet(tmp_path / "data/rivals/forwards.parquet")
    serving_cases(forwards).write_parquet(tmp_path / "data/corpora/cases.parquet")


def test_a_run_writes_the_table_the_gains_table_and_the_replay_sample(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stage_inputs(tmp_path)
    (tmp_path / "reports/kernels").mkdir(parents=True)
    (tmp_path / "reports/kernels/step_cost.json").write_text(json.dumps(to_document([step_cost_model()])))
    result = serving.run(serving.settings(serving_params()))
    table = pl.read_csv(tmp_path / "reports/tables/serving.csv")
    closed = table.filter(pl.col("workload") == "closed")
    assert set(closed["method"]) == {"ar", "pld-earliest-k5", "copy-line-decoded", "copy-line-ideal", "pld-best"}
    assert closed.group_by("method").len()["len"].to_list() == [3] * 5  # every method at C = 1, 2, 8
    for cause in ("batch", "tokens", "context"):   # the extrapolated share split by cause
        assert closed[f"extrapolated_{cause}_share"].is_between(0, 1).all()
    assert closed["tokens_per_output"].min() >= 1 and closed["compute_bound"].dtype == pl.Boolean
    claim = pl.read_csv(tmp_path / "reports/tables/serving_claim.csv")
    assert claim["method"].to_list() == ["copy-line-decoded"] and claim["vs_ar_c1"][0] > 1
    assert claim["headline"].to_list() == [True] and claim["requests_c8"][0] > 0
    assert claim["vs_best_rival_c8_band_low"][0] <= claim["vs_best_rival_c8"][0] <= claim["vs_best_rival_c8_band_high"][0]
    metrics = json.loads((tmp_path / "reports/metrics/serving.json").read_text())
    assert "claim" not in metrics and metrics["cases"] == 6   # the stage writes figures, the claims stage words them
    assert metrics["prompt_tokens"]["numbered_added_tokens_mean"] > 0
    steps = pl.read_parquet(tmp_path / "data/serving/steps.parquet")
    assert steps.height == result["replay_steps"] and 0 < steps.height <= 5 * 2 * 2
    assert (steps["qs"].list.len() == steps["contexts"].list.len()).all()


def test_a_missing_step_cost_document_names_the_stage_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stage_inputs(tmp_path, 2)
    with pytest.raises(ParamsError, match="kernels profile --batched"):
        serving.run(serving.settings(serving_params()))


def test_the_h200_sources_lead_with_vllms_large_gpu_budget_and_the_cpu_with_the_small_one():
    """Audit M6: vLLM's API server defaults to max_num_batched_tokens 8,192 on a GPU of 70 GiB or more; the H200
    sources lead with it (2,048 beside), this CPU's source with 2,048."""
    from fixtures import params_with

    s = serving.settings(params_with())
    assert s.headline_budget("h200-devtime/qwen2.5-7b") == 8192 and s.headline_budget("h200/qwen2.5-7b/eager") == 8192
    assert s.headline_budget("batched") == 2048 and set(s.budgets) == {2048, 8192}
    with pytest.raises(ParamsError, match="must name budgets"):
        serving.settings(serving_params(**{"serving.engine.headline_budget": {"default": 4096}}))
    with pytest.raises(ParamsError, match="needs a 'default' budget"):
        serving.settings(serving_params(**{"serving.engine.headline_budget": {"h200": 64}}))


def test_the_replay_sample_draws_every_step_mix_at_every_concurrency_batched_steps_included():
    """Audit M4: the replay drew steps per method and concurrency, so 22 of 26 were batch 1 and no copy chunk or
    mixed step was timed. The sample is stratified by step mix and concurrency, pooled over the methods; a step
    past the context limit is counted, never drawn."""
    decode = ((1,), (300,), ("decode",), 0.01)
    kept = {("ar", 1): [decode] * 50,
            ("ar", 4): [((1, 1, 1, 1), (300, 310, 320, 330), ("decode",) * 4, 0.02)] * 50,
            ("copy-line-decoded", 4): [((1, 1, 40, 1), (300, 310, 320, 330), ("decode", "decode", "copy", "decode"), 0.03),
                                       ((12,), (400,), ("copy",), 0.02)] + [decode] * 40,
            ("pld-earliest-k5", 16): [((6,) * 16, (500,) * 16, ("verify",) * 16, 0.05),
                                      ((900,), (1000,), ("prefill",), 0.4)] + [((1,) * 16, (500,) * 16, ("decode",) * 16, 0.04)] * 60}
    sample = serving.ReplaySample("batched", (1, 4, 16), 1, 2048)
    rows, left_out = serving.replay_sample(kept, 2048, sample, 0)
    drawn = {(r["stratum"], r["concurrency"]) for r in rows}
    assert drawn == {("decode only", 1), ("decode only", 4), ("mixed", 4), ("copy chunk", 4), ("verify", 16),
                     ("prefill chunk", 16), ("decode only", 16)}
    assert sum(r["batch"] > 1 for r in rows) >= 3 and left_out == {}
    tight = serving.ReplaySample("batched", (1, 4, 16), 1, 1024)
    rows, left_out = serving.replay_sample(kept, 2048, tight, 0)
    assert left_out == {"prefill chunk/c16": 1} and ("prefill chunk", 16) not in {(r["stratum"], r["concurrency"]) for r in rows}


def test_a_run_of_the_batched_source_alone_keeps_the_h200_headline_budgets_unchecked():
    """Only the simulated sources' headline budgets must be among this run's budgets: a run of the batched source
    at 2,048 alone (the reliability and probe tests' small run) was refused for the H200 entries' 8,192."""
    from fixtures import params_with

    s = serving.settings(params_with(**{"serving.sources": ["batched"], "serving.engine.max_num_batched_tokens": [2048],
                                        "serving.replay.source": "batched"}))
    assert s.headline_budget("batched") == 2048 and s.budgets == (2048,)
    with pytest.raises(ParamsError, match="must name budgets"):
        serving.settings(params_with(**{"serving.sources": ["batched"], "serving.engine.max_num_batched_tokens": [4096],
                                        "serving.replay.source": "batched"}))
