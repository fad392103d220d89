"""Beyond the paper: batched serving. The paper names batched serving as future work, so there is nothing to
reproduce: the row says, per kernel source at its headline token budget (vLLM's default on that device), what
Copy-as-Decode's output tokens/s is worth over AR and over the best rival at the headline closed-loop
concurrencies, and from which concurrency each gain falls below params serving.gain_threshold.

The serving stage writes tables only (analysis.serving.gains: reports/tables/serving_claim.csv, one row per
source, budget and Copy-as-Decode method; reports/tables/serving.csv, every run); this rule words them:

* the sentence leads with the row the gains table marks `headline` (the source's headline budget and the first
  Copy-as-Decode method by role in the vocabulary's headline order), with the other budget beside it;
* one decision scope (analysis.claims.decision) per source and headline concurrency, at the headline budget:
  Copy-as-Decode's best variant there over the best rival there, the paired request-bootstrap interval (with the
  requests it was taken over) and its decision. The extrapolation band (both budgets, both prices past the
  fitted step tokens) turns a decision the pricing rule could flip into "depends on the pricing assumption", and
  a point where every method is compute-bound reads "compute-bound: set by tokens forwarded per output token"
  with that ratio per method, never as parity (both sides of the comparison spend most of their time on work
  that grows with the tokens they forward). A family named as the best rival (prompt lookup at its best k)
  is named by its member at that load (reports/tables/serving.csv, read when present).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analysis.claims.decision import COMPUTE_BOUND, EXTRAPOLATED, PRICED, Band, decide
from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.errors import MissingOutputError, ParamsError
from analysis.latency.stepcost import EXTRAPOLATED as EXTRAPOLATED_STEPS
from analysis.results.numbers import MISSING, fmt_ci, fmt_x
from analysis.rivals.methods import parse_method

METHOD = ("vLLM-V1-style continuous batching (token budget, decode-first, chunked prefill) simulated with simpy, "
          "steps priced by the fitted step-cost model of each source, each method served its own prompt [serving]")


def method_label(name: str) -> str:
    """A method's label from the rivals' vocabulary; a name outside it (a family's best member) as written."""
    try:
        return parse_method(name).label
    except ParamsError:
        return name


def loads_of(table: pl.DataFrame) -> list[int]:
    return sorted(int(m[1]) for k in table.columns if (m := re.fullmatch(r"vs_best_rival_c(\d+)", k)))


def members(serving: pl.DataFrame | None) -> dict[tuple[str, int, int, str], str]:
    """(kernel source, budget, concurrency, family) -> its best member there, from serving.csv's closed-loop rows."""
    if serving is None or "best_member" not in serving.columns:
        return {}
    rows = serving.filter((pl.col("workload") == "closed") & pl.col("best_member").is_not_null())
    return {(r["kernel_source"], int(r["max_num_batched_tokens"]), int(r["load"]), r["method"]): r["best_member"]
            for r in rows.iter_rows(named=True)}


def headline_rows(table: pl.DataFrame) -> pl.DataFrame:
    """Every row at its source's headline budget (the budget of the row marked `headline`)."""
    if "headline" not in table.columns:
        raise MissingOutputError("reports/tables/serving_claim.csv has no `headline` column: stale output, rerun "
                                 "`copydecode serving simulate`")
    marked = table.filter(pl.col("headline")).select("kernel_source", budget="max_num_batched_tokens")
    return table.join(marked, on="kernel_source").filter(pl.col("max_num_batched_tokens") == pl.col("budget")).drop("budget")


def per_output(row: dict, load: int, rival: str) -> str:
    """The tokens AR, Copy-as-Decode and the rival forward per output token at a load point."""
    parts = [("AR", row.get(f"ar_tokens_per_output_c{load}")), (method_label(row["method"]), row.get(f"tokens_per_output_c{load}")),
             (method_label(rival), row.get(f"rival_tokens_per_output_c{load}"))]
    return ", ".join(f"{name} {value:.2f}" for name, value in parts if value is not None)


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
    source, basis, budget = best["kernel_source"], best["basis"], int(best["max_num_batched_tokens"])
    rival = best[f"best_rival_c{load}"]
    shown = family_members.get((source, budget, load, rival), rival)
    bound = bool(best.get(f"compute_bound_c{load}"))
    requests = best.get(f"requests_c{load}")
    ours = (f"C={load}: {method_label(best['method'])} {fmt_x(best[f'vs_ar_c{load}'])} over AR; over "
            f"{method_label(shown)} {value:.2f}x {fmt_ci(*ci, digits=2)}"
            + (f" over {int(requests):,} requests" if requests is not None else ""))
    if bound:
        ours += f"; {COMPUTE_BOUND} ({per_output(best, load, shown)})"
    elif best.get(f"tokens_per_output_c{load}") is not None:
        ours += f"; tokens forwarded per output token: {per_output(best, load, shown)}"
    if band is not None:
        ours += f"; over both budgets and both prices past the fitted steps {band.low:.2f}-{band.high:.2f}x"
    detail = {"load": f"C={load}", "concurrency": load, "kernel_source": source, "basis_text": basis,
              "budget": budget, "copy": best["method"], "copy_label": method_label(best["method"]),
              "copy_speedup": float(best[f"vs_ar_c{load}"]), "rival": shown, "rival_label": method_label(shown),
              "band": list(band.pair) if band else None, "requests": int(requests) if requests is not None else None,
              "compute_bound": bound,
              "tokens_per_output": {k: best.get(f"{p}tokens_per_output_c{load}") for k, p in
                                    (("ar", "ar_"), ("copy", ""), ("rival", "rival_"))} if bound else None}
    # the interval is over the steady window's requests (in `ours` and `detail`), not over the corpus's cases
    return Scope(f"{source} ({basis}), C={load}", MISSING, ours, BEYOND, best.get("reason", ""), value=value, ci=ci,
                 cases=None,
                 decision=decide(ci, band.pair if band else None, compute_bound=bound),
                 basis=EXTRAPOLATED if basis == EXTRAPOLATED_STEPS else PRICED, detail=detail,
                 ci_kind="paired request bootstrap, 95%, scaled onto the throughput ratio")


def decision_scopes(table: pl.DataFrame, reason: str, serving: pl.DataFrame | None = None) -> tuple[Scope, ...]:
    """Per kernel source (in the table's order) and headline concurrency, at the source's headline budget."""
    if table.is_empty():
        return ()
    rows = headline_rows(table)
    family_members = members(serving)
    out = []
    for source in rows["kernel_source"].unique(maintain_order=True).to_list():
        part = [dict(r, reason=reason) for r in rows.filter(pl.col("kernel_source") == source).iter_rows(named=True)]
        for load in loads_of(rows):
            scope = load_scope(part, load, family_members)
            if scope is not None:
                out.append(scope)
    return tuple(out)


def falls(row: dict, column: str, top: int | None) -> str:
    threshold = row["threshold"]
    c = row.get(column)
    if c is not None:
        return f"below {fmt_x(threshold)} from C={int(c)}"
    return f"above {fmt_x(threshold)} up to C={top}" if top else f"above {fmt_x(threshold)}"


def source_sentence(row: dict, others: list[dict], loads: list[int], top: int | None) -> str:
    """One source at its headline budget, the other budgets' gains over AR beside it."""
    def at(r: dict, prefix: str) -> str:
        digits = 2 if prefix == "vs_best_rival" else 1   # a ratio near 1 needs its second digit
        return ", ".join(f"C={c}: {fmt_x(r.get(f'{prefix}_c{c}'), digits) if r.get(f'{prefix}_c{c}') is not None else 'n/a'}"
                         for c in loads)
    rival = (f"over the best rival {at(row, 'vs_best_rival')} ({falls(row, 'below_vs_best_rival_from_c', top)})"
             if any(row.get(f"vs_best_rival_c{c}") is not None for c in loads) else "no rival in this run")
    beside = "; ".join(f"budget {int(o['max_num_batched_tokens']):,}: over AR {at(o, 'vs_ar')}, over the best rival "
                       f"{at(o, 'vs_best_rival')}" for o in others)
    return (f"{row['kernel_source']} ({row['basis']}), {method_label(row['method'])}, budget "
            f"{int(row['max_num_batched_tokens']):,} tokens: over AR {at(row, 'vs_ar')} "
            f"({falls(row, 'below_vs_ar_from_c', top)}); {rival}" + (f" [{beside}]" if beside else ""))


def claim_text(table: pl.DataFrame, serving: pl.DataFrame | None) -> tuple[str, str]:
    """The row's sentence (every source's headline row) and its reason (cases, requests, what each gain is against)."""
    loads = sorted(int(k[len("vs_ar_c"):]) for k in table.columns if re.fullmatch(r"vs_ar_c\d+", k))
    top = int(serving.filter(pl.col("workload") == "closed")["load"].max()) if serving is not None else None
    lead = table.filter(pl.col("headline"))
    if lead.is_empty():
        raise MissingOutputError("reports/tables/serving_claim.csv marks no headline row: rerun `copydecode serving simulate`")
    parts = []
    for row in lead.iter_rows(named=True):
        others = table.filter((pl.col("kernel_source") == row["kernel_source"]) & (pl.col("method") == row["method"])
                              & (pl.col("max_num_batched_tokens") != row["max_num_batched_tokens"])).to_dicts()
        parts.append(source_sentence(row, others, loads, top))
    first = lead.row(0, named=True)
    requests = ", ".join(f"C={c}: {int(first[f'requests_c{c}']):,}" for c in loads
                         if first.get(f"requests_c{c}") is not None)
    reason = (f"the paper gives no serving figure; each gain is output tokens/s against AR (and against the fastest "
              f"rival at that load) on the same seeded requests drawn from {int(first['cases']):,} cases (requests in "
              f"each closed-loop steady window: {requests or 'not recorded'}), one scheduler, one step-cost model per "
              "source; sources extrapolated from batch 1 say so; each method is served its own prompt (the numbered "
              f"source for Copy-as-Decode); engine features assumed: {first.get('engine_features') or 'not recorded'}")
    return "; ".join(parts), reason


def optional_serving(tables: Path) -> pl.DataFrame | None:
    path = Path(tables) / "serving.csv"
    return pl.read_csv(path, infer_schema_length=None) if path.is_file() else None


@register("batched_serving")
def serving_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    table = metric_input(spec, 0, tables, metrics_dir)
    serving = optional_serving(tables)
    ours, reason = claim_text(table, serving)
    scopes = decision_scopes(table, reason, serving)
    if scopes:
        ours = "over the best rival: " + "; ".join(
            f"{s.detail['kernel_source']} {s.detail['load']} {s.value:.2f}x {fmt_ci(*s.ci, digits=2)} ({s.decision})"
            for s in scopes) + f". {ours}"
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours, verdict=BEYOND, reason=reason, method=METHOD,
                 scopes=scopes)
