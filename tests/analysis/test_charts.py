"""analysis.charts: every chart a report shows comes from one function there, honours the
parameters it is given, and fits a laptop page; notebooks hold no chart code."""

from __future__ import annotations

import re

import nbformat
import polars as pl
import pytest
from conftest import ROOT

from analysis import charts
from analysis.layout import NOTEBOOKS
from analysis.reports import REPORTS

PAGE_WIDTH = 1200  # the reports' column (analysis.reports.PAGE_CSS: main max-width)


def _hist() -> pl.DataFrame:
    rows = []
    for corpus, framing in (("HEvalFix-Py", "body"), ("HEvalFix-Py", "decl"), ("ProbeEdit-S", "unit"),
                            ("CommitEdits-click", "file"), ("HEvalFix-JS", "body")):
        for level in ("line", "token"):
            for kind in ("copy", "gen"):
                for b, rng in ((0, "1"), (1, "2-3")):
                    rows.append({"corpus": corpus, "framing": framing, "level": level, "kind": kind, "bin": b,
                                 "range": rng, "count": 1 + b})
    return pl.DataFrame(rows)


def _bounds() -> pl.DataFrame:
    rows = []
    for source, baseline in (("fit", "eager"), ("paper", "paper (A100, bf16)")):
        for corpus, framing, pooling in (("HEvalFix-Py", "body", "corpus"), ("HEvalFix-Py", "decl", "corpus"),
                                         ("ProbeEdit-S", "unit", "corpus"), ("pooled", "body", "ratio_of_sums"),
                                         ("pooled", "body", "mean_of_corpora")):
            for level in ("line", "token"):
                for variant in ("ideal", "overhead"):
                    rows.append({"kernel_source": source, "baseline": baseline, "corpus": corpus, "framing": framing,
                                 "pooling": pooling, "level": level, "variant": variant, "bound": 3.0, "ci_low": 2.0,
                                 "ci_high": 4.0})
    return pl.DataFrame(rows)


def _values(chart) -> list[dict]:
    spec = chart.to_dict()
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def _width(chart) -> float:
    import vl_convert

    svg = vl_convert.vegalite_to_svg(chart.to_json())
    return float(re.search(r'<svg[^>]*\bwidth="([\d.]+)"', svg).group(1))


def test_span_histogram_honours_level_and_framing():
    values = _values(charts.span_histogram(_hist(), "token", "body"))
    assert {v["level"] for v in values} == {"token"}
    assert {v["framing"] for v in values} == {"body", "unit", "file"}  # decl is another framing's view
    both = _values(charts.span_histograms(_hist(), ["line", "token"], "decl"))
    assert {v["level"] for v in both} == {"line", "token"} and "body" not in {v["framing"] for v in both}


def test_bounds_names_both_pooling_rules_and_keeps_the_paper_kernel_apart():
    values = _values(charts.bounds(_bounds(), "t", "body"))
    corpora = {v["corpus"] for v in values}
    assert {"pooled (ratio of sums)", "pooled (mean of corpora)"} <= corpora and "pooled" not in corpora
    assert {v["baseline"] for v in values} == {"eager", "paper (A100, bf16)"}
    one = _values(charts.bounds_by_kernel(_bounds(), "token", "overhead"))
    assert {(v["level"], v["variant"]) for v in one} == {("token", "overhead")}


def test_perturbation_honours_level_and_framing():
    rows = [{"corpus": c, "framing": f, "level": lv, "kind": "start", "rate": 1.0, "em": 0.1}
            for c, f in (("HEvalFix-Py", "body"), ("HEvalFix-Py", "decl"), ("pooled", "body"), ("pooled", "decl"))
            for lv in ("line", "token")]
    values = _values(charts.perturbation(pl.DataFrame(rows), "body", "line"))
    assert {(v["corpus"], v["framing"]) for v in values} == {("HEvalFix-Py", "body"), ("pooled", "body")}
    assert {v["level"] for v in values} == {"line"}


def test_pooling_label_leaves_corpus_rows_alone():
    labelled = charts.pooling_label(_bounds())
    assert set(labelled.filter(pl.col("pooling") == "corpus")["corpus"]) == {"HEvalFix-Py", "ProbeEdit-S"}
    assert charts.pooling_label(pl.DataFrame({"corpus": ["pooled"]}))["corpus"][0] == "pooled"


@pytest.mark.slow
def test_charts_fit_the_report_column():
    sizes = pl.DataFrame({"corpus": ["A", "B"] * 5, "source_lines": list(range(10)), "source_tokens": list(range(10)),
                          "changed_lines": list(range(10)), "gen_tokens": list(range(10))})
    speedups = pl.DataFrame({"model": ["m"] * 4, "dtype": ["float32"] * 4, "device": ["cpu"] * 4, "context": [256] * 4,
                             "n": [8, 512, 8, 512], "baseline": ["eager", "eager", "static", "static"],
                             "speedup": [2.0, 14.0, 2.1, 14.5], "speedup_q25": [1.9, 13.0, 2.0, 14.0],
                             "speedup_q75": [2.1, 15.0, 2.2, 15.0], "is_strongest": [False, False, True, True]})
    ceilings = pl.DataFrame({"n": [8, 512], "ceiling": [8.0, 12.0], "label": ["cap", "cap"]})
    cov = pl.DataFrame({"corpus": ["A", "B"], "framing": ["body", "unit"], "level": ["line", "line"],
                        "coverage": [0.7, 0.9], "ci_low": [0.6, 0.85], "ci_high": [0.8, 0.95]})
    built = [charts.span_histograms(_hist(), ["line", "token"], "body"), charts.bounds(_bounds(), "t"),
             charts.bounds_by_kernel(_bounds(), "line", "ideal"), charts.corpus_sizes(sizes),
             charts.coverage_by_corpus(cov, "body"), charts.kernel_speedup(speedups, "note"),
             charts.kernel_roofline(speedups, ceilings)]
    for chart in built:
        assert _width(chart) <= PAGE_WIDTH, chart.to_dict().get("title")


def _code(name: str) -> str:
    book = nbformat.read(ROOT / NOTEBOOKS / f"{name}.ipynb", as_version=4)
    return "\n".join(c.source for c in book.cells if c.cell_type == "code")


@pytest.mark.parametrize("name", REPORTS)
def test_notebooks_draw_no_chart_themselves(name):
    code = _code(name)
    for construct in ("alt.Chart", ".encode(", "alt.vconcat", "alt.hconcat", "alt.layer", ".facet(", ".properties("):
        assert construct not in code, (name, construct)
    assert not re.search(r"\.mark_(bar|line|point|area|rule|tick|text|boxplot|errorbar|rect|circle|square)\(", code), name


def test_every_chart_a_report_calls_exists():
    called = {m for name in REPORTS for m in re.findall(r"\bcharts\.(\w+)\(", _code(name))}
    assert called, "no report draws a chart"
    assert all(callable(getattr(charts, m, None)) for m in called), called - set(dir(charts))
