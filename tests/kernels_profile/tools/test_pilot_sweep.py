"""kernels_profile.tools.pilot_sweep: a sweep job's CONFIG text, the metrics a records file belongs to, and freezing a
finished preset run with its run facts (read back by analysis.pilot.report)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from fixtures import PILOT_RUN, pilot_frozen_metrics, pilot_record

from analysis.errors import CorpusError, ParamsError
from analysis.pilot import report as pilotreport
from kernels_profile.tools.pilot_sweep import KEYS, freeze, parse_config, run_metrics
from kernels_profile.pilot import jobs as pilot_jobs


def test_a_finished_preset_run_is_frozen_with_its_run_facts_and_read_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the frozen run is one output set inside the tree
    source = tmp_path / "data" / "pilot-long"
    source.mkdir(parents=True)
    with pytest.raises(CorpusError, match="has not finished"):
        freeze("pilot-long", PILOT_RUN, source, tmp_path / "frozen")
    (source / "metrics.json").write_text(json.dumps(pilot_frozen_metrics(384, 5, 1)))
    pilot_jobs.records_frame([pilot_record()]).write_parquet(source / "records.parquet")
    pl.DataFrame({"mode": ["program"], "seed": [0], "step": [1], "loss": [1.0]}).write_parquet(source / "losses.parquet")
    pilot_jobs.curve_frame([{"mode": "program", "seed": 0, "step": 0, "loss": 2.0}]).write_parquet(source / "curve.parquet")
    out = freeze("pilot-long", PILOT_RUN, source, tmp_path / "frozen")
    assert "abc1234" in (out / "README.md").read_text() and (out / "curve.csv").is_file()
    runs = pilotreport.read_frozen(tmp_path / "frozen")
    assert runs["pilot-long"]["run"] == PILOT_RUN and runs["pilot-long"]["metrics"]["heldout_em_after"] == {"0": 5}


def _finished_run(source, em: int) -> None:
    source.mkdir(parents=True, exist_ok=True)
    (source / "metrics.json").write_text(json.dumps(pilot_frozen_metrics(384, em, 1)))
    pilot_jobs.records_frame([pilot_record()]).write_parquet(source / "records.parquet")
    pl.DataFrame({"mode": ["program"], "seed": [0], "step": [1], "loss": [float(em)]}).write_parquet(
        source / "losses.parquet")
    pilot_jobs.curve_frame([{"mode": "program", "seed": 0, "step": 0, "loss": 2.0}]).write_parquet(source / "curve.parquet")


def _tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_freeze_replaces_the_frozen_files_as_one_set_or_not_at_all(tmp_path, monkeypatch):
    """L6: `pilot-sweep --freeze` wrote its six committed files one by one (copyfile, write_csv, write_text):
    a failure half way left a frozen run mixing two runs. Now a failure while writing the set (here the
    new run's curve.parquet is unreadable, after metrics, records and losses were written) leaves the
    previous frozen files byte for byte, with no temporary file or journal; a first freeze that fails leaves
    no folder (the pilot stage refuses a frozen folder without its files)."""
    monkeypatch.chdir(tmp_path)
    source, frozen = tmp_path / "data" / "pilot-long", tmp_path / "frozen"
    _finished_run(source, 5)
    before = _tree(freeze("pilot-long", PILOT_RUN, source, frozen))
    assert set(before) == {"metrics.json", "records.parquet", "losses.csv", "curve.csv", "run.json", "README.md"}
    _finished_run(source, 7)
    (source / "curve.parquet").write_bytes(b"not parquet")
    with pytest.raises(Exception):
        freeze("pilot-long", {**PILOT_RUN, "commit": "fff0000"}, source, frozen)
    assert _tree(frozen / "pilot-long") == before  # the previous set, whole
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temporary file, no journal left
    assert pilotreport.read_frozen(frozen)["pilot-long"]["metrics"]["heldout_em_after"] == {"0": 5}
    with pytest.raises(Exception):
        freeze("pilot-new", PILOT_RUN, source, frozen)  # a first freeze that fails half way
    assert sorted(p.name for p in frozen.iterdir()) == ["pilot-long"]  # no empty pilot-new/ folder
    _finished_run(source, 7)
    after = _tree(freeze("pilot-long", {**PILOT_RUN, "commit": "fff0000"}, source, frozen))
    assert all(after[name] != before[name] for name in ("metrics.json", "losses.csv", "run.json", "README.md"))
    assert pilotreport.read_frozen(frozen)["pilot-long"]["metrics"]["heldout_em_after"] == {"0": 7}


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
