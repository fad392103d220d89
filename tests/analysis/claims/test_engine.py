"""analysis.claims.engine: the registry lookup, claims(), the verdict table and reports/claims.json; and the
verdicts on a private copy of the committed stage outputs (a change to an output turns its verdict)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from fixtures import ROOT

from analysis.claims import engine
from analysis.claims import verdict as v
from analysis.claims.registry import RULES, register
from analysis.errors import ParamsError
from analysis.layout import CLAIMS_JSON, METRICS, TABLES
from analysis.tools.depgraph import closure

PAPER = v.paper_claims()
CLAIMS_DIR = ROOT / "analysis" / "claims"
KEYS = [k for k in PAPER if not k.startswith("_")]


# ---------------------------------------------------------------- the registry: one rule module per claim


def test_every_claim_has_a_registered_rule_and_every_rule_a_claim():
    assert set(KEYS) == set(RULES)
    assert {RULES[k].__module__ for k in KEYS} <= {f"analysis.claims.{m}" for m in engine.rule_modules()}


def test_a_key_registered_twice_is_a_named_error():
    with pytest.raises(ParamsError, match="registered twice"):
        register("bounds")(lambda spec, tables, metrics_dir: None)


def test_a_claim_without_a_rule_is_a_named_error(tmp_path):
    doc = json.loads(v.PAPER.read_text())
    doc["new_claim"] = {**doc["losslessness"], "title": "new"}
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match="no rule for claim.*new_claim"):
        engine.claims(tmp_path / TABLES, tmp_path / METRICS, path)


def test_the_engine_discovers_its_rule_modules_and_depgraph_follows_it():
    modules = {p.stem for p in CLAIMS_DIR.glob("*.py")} - {"__init__", *engine.NOT_RULES}
    assert set(engine.rule_modules()) == modules
    reached = closure("analysis.claims.engine", ROOT)
    assert {f"analysis/claims/{m}.py" for m in modules} <= set(reached)  # dvc.yaml's code deps see every rule


def test_no_claims_module_is_long_and_the_recipe_is_written_down():
    lengths = {p.name: len(p.read_text().splitlines()) for p in CLAIMS_DIR.glob("*.py")}
    assert max(lengths.values()) <= 300, lengths
    doc = engine.__doc__
    assert "A new claim is one rule module and one JSON entry" in doc and '@register("<key>")' in doc
    assert "A new claim is one rule module and one JSON entry" in (ROOT / "docs" / "layout.md").read_text()
    assert (CLAIMS_DIR / "__init__.py").read_text().strip() == ""


def test_every_claim_names_a_report_section():
    for key in KEYS:
        page, _, anchor = PAPER[key]["section"].partition("#")
        assert (ROOT / "notebooks" / f"{page}.ipynb").is_file() and anchor, key


# ---------------------------------------------------------------- claims(): not run, not applicable, inputs


def test_no_outputs_gives_every_claim_not_run_none_dropped(tmp_path):
    items = engine.claims(tmp_path / TABLES, tmp_path / METRICS)
    frame = engine.claims_frame(items)
    assert frame.columns == list(v.TEXT_FIELDS) and frame.height == len(KEYS)
    assert set(frame["verdict"]) == {v.NOT_RUN}
    assert [c.key for c in items if not PAPER[c.key].get("extension")] == [k for k in KEYS
                                                                             if not PAPER[k].get("extension")]


def test_a_not_run_reason_names_the_command_to_run_where_the_run_is(tmp_path, monkeypatch):
    """UX review P11: a one-off run's index quoted internals ("claim metric tables/kernel_speedup.csv:speedup") and
    advised `dvc repro`, which a run folder has no use for. The reason names the missing file and the command that
    writes it: with --out in a run folder (no dvc.yaml), plain in the workspace."""
    from fixtures import ROOT

    monkeypatch.chdir(tmp_path)
    items = {c.key: c for c in engine.claims(tmp_path / TABLES, tmp_path / METRICS)}
    reason = items["kernel_speedup"].reason
    assert reason == ("not run in this run: it has no kernel_speedup.csv or kernels.json; `copydecode --out DIR kernels "
                      "fit` writes them (after the stages it reads)")
    assert "claim metric" not in reason and "dvc repro" not in reason
    monkeypatch.chdir(ROOT)
    items = {c.key: c for c in engine.claims(tmp_path / TABLES, tmp_path / METRICS)}
    assert items["losslessness"].reason == ("not run in this run: it has no roundtrip.json; `copydecode roundtrip` "
                                            "writes it (`dvc repro` runs every stage)")


def test_an_absent_output_is_not_run_but_a_params_error_is_not_swallowed(tmp_path, monkeypatch):
    items = {c.key: c for c in engine.claims(tmp_path / TABLES, tmp_path / METRICS)}
    assert items["losslessness"].verdict == v.NOT_RUN and "roundtrip.json" in items["losslessness"].reason

    def broken(spec, tables, metrics_dir):
        raise ParamsError("a wrong parameter, not a missing output")

    (tmp_path / METRICS).mkdir(parents=True)
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"failed": 0, "passed": 1, "programs": 1}))
    monkeypatch.setitem(RULES, "losslessness", broken)
    with pytest.raises(ParamsError, match="wrong parameter"):
        engine.claims(tmp_path / TABLES, tmp_path / METRICS)


def _users_pairs_run(tmp_path) -> Path:
    tables = tmp_path / TABLES
    tables.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"level": ["line", "line"], "corpus": ["Pairs-a", "pooled"], "framing": ["pair", "pair"],
                  "coverage": [0.5, 0.5], "ci_low": [0.4, 0.4], "ci_high": [0.6, 0.6], "n_cases": [2, 2]}
                 ).write_csv(tables / "coverage.csv")
    return tables


def test_claims_over_the_papers_corpora_are_not_applicable_to_a_run_without_them(tmp_path):
    tables = _users_pairs_run(tmp_path)
    (tmp_path / METRICS).mkdir(parents=True, exist_ok=True)
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"programs": 42, "passed": 42, "failed": 0}))
    items = engine.claims(tables, tmp_path / METRICS)
    judged_on_paper = {k for k in KEYS if engine.needs_paper_corpora(PAPER[k])}
    assert judged_on_paper and "losslessness" not in judged_on_paper  # C10: judged on the run's own programs
    assert {c.key for c in items if c.verdict == v.NOT_APPLICABLE} == judged_on_paper
    assert all("Pairs-a" in c.reason for c in items if c.verdict == v.NOT_APPLICABLE)


def test_the_round_trip_claim_is_judged_on_a_run_of_the_users_programs(tmp_path):
    """C10 (issue 41): losslessness is a property of the oracle and the resolver on any corpus, so a one-off
    run's claim 5 is judged on that run's own programs (42/42 here), never on the paper's 482."""
    tables = _users_pairs_run(tmp_path)
    (tmp_path / METRICS).mkdir(parents=True, exist_ok=True)
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"programs": 42, "passed": 42, "failed": 0}))
    lossless = {c.key: c for c in engine.claims(tables, tmp_path / METRICS)}["losslessness"]
    assert lossless.verdict == v.REPRODUCED and lossless.ours.startswith("42/42 programs") and "482" not in lossless.ours
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"programs": 42, "passed": 41, "failed": 1}))
    assert {c.key: c for c in engine.claims(tables, tmp_path / METRICS)}["losslessness"].verdict == v.DIFFERS


def test_each_claim_carries_its_rule_inputs_and_section(tmp_path):
    for item in engine.claims(tmp_path / TABLES, tmp_path / METRICS):
        spec = PAPER[item.key]
        assert item.rule == spec["rule"] and item.section == spec["section"]
        assert all(path.startswith("reports/") for path in item.inputs)
        assert {f"reports/{m.split(':')[0]}" for m in spec["metric"]} <= set(item.inputs)


# ---------------------------------------------------------------- reports/claims.json


@pytest.fixture
def outputs(tmp_path):
    """A private copy of the committed stage outputs that a test may edit."""
    for folder in (TABLES, METRICS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copytree(ROOT / "reports" / "e2e", tmp_path / "reports" / "e2e")
    return tmp_path


def test_the_claims_document_round_trips_and_names_every_scope(outputs):
    items = engine.claims(outputs / TABLES, outputs / METRICS)
    doc = engine.claims_document(items)
    path = outputs / CLAIMS_JSON
    path.write_text(json.dumps(doc))
    assert engine.read_claims(path) == items
    assert doc["counts"] == v.counts(items) and set(doc["verdicts"]) == set(v.VERDICTS)
    for claim in doc["claims"]:
        assert {"claim", "paper", "ours", "verdict", "reason", "rule", "inputs", "section", "scopes"} <= set(claim)
        for scope in claim["scopes"]:
            assert {"scope", "paper", "paper_value", "ours", "value", "ci", "cases", "verdict", "reason"} <= set(scope)
    with pytest.raises(ParamsError, match="not found"):
        engine.read_claims(outputs / "absent.json")
    path.write_text("{}")
    with pytest.raises(ParamsError, match="not a claims document"):
        engine.read_claims(path)


def test_the_committed_claims_document_is_the_committed_outputs_verdicts(tmp_path):
    """The committed claims.json is the verdicts of the committed outputs (read from git, not the workspace: a
    user's own `dvc repro` rewrites the workspace's kernel tables with that machine's timings)."""
    from committed import committed_outputs

    outputs = committed_outputs(tmp_path, ROOT)
    committed = outputs / CLAIMS_JSON
    if not committed.is_file():
        pytest.skip(f"no committed {CLAIMS_JSON} (written by the reports stage)")
    fresh = engine.claims_document(engine.claims(outputs / TABLES, outputs / METRICS))
    # a "not run" reason names the absent file under the root it was judged in: the copy's, here
    fresh = json.loads(json.dumps(fresh).replace(f"{outputs}/", ""))
    document = json.loads(committed.read_text())
    document.pop("provenance", None)  # the run's commit, date and machine: not a verdict
    assert document == fresh


def test_every_committed_scope_is_a_number_with_an_interval_and_the_run_is_named(tmp_path):
    """M1 of the UX review: no scope of the committed claims.json has a null `value` or `ci` (the head-to-head and
    serving scopes were null), every decision scope has a decision word and a basis, and the file carries a
    provenance block (commit, params hash, versions, date, machine) as lm-eval's results JSON does."""
    from analysis.claims.decision import BASES, DECISIONS
    from committed import committed_outputs

    committed = committed_outputs(tmp_path, ROOT) / CLAIMS_JSON
    if not committed.is_file():
        pytest.skip(f"no committed {CLAIMS_JSON} (written by the reports stage)")
    document = json.loads(committed.read_text())
    nulls = [(c["key"], s["scope"]) for c in document["claims"] for s in c["scopes"]
             if s["value"] is None or s["ci"] is None]
    assert nulls == []
    decided = [s for c in document["claims"] for s in c["scopes"] if s.get("decision") is not None]
    keys = {c["key"] for c in document["claims"] if any(s.get("decision") for s in c["scopes"])}
    assert keys >= {"rivals", "batched_serving"}
    assert all(s["decision"] in DECISIONS and s["basis"] in BASES and s["ci"][0] <= s["ci"][1] for s in decided)
    prov = document["provenance"]
    assert {"git_hash", "date", "machine", "params_sha256", "versions", "python"} <= set(prov)
    assert len(prov["params_sha256"]) == 64 and prov["versions"]["polars"]


def _by_key(root, paper=v.PAPER):
    return {c.key: c for c in engine.claims(root / TABLES, root / METRICS, paper)}


def test_every_claim_of_the_paper_gets_a_verdict_on_the_committed_outputs():
    items = engine.claims(ROOT / TABLES, ROOT / METRICS)
    assert {c.verdict for c in items} <= set(v.VERDICTS)
    assert all(c.verdict in (v.BEYOND, v.NOT_RUN) for c in items if PAPER[c.key].get("extension"))
    assert all(c.verdict != v.BEYOND for c in items if not PAPER[c.key].get("extension"))
    assert all(c.reason for c in items)


def test_a_round_trip_failure_turns_the_verdict(outputs):
    assert _by_key(outputs)["losslessness"].verdict == v.REPRODUCED
    rt = json.loads((outputs / METRICS / "roundtrip.json").read_text())
    rt["failed"], rt["passed"] = 3, rt["passed"] - 3
    (outputs / METRICS / "roundtrip.json").write_text(json.dumps(rt))
    claim = _by_key(outputs)["losslessness"]
    assert claim.verdict == v.DIFFERS and "3 programs" in claim.reason


def test_the_threshold_in_paper_claims_decides_the_verdict(outputs, tmp_path):
    paper = v.paper_claims()
    cov = pl.read_csv(outputs / TABLES / "coverage.csv")
    py = cov.filter((pl.col("level") == "line") & (pl.col("framing") == "body") & (pl.col("corpus") == "HEvalFix-Py"))
    gap_pp = 100 * abs(py["coverage"][0] - paper["copy_ceiling"]["low"])
    for tolerance, verdict in ((gap_pp + 0.5, v.REPRODUCED), (gap_pp / 2, v.DIFFERS)):
        paper["copy_ceiling"]["tolerance_pp"] = tolerance
        path = tmp_path / f"claims_{verdict.replace(' ', '_')}.json"
        path.write_text(json.dumps(paper))
        assert _by_key(outputs, path)["copy_ceiling"].verdict == verdict


def test_a_missing_stage_output_is_not_run_not_dropped(outputs):
    (outputs / TABLES / "perturbation.csv").unlink()
    items = engine.claims(outputs / TABLES, outputs / METRICS)
    missing = [c for c in items if c.verdict == v.NOT_RUN and "perturbation.csv" in c.reason]
    assert len(missing) == 1 and len(items) == len(KEYS)
