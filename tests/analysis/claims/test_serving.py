"""The batched-serving extension (analysis.claims.serving): the serving stage's gains table worded as the claims row
and as decision scopes, one per kernel source and headline concurrency at the source's headline budget,
Copy-as-Decode's best variant there against the best rival there with its paired interval; no verdict against
the paper."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.claims import decision as d
from analysis.claims import serving
from analysis.claims import verdict as v
from analysis.errors import MissingOutputError
from analysis.layout import METRICS, TABLES
from analysis.latency.stepcost import EXTRAPOLATED, MEASURED

SPEC = v.paper_claims()["batched_serving"]


def _row(source, basis, method, budget, gain, low, high, rival="suffix-k64", headline=None, **extra):
    row = {"kernel_source": source, "basis": basis, "method": method, "max_num_batched_tokens": budget,
           "headline": headline if headline is not None else (budget == 2048 and method == "copy-line-decoded"),
           "threshold": 1.2, "below_vs_ar_from_c": None, "below_vs_best_rival_from_c": 1, "cases": 12,
           "engine_features": "copy spans as chunkable new tokens",
           "vs_ar_c1": 3.0, "vs_best_rival_c1": gain, "best_rival_c1": rival, "vs_best_rival_c1_ci_low": low,
           "vs_best_rival_c1_ci_high": high, "requests_c1": 90, "compute_bound_c1": False,
           "vs_ar_c16": 1.1, "vs_best_rival_c16": None, "best_rival_c16": None,
           "vs_best_rival_c16_ci_low": None, "vs_best_rival_c16_ci_high": None, "requests_c16": 60,
           "compute_bound_c16": False}
    return {**row, **extra}


def _write(tmp_path, rows, serving_rows=None):
    tables, metrics = tmp_path / TABLES, tmp_path / METRICS
    tables.mkdir(parents=True)
    metrics.mkdir(parents=True)
    pl.DataFrame(rows, infer_schema_length=None).write_csv(tables / "serving_claim.csv")
    if serving_rows is not None:
        pl.DataFrame(serving_rows).write_csv(tables / "serving.csv")
    return tables, metrics


def test_each_source_and_load_is_a_decision_with_a_value_an_interval_and_a_basis(tmp_path):
    rows = [_row("batched", MEASURED, "copy-line-decoded", 2048, 1.3, 1.1, 1.5),
            _row("batched", MEASURED, "copy-token-decoded", 2048, 0.9, 0.8, 1.0),
            _row("batched", MEASURED, "copy-line-decoded", 8192, 9.0, 8.0, 10.0),  # not the headline budget
            _row("h200", EXTRAPOLATED, "copy-line-decoded", 8192, 0.8, 0.7, 0.9, rival="pld-best-k", headline=True),
            _row("h200", EXTRAPOLATED, "copy-line-decoded", 2048, 5.0, 4.0, 6.0, rival="pld-best-k", headline=False)]
    family = [{"kernel_source": "h200", "workload": "closed", "max_num_batched_tokens": 8192, "load": 1.0,
               "method": "pld-best-k", "best_member": "pld-earliest-k64"}]
    tables, metrics = _write(tmp_path, rows, family)
    claim = serving.serving_claim(SPEC, tables, metrics)
    assert claim.verdict == v.BEYOND and claim.method == serving.METHOD
    first, second = claim.scopes  # C=16 has no gain over a rival: no scope, never a null one
    assert first.scope == f"batched ({MEASURED}), C=1" and first.value == 1.3 and first.ci == (1.1, 1.5)
    assert first.decision == d.FASTER and first.basis == d.PRICED and first.detail["copy"] == "copy-line-decoded"
    assert second.decision == d.SLOWER and second.basis == d.EXTRAPOLATED and second.detail["budget"] == 8192
    assert second.detail["rival"] == "pld-earliest-k64" and "prompt lookup (earliest, k=64)" in second.ours
    assert "batched C=1 1.30x [1.10, 1.50] (faster)" in claim.ours
    # the sentence leads with each source's headline row and puts the other budget beside it
    assert "h200 (extrapolated from batch 1), Copy-as-Decode" in claim.ours and "budget 8,192 tokens" in claim.ours
    assert "[budget 2,048: over AR" in claim.ours


def test_the_sentence_picks_its_method_by_role_not_by_name(tmp_path):
    """The gains table marks the headline row (the vocabulary's headline order among the copy role): a copy method
    whose name sorts first (copy-line-jump) does not take the sentence."""
    rows = [_row("batched", MEASURED, "copy-line-jump", 2048, 1.3, 1.1, 1.5, headline=False),
            _row("batched", MEASURED, "copy-line-decoded", 2048, 1.1, 1.0, 1.2, headline=True)]
    claim = serving.serving_claim(SPEC, *_write(tmp_path, rows))
    sentence = claim.ours.split(". ", 1)[1]
    assert "Copy-as-Decode line, directive tokens decoded" in sentence or "decoded" in sentence.split(":")[0]
    assert "jump" not in sentence.split(":")[0]


def test_a_row_without_an_interval_gives_no_scope(tmp_path):
    """A serving table written before the intervals existed: no decision is made up from a point estimate."""
    tables, metrics = _write(tmp_path, [_row("batched", MEASURED, "copy-line-decoded", 2048, 1.3, None, None)])
    claim = serving.serving_claim(SPEC, tables, metrics)
    assert claim.scopes == () and "batched (measured batched steps)" in claim.ours


def test_a_stale_table_without_the_headline_mark_is_named(tmp_path):
    rows = [{k: v for k, v in _row("batched", MEASURED, "copy-line-decoded", 2048, 1.3, 1.1, 1.5).items() if k != "headline"}]
    with pytest.raises(MissingOutputError, match="headline"):
        serving.serving_claim(SPEC, *_write(tmp_path, rows))


def test_a_compute_bound_point_says_so_with_the_tokens_each_side_forwards_never_parity(tmp_path):
    """Audit H3: at C = 128 every method's steps are compute-bound, so the 1.00x over the best rival is the ratio of
    tokens forwarded per output token (2.07 against 2.09), not evidence of a tie: the scope's decision says
    compute-bound and names the ratio per method."""
    row = _row("h200-devtime/qwen2.5-1.5b", EXTRAPOLATED, "copy-line-decoded", 2048, 0.9997, 0.99, 1.01,
               compute_bound_c1=True, ar_tokens_per_output_c1=2.040, tokens_per_output_c1=2.071,
               rival_tokens_per_output_c1=2.089)
    claim = serving.serving_claim(SPEC, *_write(tmp_path, [row]))
    scope = claim.scopes[0]
    assert scope.decision == d.COMPUTE_BOUND != d.TIE
    assert "compute-bound: set by tokens forwarded per output token (AR 2.04" in scope.ours
    assert "2.07" in scope.ours and "2.09" in scope.ours
    assert scope.detail["tokens_per_output"] == {"ar": 2.040, "copy": 2.071, "rival": 2.089}
    assert "(compute-bound: set by tokens forwarded per output token)" in claim.ours


def test_each_decision_prints_the_requests_its_interval_was_taken_over(tmp_path):
    """Audit M6: the serving interval is a request bootstrap over the steady window's requests; the row says how many
    (not the corpus's case count)."""
    rows = [_row("batched", MEASURED, "copy-line-decoded", 2048, 1.3, 1.1, 1.5, requests_c1=87)]
    claim = serving.serving_claim(SPEC, *_write(tmp_path, rows))
    assert claim.scopes[0].detail["requests"] == 87 and "over 87 requests" in claim.scopes[0].ours
    assert "requests in each closed-loop steady window: C=1: 87" in claim.reason


def test_a_band_over_both_budgets_that_crosses_one_turns_the_decision_into_depends(tmp_path):
    rows = [_row("h200", EXTRAPOLATED, "copy-line-decoded", 8192, 1.1, 1.05, 1.15, headline=True,
                 vs_best_rival_c1_band_low=0.9, vs_best_rival_c1_band_high=1.1),
            _row("h200", EXTRAPOLATED, "copy-line-decoded", 2048, 0.9, 0.85, 0.95, headline=False,
                 vs_best_rival_c1_band_low=0.9, vs_best_rival_c1_band_high=1.1)]
    scope = serving.serving_claim(SPEC, *_write(tmp_path, rows)).scopes[0]
    assert scope.decision == d.DEPENDS and scope.detail["band"] == [0.9, 1.1]
