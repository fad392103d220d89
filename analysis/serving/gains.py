"""The serving gains table (reports/tables/serving_claim.csv): per kernel source, token budget and Copy-as-Decode
method, its gains at the headline concurrencies, read off the serving table (a pure function; the claims row,
analysis.claims.serving, words it).

Per headline concurrency C, from the closed-loop rows:

* `vs_ar_c<C>`, `vs_best_rival_c<C>`, `best_rival_c<C>` and the request-bootstrap interval of the gain over the
  rival (`vs_best_rival_c<C>_ci_low/_high`), with the requests it was taken over (`requests_c<C>`: the steady
  window's requests of the Copy-as-Decode run);
* the extrapolation band of the gain over the rival (`vs_best_rival_c<C>_band_low/_high`): its lowest and
  highest value over both token budgets and both prices past the fitted step tokens (`vs_best_rival_c<C>_marginal`:
  the gain when every step past the range is priced at the lowest defensible rule, analysis.latency.stepcost);
  where it crosses 1 the ranking is the pricing assumption's, not the data's;
* whether the comparison is compute-bound (`compute_bound_c<C>`: Copy-as-Decode and the best rival there each spend
  at least the params share of their busy time on work that grows with the tokens they forward) and the tokens each
  side forwards per output token (`tokens_per_output_c<C>`, `ar_…`, `rival_…`): where it is, the ranking is set by
  that ratio;
* the extrapolated share of the Copy-as-Decode run's steps, in all and by cause.

`headline` marks the row the claims sentence and the headline figures read: per source its headline budget
(params serving.engine.headline_budget) and the first Copy-as-Decode method in the vocabulary's headline order
(directive tokens decoded, line level first), chosen by role, never by name.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from analysis.errors import ParamsError
from analysis.rivals.methods import parse_method

CAUSES = ("batch", "tokens", "context")


def headline_method(copy_methods: list[str]) -> str:
    """The Copy-as-Decode method a sentence leads with: the vocabulary's headline order among the copy role."""
    if not copy_methods:
        raise ParamsError("serving: no Copy-as-Decode method (role copy) to lead with")
    return min(copy_methods, key=lambda m: parse_method(m).headline_key())


def first_below(rows: pl.DataFrame, column: str, threshold: float) -> int | None:
    below = rows.filter(pl.col(column).is_not_null() & (pl.col(column) < threshold)).sort("load")
    return int(below["load"][0]) if below.height else None


def _at(rows: dict[int, dict], load: int, column: str):
    return rows[load].get(column) if load in rows else None


def _point_rows(closed: pl.DataFrame) -> dict[tuple, dict[str, dict]]:
    """(source, budget, load) -> method -> its row."""
    out: dict[tuple, dict[str, dict]] = {}
    for r in closed.iter_rows(named=True):
        out.setdefault((r["kernel_source"], r["max_num_batched_tokens"], int(r["load"])), {})[r["method"]] = r
    return out


def gains_table(table: pl.DataFrame, low_rule: pl.DataFrame | None, copy_methods: list[str], threshold: float,
                headline: tuple[int, ...], cases: int, headline_budget: Callable[[str], int]) -> pl.DataFrame:
    """One row per source, budget and Copy-as-Decode method (see the module docstring); `low_rule`: the closed-loop
    rows of the headline concurrencies priced at the lowest defensible rule past the fitted step tokens (None: no
    band)."""
    closed = table.filter(pl.col("workload") == "closed")
    if closed.height == 0:
        raise ParamsError("serving gains: the serving table has no closed-loop rows")
    points = _point_rows(closed)
    low = _point_rows(low_rule) if low_rule is not None else {}
    lead = headline_method(copy_methods)
    out = []
    groups = closed.filter(pl.col("method").is_in(copy_methods)).sort("kernel_source", "max_num_batched_tokens", "method")
    for (source, budget, method), rows in groups.group_by("kernel_source", "max_num_batched_tokens", "method",
                                                          maintain_order=True):
        by_load = {int(r["load"]): r for r in rows.iter_rows(named=True)}
        row = {"kernel_source": source, "basis": rows["basis"][0], "method": method, "max_num_batched_tokens": int(budget),
               "headline": bool(method == lead and int(budget) == headline_budget(source)), "threshold": threshold,
               "below_vs_ar_from_c": first_below(rows, "speedup_vs_ar", threshold),
               "below_vs_best_rival_from_c": first_below(rows, "speedup_vs_best_rival", threshold), "cases": cases,
               "engine_features": rows["engine_features"][0] if "engine_features" in rows.columns else None}
        for c in headline:
            point = points.get((source, budget, c), {})
            rival = _at(by_load, c, "best_rival")
            rival_row = point.get(rival, {}) if rival else {}   # a family's row is its best member's there
            ar = next((r for r in point.values() if r["role"] == "baseline"), {})
            row |= {f"vs_ar_c{c}": _at(by_load, c, "speedup_vs_ar"), f"vs_best_rival_c{c}": _at(by_load, c, "speedup_vs_best_rival"),
                    f"best_rival_c{c}": rival,
                    f"vs_best_rival_c{c}_ci_low": _at(by_load, c, "vs_best_rival_ci_low"),
                    f"vs_best_rival_c{c}_ci_high": _at(by_load, c, "vs_best_rival_ci_high"),
                    f"requests_c{c}": _at(by_load, c, "requests"),
                    f"compute_bound_c{c}": (bool(_at(by_load, c, "compute_bound") and rival_row.get("compute_bound"))
                                            if c in by_load and rival_row else None),
                    f"tokens_per_output_c{c}": _at(by_load, c, "tokens_per_output"),
                    f"ar_tokens_per_output_c{c}": ar.get("tokens_per_output"),
                    f"rival_tokens_per_output_c{c}": rival_row.get("tokens_per_output"),
                    f"extrapolated_step_share_c{c}": _at(by_load, c, "extrapolated_step_share"),
                    **{f"extrapolated_{cause}_share_c{c}": _at(by_load, c, f"extrapolated_{cause}_share") for cause in CAUSES},
                    f"vs_best_rival_c{c}_marginal": low.get((source, budget, c), {}).get(method, {}).get("speedup_vs_best_rival")}
        out.append(row)
    if not out:
        raise ParamsError(f"serving gains: no closed-loop row of the Copy-as-Decode methods {copy_methods}")
    return with_bands(pl.DataFrame(out, infer_schema_length=None), headline)


def with_bands(gains: pl.DataFrame, headline: tuple[int, ...]) -> pl.DataFrame:
    """`vs_best_rival_c<C>_band_low/_high`: per source and method, the lowest and highest gain over the best rival at
    C over every budget and both prices past the fitted step tokens (null where there is no gain to bound)."""
    exprs = []
    for c in headline:
        values = [f"vs_best_rival_c{c}", f"vs_best_rival_c{c}_marginal"]
        both = pl.concat_list([pl.col(v) for v in values])
        exprs += [both.list.min().min().over("kernel_source", "method").alias(f"vs_best_rival_c{c}_band_low"),
                  both.list.max().max().over("kernel_source", "method").alias(f"vs_best_rival_c{c}_band_high")]
    return gains.with_columns(exprs)
