"""The batched-serving extension (analysis.claims.serving): the serving stage's own row read back as decision scopes,
one per kernel source and headline concurrency at the smallest budget, Copy-as-Decode's best variant there against
the best rival there with its paired interval; no verdict against the paper."""

from __future__ import annotations

import json

import polars as pl

from analysis.claims import decision as d
from analysis.claims import serving
from analysis.claims import verdict as v
from analysis.layout import METRICS, TABLES
from analysis.latency.stepcost import EXTRAPOLATED, MEASURED

SPEC = v.paper_claims()["batched_serving"]


def _row(source, basis, method, budget, gain, low, high, rival="suffix"):
    return {"kernel_source": source, "basis": basis, "method": method, "max_num_batched_tokens": budget, "cases": 12,
            "vs_ar_c1": 3.0, "vs_best_rival_c1": gain, "best_rival_c1": rival, "vs_best_rival_c1_ci_low": low,
            "vs_best_rival_c1_ci_high": high, "vs_ar_c16": 1.1, "vs_best_rival_c16": None, "best_rival_c16": None,
            "vs_best_rival_c16_ci_low": None, "vs_best_rival_c16_ci_high": None}


def _write(tmp_path, rows, serving_rows=None):
    tables, metrics = tmp_path / TABLES, tmp_path / METRICS
    tables.mkdir(parents=True)
    metrics.mkdir(parents=True)
    (metrics / "serving.json").write_text(json.dumps({"claim": {"ours": "o", "reason": "r", "method": "m"}}))
    pl.DataFrame(rows).write_csv(tables / "serving_claim.csv")
    if serving_rows is not None:
        pl.DataFrame(serving_rows).write_csv(tables / "serving.csv")
    return tables, metrics


def test_each_source_and_load_is_a_decision_with_a_value_an_interval_and_a_basis(tmp_path):
    rows = [_row("batched", MEASURED, "copy-line-decoded", 2048, 1.3, 1.1, 1.5),
            _row("batched", MEASURED, "copy-token-decoded", 2048, 0.9, 0.8, 1.0),
            _row("batched", MEASURED, "copy-line-decoded", 8192, 9.0, 8.0, 10.0),  # not the headline budget
            _row("h200", EXTRAPOLATED, "copy-line-decoded", 2048, 0.8, 0.7, 0.9, rival="pld-best-k")]
    family = [{"kernel_source": "h200", "workload": "closed", "max_num_batched_tokens": 2048, "load": 1.0,
               "method": "pld-best-k", "best_member": "pld-earliest-k64"}]
    tables, metrics = _write(tmp_path, rows, family)
    claim = serving.serving_claim(SPEC, tables, metrics)
    assert claim.verdict == v.BEYOND and (claim.reason, claim.method) == ("r", "m")
    first, second = claim.scopes  # C=16 has no gain over a rival: no scope, never a null one
    assert first.scope == f"batched ({MEASURED}), C=1" and first.value == 1.3 and first.ci == (1.1, 1.5)
    assert first.decision == d.FASTER and first.basis == d.PRICED and first.detail["copy"] == "copy-line-decoded"
    assert second.decision == d.SLOWER and second.basis == d.EXTRAPOLATED
    assert second.detail["rival"] == "pld-earliest-k64" and "prompt lookup (earliest, k=64)" in second.ours
    assert "batched C=1 1.30x [1.10, 1.50] (faster)" in claim.ours


def test_a_row_without_an_interval_gives_no_scope(tmp_path):
    """A serving table written before the intervals existed: no decision is made up from a point estimate."""
    tables, metrics = _write(tmp_path, [_row("batched", MEASURED, "copy-line-decoded", 2048, 1.3, None, None)])
    claim = serving.serving_claim(SPEC, tables, metrics)
    assert claim.scopes == () and claim.ours == "o"
