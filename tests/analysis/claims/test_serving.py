"""The batched-serving extension (analysis.claims.serving): the serving stage's own row read back, one scope per
kernel source at the smallest budget and first Copy-as-Decode method; no verdict against the paper."""

from __future__ import annotations

import json

import polars as pl

from analysis.claims import serving
from analysis.claims import verdict as v
from analysis.layout import METRICS, TABLES

SPEC = v.paper_claims()["batched_serving"]


def test_the_serving_row_is_read_back_with_a_scope_per_source(tmp_path):
    tables, metrics = tmp_path / TABLES, tmp_path / METRICS
    tables.mkdir(parents=True)
    metrics.mkdir(parents=True)
    (metrics / "serving.json").write_text(json.dumps({"claim": {"ours": "o", "reason": "r", "method": "m"}}))
    pl.DataFrame([{"kernel_source": s, "basis": "measured", "method": m, "max_num_batched_tokens": b, "cases": 12,
                   "vs_ar_c1": 3.0, "vs_ar_c16": 1.1, "vs_best_rival_c1": rival, "vs_best_rival_c16": None}
                  for s, rival in (("paper", 1.5), ("fit", None)) for m in ("copy-line-ideal", "copy-token-ideal") for b in (512, 2048)]
                 ).write_csv(tables / "serving_claim.csv")
    claim = serving.serving_claim(SPEC, tables, metrics)
    assert claim.verdict == v.BEYOND and (claim.ours, claim.reason, claim.method) == ("o", "r", "m")
    assert [s.scope for s in claim.scopes] == ["paper (measured)", "fit (measured)"]
    assert claim.scopes[0].ours == "copy-line-ideal, budget 512: over AR C=1 3.0x, C=16 1.1x; over the best rival C=1 1.5x"
    assert claim.scopes[1].ours.endswith("no rival in this run") and claim.scopes[0].cases == 12
