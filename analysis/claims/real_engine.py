"""Beyond the paper: measured in a real serving engine (vLLM). The `engine summary` stage computes the row
(analysis.engine.verdict) into reports/metrics/engine.json (`claim`) and the per-load speedups into
reports/tables/engine_speedups.csv; this rule reads them back, one scope per load."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.engine.verdict import load_text
from analysis.results.numbers import MISSING


@register("real_engine")
def engine_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    metrics = metric_input(spec, 0, tables, metrics_dir)
    gains = metric_input(spec, 1, tables, metrics_dir)
    claim = metrics["claim"]
    scopes = tuple(Scope(f"concurrency {c} ({metrics['frozen_run']})", MISSING, load_text(gains, c), BEYOND,
                         claim["reason"], cases=metrics.get("requests"))
                   for c in sorted(gains["concurrency"].unique().to_list()))
    return Claim(claim=spec["title"], paper=spec["text"], ours=claim["ours"], verdict=BEYOND, reason=claim["reason"],
                 method=claim["method"], scopes=scopes)
