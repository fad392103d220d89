"""Beyond the paper: batched serving. The serving stage computes the row (analysis.serving.verdict, from its
simulation: Copy-as-Decode's output tokens/s over AR and over the best rival at each closed-loop concurrency)
and writes it to reports/metrics/serving.json (`claim`) and reports/tables/serving_claim.csv; this rule reads
them back, one scope per kernel source at the stage's headline budget and first Copy-as-Decode method."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.results.numbers import MISSING, fmt_x


def source_scopes(table: pl.DataFrame, reason: str) -> tuple[Scope, ...]:
    """Per kernel source (smallest budget, first method): the gains over AR and over the best rival."""
    if table.is_empty():
        return ()
    budget = table["max_num_batched_tokens"].min()
    rows = table.filter(pl.col("max_num_batched_tokens") == budget)
    first = sorted(rows["method"].unique().to_list())[0]
    out = []
    for r in rows.filter(pl.col("method") == first).iter_rows(named=True):
        loads = sorted(int(m[1]) for k in r if (m := re.fullmatch(r"vs_ar_c(\d+)", k)))
        over_ar = ", ".join(f"C={c} {fmt_x(r[f'vs_ar_c{c}'])}" for c in loads)
        rival = [f"C={c} {fmt_x(r[f'vs_best_rival_c{c}'])}" for c in loads if r.get(f"vs_best_rival_c{c}") is not None]
        ours = f"{first}, budget {budget}: over AR {over_ar}" + (f"; over the best rival {', '.join(rival)}" if rival
                                                                 else "; no rival in this run")
        out.append(Scope(f"{r['kernel_source']} ({r['basis']})", MISSING, ours, BEYOND, reason,
                         cases=int(r["cases"]) if r.get("cases") is not None else None))
    return tuple(out)


@register("batched_serving")
def serving_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    claim = metric_input(spec, 0, tables, metrics_dir)["claim"]
    table = metric_input(spec, 1, tables, metrics_dir)
    return Claim(claim=spec["title"], paper=spec["text"], ours=claim["ours"], verdict=BEYOND, reason=claim["reason"],
                 method=claim["method"], scopes=source_scopes(table, claim["reason"]))
