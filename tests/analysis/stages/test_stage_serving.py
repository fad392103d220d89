"""`copydecode serving simulate`: bad settings are named at settings time; a run on a fixture forwards table and
step-cost document writes every method at every load point, the claims row and the replay's step sample."""

import json

import polars as pl
import pytest
from fixtures import forwards_frame, serving_params, step_cost_model

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


def test_a_run_writes_the_table_the_claims_row_and_the_replay_sample(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/rivals").mkdir(parents=True)
    forwards_frame(6).write_parquet(tmp_path / "data/rivals/forwards.parquet")
    (tmp_path / "reports/kernels").mkdir(parents=True)
    (tmp_path / "reports/kernels/step_cost.json").write_text(json.dumps(to_document([step_cost_model()])))
    result = serving.run(serving.settings(serving_params()))
    table = pl.read_csv(tmp_path / "reports/tables/serving.csv")
    closed = table.filter(pl.col("workload") == "closed")
    assert set(closed["method"]) == {"ar", "pld-earliest-k5", "copy-line-decoded", "copy-line-ideal", "pld-best"}
    assert closed.group_by("method").len()["len"].to_list() == [3] * 5  # every method at C = 1, 2, 8
    claim = pl.read_csv(tmp_path / "reports/tables/serving_claim.csv")
    assert claim["method"].to_list() == ["copy-line-decoded"] and claim["vs_ar_c1"][0] > 1
    metrics = json.loads((tmp_path / "reports/metrics/serving.json").read_text())
    assert metrics["claim"]["verdict"] == "beyond the paper" and metrics["cases"] == 6
    steps = pl.read_parquet(tmp_path / "data/serving/steps.parquet")
    assert steps.height == result["replay_steps"] and 0 < steps.height <= 4 * 2 * 2
    assert (steps["qs"].list.len() == steps["contexts"].list.len()).all()


def test_a_missing_step_cost_document_names_the_stage_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/rivals").mkdir(parents=True)
    forwards_frame(2).write_parquet(tmp_path / "data/rivals/forwards.parquet")
    with pytest.raises(ParamsError, match="kernels profile --batched"):
        serving.run(serving.settings(serving_params()))
