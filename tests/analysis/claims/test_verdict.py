"""analysis.claims.verdict: the comparators a claim names, metric paths, the scope verdict rule and the tally.
Small inputs written here; expected values from the inputs or from paper_claims.json, never from a run."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis.claims import verdict as v
from analysis.errors import MissingOutputError, ParamsError
from analysis.layout import METRICS, TABLES

PAPER = v.paper_claims()


def test_an_unknown_comparator_is_a_named_error(tmp_path):
    doc = json.loads(v.PAPER.read_text())
    doc["copy_ceiling"]["comparator"] = "roughly"
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match="copy_ceiling.*roughly"):
        v.paper_claims(path)


def test_every_comparator_the_json_declares_is_implemented_and_dispatched():
    declared = {spec["comparator"] for key, spec in PAPER.items() if not key.startswith("_")}
    assert declared <= set(v.COMPARATORS)
    spec = {"comparator": "ends_within_factor", "rel_tolerance": 0.25}
    assert v.judge(spec, (8.0, 300.0), (6.8, 303.0)) and not v.judge(spec, (9.0, 300.0), (6.8, 303.0))
    assert v.judge({**spec, "comparator": "ends_within_pp", "tolerance_pp": 3}, (0.76, 0.96), (0.74, 0.98))
    assert not v.judge({**spec, "comparator": "ends_within_pp", "tolerance_pp": 1}, (0.76, 0.96), (0.74, 0.98))
    assert v.judge({**spec, "comparator": "inside_widened_ci", "rel_tolerance": 0.15}, (3.0, 3.9), 4.4)
    assert not v.judge({**spec, "comparator": "inside_widened_ci", "rel_tolerance": 0.1}, (3.0, 3.9), 4.4)
    ranged = {"comparator": "range_inside", "tolerance_pp": 3.0, "rel_tolerance": 0.25}
    assert v.judge(ranged, (0.9, 1.0), (0.91, 0.99), tolerance="tolerance_pp")
    assert not v.judge(ranged, (0.87, 1.0), (0.91, 0.99), tolerance="tolerance_pp")
    assert v.judge(ranged, (3.7, 8.0), (4.5, 6.5), tolerance="rel_tolerance")
    assert not v.judge(ranged, (3.5, 8.0), (4.5, 6.5), tolerance="rel_tolerance")
    assert v.judge({"comparator": "at_most"}, 0, 0) and not v.judge({"comparator": "at_most"}, 1, 0)
    assert v.judge({"comparator": "each_within_pp", "tolerance_pp": 2}, [0.15, 0.16], 0.1548)
    assert not v.judge({"comparator": "each_within_pp", "tolerance_pp": 2}, [0.15, 0.20], 0.1548)
    assert v.judge({"comparator": "lift_at_least", "tolerance_pp": 2}, 0.10, 0.12)
    assert not v.judge({"comparator": "lift_at_least", "tolerance_pp": 2}, 0.09, 0.12)
    with pytest.raises(ParamsError, match="extension"):
        v.judge({"comparator": "none"}, 1, 1)
    with pytest.raises(ParamsError, match="roughly"):
        v.judge({"comparator": "roughly", "title": "t"}, 1, 1)


def _scope(verdict: str, name: str = "s") -> v.Scope:
    return v.Scope(name, "1.0x", "1.0x", verdict, "why")


@pytest.mark.parametrize("verdicts, expected", [
    ((v.REPRODUCED, v.REPRODUCED), v.REPRODUCED),
    ((v.REPRODUCED, v.DIFFERS), v.DIFFERS),
    ((v.REPRODUCED, v.NOT_COMPARABLE), v.REPRODUCED),           # a not-comparable scope never turns a verdict
    ((v.NOT_COMPARABLE, v.DIFFERS), v.DIFFERS),
    ((v.NOT_COMPARABLE, v.NOT_COMPARABLE), v.NOT_COMPARABLE),   # nothing judged like with like
    ((), v.NOT_COMPARABLE),
])
def test_only_judged_scopes_decide_a_claims_verdict(verdicts, expected):
    assert v.claim_verdict([_scope(x) for x in verdicts]) == expected


def test_the_tally_counts_judged_scopes_only_and_names_the_others():
    scopes = [_scope(v.REPRODUCED, "Py"), _scope(v.DIFFERS, "JS"), _scope(v.NOT_COMPARABLE, "ProbeEdit-S*")]
    assert v.tally(scopes) == "1 of 2 judged reproduced; not comparable: ProbeEdit-S*"
    assert v.tally([_scope(v.NOT_COMPARABLE, "a")]) == "nothing judged; not comparable: a"
    assert [s.judged for s in scopes] == [True, True, False]


def test_counts_cover_every_verdict_but_the_extensions():
    items = [v.Claim("c", "p", "o", verdict, "r", "m") for verdict in (v.REPRODUCED, v.NOT_COMPARABLE, v.BEYOND)]
    counts = v.counts(items)
    assert v.BEYOND not in counts and set(counts) == set(v.VERDICTS) - {v.BEYOND}
    assert counts[v.REPRODUCED] == counts[v.NOT_COMPARABLE] == 1 and counts[v.DIFFERS] == 0


def test_every_metric_path_parses_and_a_bad_one_is_named(tmp_path):
    for key, spec in PAPER.items():
        if not key.startswith("_"):
            assert v.metric_paths(spec), key
    with pytest.raises(ParamsError, match="not 'tables"):
        v.metric_paths({"title": "t", "metric": ["tables/coverage:coverage"]})
    tables = tmp_path / TABLES
    tables.mkdir(parents=True)
    pl.DataFrame({"coverage": [0.5]}).write_csv(tables / "coverage.csv")
    mp = v.metric_paths({"metric": "tables/coverage.csv:share"})[0]
    with pytest.raises(MissingOutputError, match="column 'share'"):
        v.read_metric(mp, tables, tmp_path / METRICS)
    with pytest.raises(MissingOutputError, match="roundtrip.json not found"):
        v.read_metric(v.metric_paths({"metric": "metrics/roundtrip.json:failed"})[0], tables, tmp_path / METRICS)


def test_the_papers_gpu_datasheet_has_one_home_and_a_device_name_finds_its_sheet():
    gpu = v.paper_gpu()
    sheet = json.loads(v.DEVICES.read_text())[PAPER["_gpu_reference"]["datasheet_entry"]]
    assert (gpu["hbm_gbps"], gpu["bf16_tflops"]) == (sheet["hbm_gbps"], sheet["bf16_tflops"])
    assert "hbm_gbps" not in PAPER["_gpu_reference"] and "bf16_tflops" not in PAPER["_gpu_reference"]
    assert v.datasheet("NVIDIA H200")["name"] == "NVIDIA H200"
    assert v.datasheet("NVIDIA A100-SXM4-80GB")["match"] == gpu["match"]
    assert v.datasheet("AMD EPYC 7763") is None
