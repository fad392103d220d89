"""Claim 2 (analysis.claims.ceiling): each end of the coverage range within tolerance_pp points and its generated
share (1 - coverage) within a factor; an end from the stand-in is not comparable."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.claims import ceiling
from analysis.claims import verdict as v
from analysis.layout import METRICS, TABLES

SPEC = v.paper_claims()["copy_ceiling"]


def _claim(tmp_path, py: float, probe: float, spec=SPEC):
    tables = tmp_path / TABLES
    tables.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"level": ["line"] * 3, "corpus": ["HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S"],
                  "framing": ["body", "body", "unit"], "coverage": [py, (py + probe) / 2, probe],
                  "ci_low": [0.1] * 3, "ci_high": [0.99] * 3, "n_cases": [164, 164, 154]}).write_csv(tables / "coverage.csv")
    return ceiling.ceiling_claim(spec, tables, tmp_path / METRICS)


def test_the_low_end_is_judged_and_the_stand_in_end_is_not_comparable(tmp_path):
    claim = _claim(tmp_path, SPEC["low"] + 0.003, SPEC["high"] + 0.007)
    low, high = claim.scopes
    assert low.scope == "low end (HEvalFix-Py)" and low.verdict == v.REPRODUCED
    assert high.scope == "high end (ProbeEdit-S*)" and high.verdict == v.NOT_COMPARABLE
    assert "outside a factor" in high.reason  # 1.3% generated against 2.0%: what a 3 pp window hides
    assert claim.verdict == v.REPRODUCED


def test_the_generated_share_turns_an_end_the_percentage_points_would_pass(tmp_path):
    """74% +- 3 pp admits 71.5%; its generated share 28.5% against 26% is 1.10x, inside 1.25. A tighter share
    tolerance turns it: the second test has its own say."""
    claim = _claim(tmp_path, SPEC["low"] - 0.025, SPEC["high"])
    assert claim.scopes[0].verdict == v.REPRODUCED
    tight = {**SPEC, "share_rel_tolerance": 0.05}
    claim = _claim(tmp_path, SPEC["low"] - 0.025, SPEC["high"], tight)
    assert claim.scopes[0].verdict == v.DIFFERS and claim.verdict == v.DIFFERS
    assert "within 3 pp" in claim.scopes[0].reason and "outside a factor 1.05" in claim.scopes[0].reason


@pytest.mark.parametrize("tolerance, verdict", [(3.0, v.REPRODUCED), (1.0, v.DIFFERS)])
def test_the_claims_own_tolerance_decides(tmp_path, tolerance, verdict):
    assert _claim(tmp_path, SPEC["low"] + 0.02, SPEC["high"], {**SPEC, "tolerance_pp": tolerance}).verdict == verdict
