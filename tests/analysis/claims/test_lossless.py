"""Claim 5 on a round trip of another corpus (issue 39, H5): shown, marked stale, never judged as fresh."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.claims.lossless import lossless_claim
from analysis.claims.verdict import REPRODUCED, STALE, paper_claims


def _root(tmp_path: Path) -> Path:
    from analysis.pipeline.digest import record_corpus

    metrics = tmp_path / "reports/metrics"
    metrics.mkdir(parents=True)
    (metrics / "roundtrip.json").write_text(json.dumps({"programs": 24, "passed": 24, "failed": 0, "per_level": {}}))
    (tmp_path / "data/corpora").mkdir(parents=True)
    (tmp_path / "data/corpora/cases.parquet").write_text("Mine")
    import contextlib

    with contextlib.chdir(tmp_path):
        record_corpus("roundtrip", [Path("reports/metrics/roundtrip.json")])
    return tmp_path


def test_claim_5_is_stale_once_the_cases_change_since_the_round_trip(tmp_path):
    root = _root(tmp_path)
    spec = paper_claims()["losslessness"]
    fresh = lossless_claim(spec, root / "reports/tables", root / "reports/metrics")
    assert fresh.verdict == REPRODUCED
    (root / "data/corpora/cases.parquet").write_text("Other")  # corpora rebuilt; the round trip not rerun
    stale = lossless_claim(spec, root / "reports/tables", root / "reports/metrics")
    assert stale.verdict == STALE and "`roundtrip` ran on a different data/corpora/cases.parquet" in stale.reason
    assert stale.ours == fresh.ours  # shown, not judged
