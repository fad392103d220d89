"""Beyond the paper: measured in a real serving engine (vLLM). The `engine summary` stage computes the row
(analysis.engine.verdict) into reports/metrics/engine.json (`claim`), the per-load speedups over AR into
reports/tables/engine_speedups.csv, and per load Copy-as-Decode against the fastest rival the engine ran into
reports/tables/engine_decision.csv; this rule reads them back as decision scopes (analysis.claims.decision), one per
load, with basis `measured`: `value` is the rival's summed request latency over Copy-as-Decode's (above 1
Copy-as-Decode is faster), `ci` its paired request-bootstrap interval."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.decision import MEASURED, decide
from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.engine.methods import parse_engine_method
from analysis.engine.verdict import load_text
from analysis.results.numbers import MISSING, fmt_ci


def decision_scope(row: dict, gains: pl.DataFrame, metrics: dict, reason: str) -> Scope:
    c = int(row["concurrency"])
    ci = (float(row["copy_over_rival_ci_low"]), float(row["copy_over_rival_ci_high"]))
    copy, rival = parse_engine_method(row["copy"]), parse_engine_method(row["rival"])
    run = metrics["frozen_run"]
    ours = (f"{load_text(gains, c)}; {copy.label} over {rival.label}: {row['copy_over_rival']:.2f}x "
            f"{fmt_ci(*ci, digits=2)}")
    detail = {"concurrency": c, "kernel_source": f"vLLM {metrics.get('engine_version')} ({run})",
              "where": f"C={c}", "copy": row["copy"], "copy_label": copy.label,
              "copy_speedup": float(row["copy_over_ar"]), "rival": row["rival"], "rival_label": rival.label,
              "rival_speedup": float(row["rival_over_ar"]), "pairs": int(row["pairs"])}
    return Scope(f"concurrency {c} ({run})", MISSING, ours, BEYOND, reason, value=float(row["copy_over_rival"]),
                 ci=ci, cases=metrics.get("requests"), decision=decide(ci), basis=MEASURED, detail=detail,
                 ci_kind="paired request bootstrap, 95%")


@register("real_engine")
def engine_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    metrics = metric_input(spec, 0, tables, metrics_dir)
    gains = metric_input(spec, 1, tables, metrics_dir)
    decided = metric_input(spec, 2, tables, metrics_dir)
    claim = metrics["claim"]
    scopes = tuple(decision_scope(r, gains, metrics, claim["reason"])
                   for r in decided.sort("concurrency").iter_rows(named=True))
    return Claim(claim=spec["title"], paper=spec["text"], ours=claim["ours"], verdict=BEYOND, reason=claim["reason"],
                 method=claim["method"], scopes=scopes)
