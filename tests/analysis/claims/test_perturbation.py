"""Claim 6 (analysis.claims.perturbation) on small perturbation tables written here: the paper's three corpora
pooled, and a reason that says what the rate-1 figure cannot show."""

from __future__ import annotations

from fixtures import perturbation_rows

from analysis.claims import perturbation
from analysis.claims import verdict as v
from analysis.layout import METRICS, TABLES

SPEC = v.paper_claims()["perturbation"]
FAMILY = {"HEvalFix-Py": lambda r: 1 - 0.8 * r, "HEvalFix-JS": lambda r: 1 - r, "ProbeEdit-S": lambda r: 1 - r,
          "CommitEdits-click": lambda r: 1 - 0.5 * r}


def _claim(tmp_path, em_of, spec=SPEC):
    tables = tmp_path / TABLES
    tables.mkdir(parents=True, exist_ok=True)
    perturbation_rows(em_of).write_csv(tables / "perturbation.csv")
    return perturbation.perturb_claim(spec, tables, tmp_path / METRICS)


def test_claim_6_pools_the_papers_three_corpora_only(tmp_path):
    claim = _claim(tmp_path, FAMILY)
    expected = (164 * 0.2 + 164 * 0.0 + 154 * 0.0) / 482  # CommitEdits, the decl framing and the pooled row left out
    assert f"{100 * expected:.2f}%" in claim.ours and "482 cases" in claim.ours
    assert claim.scopes[0].cases == 482 and claim.scopes[0].paper_value == SPEC["em_pct"] / 100
    target = SPEC["em_pct"] / 100
    ems = {r: (164 * FAMILY["HEvalFix-Py"](r) + 318 * (1 - r)) / 482 for r in (0.5, 1.0)}
    crossing = 0.5 + (ems[0.5] - target) / (ems[0.5] - ems[1.0]) * 0.5
    assert f"strict at rate {crossing:.2f}-{crossing:.2f}" in claim.reason
    assert "clip" not in claim.reason  # no clip table written: not claimed


def test_underdetermined_says_what_it_cannot_show(tmp_path):
    claim = _claim(tmp_path, FAMILY)
    assert SPEC["paper_states_rate"] is False and claim.verdict == v.UNDERDETERMINED
    assert "whatever the mechanism, so it cannot test the paper's figure" in claim.reason
    assert "not evidence" in claim.reason and "strict at rate" not in claim.ours  # crossings are not `ours`
    stated = {**SPEC, "paper_states_rate": True}  # had the paper stated its rate, the same data would differ
    assert _claim(tmp_path, FAMILY, stated).verdict == v.DIFFERS


def test_claim_6_differs_when_no_measured_definition_reaches_the_papers_figure(tmp_path):
    claim = _claim(tmp_path, {k: (lambda r: 1 - 0.5 * r) for k in FAMILY})
    assert claim.verdict == v.DIFFERS and "strict never" in claim.reason


def test_claim_6_within_tolerance_is_reproduced(tmp_path):
    target = SPEC["em_pct"] / 100
    em_of = {k: (lambda r: 1 - (1 - target) * r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")}
    em_of["CommitEdits-click"] = lambda r: 1.0
    assert _claim(tmp_path, em_of).verdict == v.REPRODUCED
