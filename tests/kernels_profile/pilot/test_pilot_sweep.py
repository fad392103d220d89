"""kernels_profile.pilot.sweep: a sweep job's CONFIG text, the metrics a records file belongs to, and freezing a
finished preset run with its run facts (read back by analysis.pilot.report)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from fixtures import PILOT_RUN, pilot_frozen_metrics, pilot_record

from analysis.errors import CorpusError, ParamsError
from analysis.pilot import report as pilotreport
from kernels_profile.pilot.sweep import KEYS, freeze, parse_config, run_metrics
from kernels_profile.stages import pilot as stage


def test_a_finished_preset_run_is_frozen_with_its_run_facts_and_read_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the frozen run is one output set inside the tree
    source = tmp_path / "data" / "pilot-long"
    source.mkdir(parents=True)
    with pytest.raises(CorpusError, match="has not finished"):
        freeze("pilot-long", PILOT_RUN, source, tmp_path / "frozen")
    (source / "metrics.json").write_text(json.dumps(pilot_frozen_metrics(384, 5, 1)))
    stage.records_frame([pilot_record()]).write_parquet(source / "records.parquet")
    pl.DataFrame({"mode": ["program"], "seed": [0], "step": [1], "loss": [1.0]}).write_parquet(source / "losses.parquet")
    stage.curve_frame([{"mode": "program", "seed": 0, "step": 0, "loss": 2.0}]).write_parquet(source / "curve.parquet")
    out = freeze("pilot-long", PILOT_RUN, source, tmp_path / "frozen")
    assert "abc1234" in (out / "README.md").read_text() and (out / "curve.csv").is_file()
    runs = pilotreport.read_frozen(tmp_path / "frozen")
    assert runs["pilot-long"]["run"] == PILOT_RUN and runs["pilot-long"]["metrics"]["heldout_em_after"] == {"0": 5}


def test_a_config_converts_each_setting_to_its_type_and_names_an_unknown_one():
    name, values = parse_config("fast:steps=8,lr=0.5,schedule=cosine,rank=4")
    assert name == "fast" and values == {"steps": 8, "lr": 0.5, "schedule": "cosine", "rank": 4}
    assert all(isinstance(values[k], KEYS[k]) for k in values)
    assert parse_config("plain") == ("plain", {})
    with pytest.raises(ParamsError, match="unknown setting 'depth'"):
        parse_config("a:steps=8,depth=3")
    with pytest.raises(ValueError):
        parse_config("a:steps=eight")


def test_the_metrics_of_a_preset_run_lie_beside_its_records(tmp_path):
    records = tmp_path / "records.parquet"
    assert run_metrics(records).name == "pilot.json"  # the default run's metrics
    (tmp_path / "metrics.json").write_text("{}")
    assert run_metrics(records) == tmp_path / "metrics.json"
