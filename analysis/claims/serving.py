"""Beyond the paper: batched serving. The serving stage computes the row (analysis.serving.verdict, from its
simulation: Copy-as-Decode's output tokens/s over AR and over the best rival at each closed-loop concurrency, with
a paired request-bootstrap interval over the rival) and writes it to reports/metrics/serving.json (`claim`) and
reports/tables/serving_claim.csv; this rule reads them back as decision scopes (analysis.claims.decision): per
kernel source and headline concurrency, at the stage's headline budget (the smallest), Copy-as-Decode's best
variant there against the best rival there. A family named as the best rival (prompt lookup at its best k) is
named by its member at that load (reports/tables/serving.csv, read when present)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analysis.claims.decision import EXTRAPOLATED, PRICED, Band, decide
from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.errors import ParamsError
from analysis.latency.stepcost import EXTRAPOLATED as EXTRAPOLATED_STEPS
from analysis.results.numbers import MISSING, fmt_ci, fmt_x
from analysis.rivals.methods import parse_method


def method_label(name: str) -> str:
    """A method's label from the rivals' vocabulary; a name outside it (a family's best member) as written."""
    try:
        return parse_method(name).label
    except ParamsError:
        return name


def loads_of(table: pl.DataFrame) -> list[int]:
    return sorted(int(m[1]) for k in table.columns if (m := re.fullmatch(r"vs_best_rival_c(\d+)", k)))


def members(serving: pl.DataFrame | None, budget: int) -> dict[tuple[str, int, str], str]:
    """(kernel source, concurrency, family) -> its best member there, from serving.csv's closed-loop family rows."""
    if serving is None or "best_member" not in serving.columns:
        return {}
    rows = serving.filter((pl.col("workload") == "closed") & (pl.col("max_num_batched_tokens") == budget)
                          & pl.col("best_member").is_not_null())
    return {(r["kernel_source"], int(r["load"]), r["method"]): r["best_member"] for r in rows.iter_rows(named=True)}


def load_scope(rows: list[dict], load: int, family_members: dict) -> Scope | None:
    """One source at one concurrency: its Copy-as-Decode method with the highest gain over the best rival there."""
    scored = [r for r in rows if r.get(f"vs_best_rival_c{load}") is not None]
    if not scored:
        return None
    best = max(scored, key=lambda r: r[f"vs_best_rival_c{load}"])
    value = float(best[f"vs_best_rival_c{load}"])
    low, high = best.get(f"vs_best_rival_c{load}_ci_low"), best.get(f"vs_best_rival_c{load}_ci_high")
    if low is None or high is None:
        return None
    ci = (float(low), float(high))
    band = Band.of(best, f"vs_best_rival_c{load}")
    rival = best[f"best_rival_c{load}"]
    shown = family_members.get((best["kernel_source"], load, rival), rival)
    source, basis = best["kernel_source"], best["basis"]
    ours = (f"C={load}: {method_label(best['method'])} {fmt_x(best[f'vs_ar_c{load}'])} over AR; over "
            f"{method_label(shown)} {value:.2f}x {fmt_ci(*ci, digits=2)}")
    detail = {"load": f"C={load}", "concurrency": load, "kernel_source": source, "basis_text": basis,
              "budget": int(best["max_num_batched_tokens"]), "copy": best["method"],
              "copy_label": method_label(best["method"]), "copy_speedup": float(best[f"vs_ar_c{load}"]),
              "rival": shown, "rival_label": method_label(shown), "band": list(band.pair) if band else None}
    return Scope(f"{source} ({basis}), C={load}", MISSING, ours, BEYOND, best.get("reason", ""), value=value, ci=ci,
                 cases=int(best["cases"]) if best.get("cases") is not None else None,
                 decision=decide(ci, band.pair if band else None),
                 basis=EXTRAPOLATED if basis == EXTRAPOLATED_STEPS else PRICED, detail=detail,
                 ci_kind="paired request bootstrap, 95%, scaled onto the throughput ratio")


def decision_scopes(table: pl.DataFrame, reason: str, serving: pl.DataFrame | None = None) -> tuple[Scope, ...]:
    """Per kernel source (in the table's order) and headline concurrency, at the smallest budget."""
    if table.is_empty():
        return ()
    budget = int(table["max_num_batched_tokens"].min())
    rows = table.filter(pl.col("max_num_batched_tokens") == budget)
    family_members = members(serving, budget)
    out = []
    for source in rows["kernel_source"].unique(maintain_order=True).to_list():
        part = [dict(r, reason=reason) for r in rows.filter(pl.col("kernel_source") == source).iter_rows(named=True)]
        for load in loads_of(rows):
            scope = load_scope(part, load, family_members)
            if scope is not None:
                out.append(scope)
    return tuple(out)


def optional_serving(tables: Path) -> pl.DataFrame | None:
    path = Path(tables) / "serving.csv"
    return pl.read_csv(path, infer_schema_length=None) if path.is_file() else None


@register("batched_serving")
def serving_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    claim = metric_input(spec, 0, tables, metrics_dir)["claim"]
    table = metric_input(spec, 1, tables, metrics_dir)
    scopes = decision_scopes(table, claim["reason"], optional_serving(tables))
    ours = claim["ours"]
    if scopes:
        ours = "over the best rival: " + "; ".join(
            f"{s.detail['kernel_source']} {s.detail['load']} {s.value:.2f}x {fmt_ci(*s.ci, digits=2)} ({s.decision})"
            for s in scopes)
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours, verdict=BEYOND, reason=claim["reason"],
                 method=claim["method"], scopes=scopes)
