"""Claim 4: token level, 91-99% coverage and 4.5x-6.5x floors over the paper's three corpora.

Coverage from the spans; floors (the bound with every directive token decoded) like with like, the
paper's kernel composed with this suite's spans; this machine's fitted kernel's floors beside them."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import DIFFERS, REPRODUCED, Claim, Scope, bounds_input, judge, metric_input
from analysis.errors import MissingOutputError
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.pooling import paper_view, star
from analysis.results.numbers import fmt_int, fmt_pct, fmt_range, fmt_x

ENDS_CI = "case-bootstrap 95% intervals of the corpora: the lowest lower bound to the highest upper bound"


def ends_interval(rows: pl.DataFrame) -> tuple[float, float]:
    """A range's interval: from the lowest corpus's lower bound to the highest corpus's upper bound."""
    return float(rows["ci_low"].min()), float(rows["ci_high"].max())

METHOD = "suffix-automaton oracle; floor = bound with every directive token decoded, paper kernel [spans, bounds]"


@register("token_level")
def token_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    c = spec
    cov = paper_view(metric_input(spec, 0, tables, metrics_dir)).filter(pl.col("level") == "token")
    floor_rows = paper_view(bounds_input(spec, 1, tables, metrics_dir)).filter(
        (pl.col("level") == "token") & (pl.col("variant") == "overhead"))
    floors = floor_rows.filter(pl.col("kernel_source") == PAPER_SOURCE)
    fitted = floor_rows.filter((pl.col("kernel_source") == FIT_SOURCE) & (pl.col("baseline") == c.get("fit_baseline", "eager")))
    if floors.height == 0:
        raise MissingOutputError("bounds.csv has no paper-kernel rows; add `paper` to kernel.sources")
    if cov.height == 0:
        raise MissingOutputError("coverage.csv has no token-level rows for the paper's corpora")
    tol = c["rel_tolerance"]
    cov_lo, cov_hi, fl_lo, fl_hi = cov["coverage"].min(), cov["coverage"].max(), floors["bound"].min(), floors["bound"].max()
    cov_ok = judge(c, (cov_lo, cov_hi), (c["coverage_low"], c["coverage_high"]), tolerance="tolerance_pp")
    floor_ok = judge(c, (fl_lo, fl_hi), (c["floor_low"], c["floor_high"]), tolerance="rel_tolerance")
    low, high = cov.sort("coverage").row(0, named=True), cov.sort("coverage").row(-1, named=True)
    cov_reason = (f"coverage {fmt_range(cov_lo, cov_hi, fmt_pct)} ({star(low['corpus'])} to {star(high['corpus'])}) "
                  f"{'inside' if cov_ok else 'outside'} the paper's range widened by {c['tolerance_pp']:g} pp")
    low, high = floors.sort("bound").row(0, named=True), floors.sort("bound").row(-1, named=True)
    extrapolated = int(floors["extrapolated_spans"].sum())
    floor_reason = (f"floors {fmt_range(fl_lo, fl_hi, fmt_x)} ({star(low['corpus'])} to {star(high['corpus'])}) "
                    f"{'inside' if floor_ok else 'outside'} {fmt_range(c['floor_low'], c['floor_high'], fmt_x)} "
                    f"widened by {100 * tol:.0f}%"
                    + (f"; {fmt_int(extrapolated)} copy spans lie outside the paper curve's N range and are "
                       "extrapolated" if extrapolated else ""))
    scopes = (Scope("coverage", fmt_range(c["coverage_low"], c["coverage_high"], fmt_pct), fmt_range(cov_lo, cov_hi, fmt_pct),
                    REPRODUCED if cov_ok else DIFFERS, cov_reason, value=(cov_lo, cov_hi),
                    paper_value=(c["coverage_low"], c["coverage_high"]), cases=int(cov["n_cases"].sum()),
                    ci=ends_interval(cov), ci_kind=ENDS_CI),
              Scope("floors (paper kernel)", fmt_range(c["floor_low"], c["floor_high"], fmt_x), fmt_range(fl_lo, fl_hi, fmt_x),
                    REPRODUCED if floor_ok else DIFFERS, floor_reason, value=(fl_lo, fl_hi),
                    paper_value=(c["floor_low"], c["floor_high"]), cases=int(floors["n_cases"].sum()),
                    ci=ends_interval(floors), ci_kind=ENDS_CI))
    fit_text = (f"; this machine's fitted kernel ({fitted['baseline'][0]} AR): floors "
                f"{fmt_range(fitted['bound'].min(), fitted['bound'].max(), fmt_x)}") if fitted.height else ""
    failed = [s.reason for s in scopes if s.verdict == DIFFERS]
    return Claim(
        claim=f"4. {c['title']}", paper=c["text"],
        ours=f"coverage {fmt_range(cov_lo, cov_hi, fmt_pct)}; floors with the paper kernel {fmt_range(fl_lo, fl_hi, fmt_x)}{fit_text}",
        verdict=DIFFERS if failed else REPRODUCED,
        reason="; ".join(failed) or "coverage and floors within the stated tolerances",
        method=METHOD, scopes=scopes)
