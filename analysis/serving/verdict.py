"""The claims row "beyond the paper: batched serving", computed from the serving table (a pure function).

The paper names batched serving as future work, so there is nothing to reproduce: the row says, per kernel
source, at which closed-loop concurrency Copy-as-Decode's gain over AR, and over the best rival at that load,
falls below the threshold (params serving.gain_threshold, 1.2x), with the gains at the headline
concurrencies. Every gain names what it is against: output tokens/s of the same seeded requests under the
same scheduler and step-cost model; the step-cost source's basis (measured, or extrapolated from batch 1)
is part of the sentence.

Until the claims registry (analysis/claims/) takes a rule module per claim, this function is the row's one
computation; the serving stage writes its result to reports/tables/serving_claim.csv and
reports/metrics/serving.json.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.results.numbers import fmt_x

TITLE = "beyond the paper: batched serving"
BEYOND = "beyond the paper"  # the verdict's spelling in analysis.claims (a claim the paper does not make)
PAPER = "future work (\"batched-serving integration\"); no figure"


@dataclass(frozen=True)
class SourceGain:
    """One source and Copy-as-Decode method: the gains at the headline concurrencies and where they fall below."""

    kernel_source: str
    basis: str
    method: str
    budget: int
    gains_vs_ar: dict[int, float | None]
    gains_vs_rival: dict[int, float | None]
    rivals: dict[int, str | None]
    rival_intervals: dict[int, tuple[float | None, float | None]]  # the paired request-bootstrap interval per load
    below_vs_ar: int | None          # the first concurrency where the gain over AR is below the threshold
    below_vs_rival: int | None
    cases: int

    def sentence(self, threshold: float, top: int) -> str:
        def at(gains):
            return ", ".join(f"C={c}: {fmt_x(g) if g is not None else 'n/a'}" for c, g in gains.items())

        def falls(c):
            return f"below {fmt_x(threshold)} from C={c}" if c is not None else f"above {fmt_x(threshold)} up to C={top}"

        rivals = (f"over the best rival {at(self.gains_vs_rival)} ({falls(self.below_vs_rival)})"
                  if any(g is not None for g in self.gains_vs_rival.values()) else "no rival in this run")
        return (f"{self.kernel_source} ({self.basis}), {self.method}, budget {self.budget} tokens: over AR {at(self.gains_vs_ar)} "
                f"({falls(self.below_vs_ar)}); {rivals}")


@dataclass(frozen=True)
class ServingClaim:
    claim: str
    paper: str
    ours: str
    verdict: str
    reason: str
    method: str
    gains: tuple[SourceGain, ...]


def _first_below(rows: pl.DataFrame, column: str, threshold: float) -> int | None:
    below = rows.filter(pl.col(column).is_not_null() & (pl.col(column) < threshold)).sort("load")
    return int(below["load"][0]) if below.height else None


def source_gains(table: pl.DataFrame, copy_methods: list[str], threshold: float, headline: tuple[int, ...],
                 cases: int) -> list[SourceGain]:
    """Per source, budget and copy method, from the closed-loop rows of the serving table."""
    closed = table.filter(pl.col("workload") == "closed")
    if closed.height == 0:
        raise ParamsError("serving claim: the serving table has no closed-loop rows")
    out = []
    for (source, budget, method), rows in closed.filter(pl.col("method").is_in(copy_methods)).sort(
            "kernel_source", "max_num_batched_tokens", "method").group_by(
            "kernel_source", "max_num_batched_tokens", "method", maintain_order=True):
        by_load = {int(r["load"]): r for r in rows.iter_rows(named=True)}
        out.append(SourceGain(
            kernel_source=source, basis=rows["basis"][0], method=method, budget=int(budget),
            gains_vs_ar={c: by_load[c]["speedup_vs_ar"] if c in by_load else None for c in headline},
            gains_vs_rival={c: by_load[c]["speedup_vs_best_rival"] if c in by_load else None for c in headline},
            rivals={c: by_load[c]["best_rival"] if c in by_load else None for c in headline},
            rival_intervals={c: (by_load[c].get("vs_best_rival_ci_low"), by_load[c].get("vs_best_rival_ci_high"))
                             if c in by_load else (None, None) for c in headline},
            below_vs_ar=_first_below(rows, "speedup_vs_ar", threshold),
            below_vs_rival=_first_below(rows, "speedup_vs_best_rival", threshold), cases=cases))
    if not out:
        raise ParamsError(f"serving claim: no closed-loop row of the Copy-as-Decode methods {copy_methods}")
    return out


def serving_claim(table: pl.DataFrame, copy_methods: list[str], threshold: float, headline: tuple[int, ...],
                  cases: int, requests_note: str, budget: int) -> ServingClaim:
    """The row; its sentence gives the first Copy-as-Decode method at the headline budget (`budget`); the gains of
    every method and budget are in `gains` (the claim table)."""
    gains = source_gains(table, copy_methods, threshold, headline, cases)
    top = int(table.filter(pl.col("workload") == "closed")["load"].max())
    shown = [g for g in gains if g.budget == budget and g.method == sorted(copy_methods)[0]]
    if not shown:
        raise ParamsError(f"serving claim: no closed-loop row at the budget {budget}")
    return ServingClaim(
        claim=TITLE, paper=PAPER, ours="; ".join(g.sentence(threshold, top) for g in shown), verdict=BEYOND,
        reason=(f"the paper gives no serving figure; each gain is output tokens/s against AR (and against the fastest "
                f"rival at that load) on the same seeded requests drawn from {cases} cases ({requests_note}), one "
                "scheduler, one step-cost model per source; sources extrapolated from batch 1 say so"),
        method="vLLM-V1-style continuous batching (token budget, decode-first, chunked prefill) simulated with simpy, "
               "steps priced by the fitted step-cost model [serving]",
        gains=tuple(gains))


def claim_rows(claim: ServingClaim, threshold: float) -> pl.DataFrame:
    """The claim's figures as a table (reports/tables/serving_claim.csv): one row per source, method and budget."""
    rows = []
    for g in claim.gains:
        row = {"kernel_source": g.kernel_source, "basis": g.basis, "method": g.method, "max_num_batched_tokens": g.budget,
               "threshold": threshold, "below_vs_ar_from_c": g.below_vs_ar, "below_vs_best_rival_from_c": g.below_vs_rival,
               "cases": g.cases}
        for c in g.gains_vs_ar:
            row[f"vs_ar_c{c}"] = g.gains_vs_ar[c]
            row[f"vs_best_rival_c{c}"] = g.gains_vs_rival[c]
            row[f"best_rival_c{c}"] = g.rivals[c]
            row[f"vs_best_rival_c{c}_ci_low"], row[f"vs_best_rival_c{c}_ci_high"] = g.rival_intervals[c]
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)
