"""The cost-optimal oracle extension (analysis.claims.optimal): both oracles beside the paper's floors, no verdict."""

from __future__ import annotations

import polars as pl

from analysis.claims import optimal
from analysis.claims import verdict as v
from analysis.layout import METRICS, TABLES

PAPER = v.paper_claims()


def test_optimal_sets_both_oracles_beside_the_papers_floors(tmp_path):
    rows = [{"kernel_source": "paper", "baseline": "paper (A100, bf16)", "level": "token", "corpus": corpus,
             "framing": framing, "pooling": "corpus", "n_cases": 10, "covmax_bound": covmax, "optimal_bound": best,
             "context": 256}
            for corpus, framing, covmax, best in (("HEvalFix-Py", "body", 1.4, 5.0), ("ProbeEdit-S", "unit", 17.0, 26.0),
                                                  ("CommitEdits-click", "file", 100.0, 200.0))]
    tables = tmp_path / TABLES
    tables.mkdir(parents=True)
    pl.DataFrame(rows).write_csv(tables / "optimal.csv")
    claim = optimal.optimal_claim({**PAPER["optimal"], "beside_claim": PAPER["token_level"]}, tables, tmp_path / METRICS)
    assert claim.verdict == v.BEYOND
    assert "1.4x-17.0x coverage-max -> 5.0x-26.0x cost-optimal" in claim.ours  # CommitEdits is not a paper corpus
    assert "1 of 2 corpora" in claim.reason
