"""Per-case distributions (analysis.present.distributions): survival shares, percentiles and the share of
cases above each speedup, hand-counted; the chart draws exactly the survival points."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.present import charts
from analysis.present.distributions import (ALL_CASES, case_bounds, e2e_case_speedups, headline_share, spread_table,
                                            survival)


def _costs() -> pl.DataFrame:
    """Two corpora: A's line bounds (ideal) 1, 4, 6, 12; B's 3; with directives decoded half of each."""
    rows = []
    for corpus, bounds in (("A", [1.0, 4.0, 6.0, 12.0]), ("B", [3.0])):
        for i, bound in enumerate(bounds):
            for source, baseline in (("paper", "paper (A100, bf16)"), ("fit", "eager")):
                rows.append({"case_id": f"{corpus}/{i}", "corpus": corpus, "framing": "unit", "level": "line",
                             "gold_tokens": 10, "copied_tokens": 2 * (i + 1), "regen": 12.0,
                             "program_ideal": 12.0 / bound, "program_overhead": 24.0 / bound,
                             "kernel_source": source, "baseline": baseline})
    return pl.DataFrame(rows)


def test_case_bounds_are_each_cases_own_ratio():
    line = case_bounds(_costs(), "paper", "body", "line")
    ideal = line.filter(pl.col("variant") == "ideal").sort("case_id")
    assert ideal["bound"].to_list() == pytest.approx([1.0, 4.0, 6.0, 12.0, 3.0])
    assert line.filter(pl.col("variant") == "directives decoded")["bound"].sum() == pytest.approx(13.0)
    assert ideal["coverage"].to_list() == pytest.approx([0.2, 0.4, 0.6, 0.8, 0.2])
    with pytest.raises(ParamsError, match="unknown kernel source 'h100'"):
        case_bounds(_costs(), "h100", "body", "line")
    with pytest.raises(ParamsError, match="no token-level case costs"):
        case_bounds(_costs(), "paper", "body", "token")


def test_survival_is_the_share_of_cases_at_least_each_value():
    frame = pl.DataFrame({"corpus": ["A"] * 4 + ["B"], "bound": [6.0, 1.0, 12.0, 4.0, 3.0]})
    out = survival(frame, "bound", ["corpus"])
    assert out.filter(pl.col("corpus") == "A").select("bound", "share").rows() == [
        (1.0, 1.0), (4.0, 0.75), (6.0, 0.5), (12.0, 0.25)]
    assert out.filter(pl.col("corpus") == "B")["share"].to_list() == [1.0]


def test_spread_counts_each_case_once_and_pools_every_case():
    line = case_bounds(_costs(), "paper", "body", "line").filter(pl.col("variant") == "ideal")
    table = spread_table(line, "bound", ["corpus"])
    a, b, pooled = table.rows(named=True)
    assert (a["corpus"], a["cases"], a["p50"], a["share > 5x"], a["share > 10x"]) == ("A", 4, 5.0, 0.5, 0.25)
    assert (b["cases"], b["share > 2x"]) == (1, 1.0)
    assert (pooled["corpus"], pooled["cases"], pooled["share > 5x"]) == (ALL_CASES, 5, pytest.approx(0.4))
    assert headline_share(case_bounds(_costs(), "paper", "body", "line"), 5.0, "ideal") == (2, 5)


def test_the_chart_draws_the_survival_points_as_steps():
    frame = survival(pl.DataFrame({"corpus": ["A"] * 3, "bound": [2.0, 8.0, 4.0]}), "bound", ["corpus"])
    spec = charts.share_at_least(frame, "bound", "bound", log=True).to_dict()
    (values,) = [v for v in spec["datasets"].values()]
    assert [(row["bound"], row["share"]) for row in values] == [(2.0, 1.0), (4.0, pytest.approx(2 / 3)),
                                                                 (8.0, pytest.approx(1 / 3))]
    assert spec["mark"] == {"type": "line", "interpolate": "step-before"}
    assert spec["encoding"]["x"]["scale"] == {"type": "log"}


def test_e2e_speedups_leave_ar_out_and_name_missing_columns():
    cases = pl.DataFrame({"model": ["m"] * 2, "corpus": ["C"] * 2, "case_id": ["c"] * 2, "method": ["ar", "copy-line-ideal"],
                          "speedup": [1.0, 2.5]})
    assert e2e_case_speedups(cases)["method"].to_list() == ["copy-line-ideal"]
    with pytest.raises(ParamsError, match=r"lacks column\(s\) \['speedup'\]"):
        e2e_case_speedups(cases.drop("speedup"))
