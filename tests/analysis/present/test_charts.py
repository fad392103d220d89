"""analysis.present.charts: every chart a report shows comes from one function there, honours the
parameters it is given, and fits a laptop page; notebooks hold no chart code."""

from __future__ import annotations

import re

import nbformat
import polars as pl
import pytest
from fixtures import ROOT

from analysis.present import charts
from analysis.results.e2e import chart_methods
from analysis.layout import NOTEBOOKS
from analysis.present.reports import REPORTS

PAGE_WIDTH = 1200  # the reports' column (analysis.present.reports.PAGE_CSS: main max-width)


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
    values = [v for v in _values(charts.perturbation(pl.DataFrame(rows), "body", "line")) if "corpus" in v]  # not the paper's rule
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


# ---------------------------------------------------------------- every line chart draws one path per series

def _speedups() -> pl.DataFrame:
    """Two models, two AR loops, two contexts (the frozen H200 source's shape): 8 series over the same Ns."""
    rows = []
    for model in ("qwen2.5-1.5b", "qwen2.5-7b"):
        for baseline in ("eager", "static_compiled"):
            for context in (256, 2048):
                for n in (1, 8, 64, 512):
                    s = n * (1.5 if model.endswith("7b") else 1.0) / (2 if baseline == "eager" else 1)
                    rows.append({"kernel_source": f"h200/{model}/{baseline}", "model": model, "dtype": "bfloat16",
                                 "device": "cuda", "context": context, "n": n, "baseline": baseline, "prefill": "eager",
                                 "speedup": s, "speedup_q25": 0.9 * s, "speedup_q75": 1.1 * s,
                                 "is_strongest": baseline == "static_compiled"})
    return pl.DataFrame(rows)


def _perturbation_table() -> pl.DataFrame:
    return pl.DataFrame([{"corpus": c, "framing": f, "level": lv, "kind": k, "rate": r, "em": 1 - r / 2}
                         for c, f in (("HEvalFix-Py", "body"), ("HEvalFix-Py", "decl"), ("ProbeEdit-S", "unit"),
                                      ("pooled", "body"))
                         for lv in ("line", "token") for k in ("start", "end") for r in (0.0, 0.5, 1.0)])


def _pilot_losses() -> pl.DataFrame:
    return pl.DataFrame([{"mode": m, "seed": s, "step": t, "loss": 1 / t} for m in ("program", "rewrite")
                         for s in (0, 1) for t in range(1, 9)])


def _pilot_curve() -> pl.DataFrame:
    return pl.DataFrame([{"mode": "program", "seed": s, "step": t, **{m: 0.1 * t for m in charts.CURVE_METRICS}}
                         for s in (0, 1) for t in (0, 48, 96)])


def _line_charts() -> dict:
    """Every chart of the suite that draws lines, on data with every series dimension the suite's tables have."""
    ceilings = pl.DataFrame({"n": [1, 8, 64, 512] * 2, "ceiling": [1.0, 8.0, 40.0, 40.0, 1.0, 8.0, 60.0, 60.0],
                             "label": ["this machine"] * 4 + ["H200"] * 4})
    cpu = _speedups().filter(pl.col("model") == "qwen2.5-1.5b")
    return {"kernel_speedup": charts.kernel_speedup(_speedups(), "H200; dashed: speedup = N"),
            "kernel_roofline": charts.kernel_roofline(cpu, ceilings),
            "kernel_roofline_two_models": charts.kernel_roofline(_speedups(), ceilings),
            "perturbation": charts.perturbation(_perturbation_table(), "body"),
            "perturbation_line": charts.perturbation(_perturbation_table(), "body", "line"),
            "pilot_loss": charts.pilot_loss(_pilot_losses()),
            "pilot_curve": charts.pilot_curve(_pilot_curve())}


def _svg(chart) -> str:
    import vl_convert

    return vl_convert.vegalite_to_svg(chart.to_json())


def _line_paths(svg: str) -> list[list[float]]:
    """The x coordinates of each line path (one path per series) in a rendered chart."""
    paths = []
    for group in re.findall(r'<g class="mark-line role-mark[^"]*"[^>]*>(.*?)</g>', svg, flags=re.S):
        for d in re.findall(r'<path[^>]*\bd="([^"]*)"', group):
            paths.append([float(x) for x in re.findall(r"[ML](-?[\d.]+),-?[\d.]+", d)])
    return paths


@pytest.fixture(scope="module")
def line_svgs() -> dict[str, str]:
    pytest.importorskip("vl_convert")
    return {name: _svg(chart) for name, chart in _line_charts().items()}


def test_no_line_repeats_an_x_value_within_one_series(line_svgs):
    """A path that visits an x twice joins two series (the H200 chart joined 1.5B and 7B into a sawtooth,
    the roofline chart joined two contexts)."""
    for name, svg in line_svgs.items():
        paths = _line_paths(svg)
        assert paths, name
        for xs in paths:
            assert len(xs) == len(set(round(x, 3) for x in xs)), (name, xs)


def test_the_kernel_chart_draws_one_line_per_model_loop_and_context(line_svgs):
    paths = [p for p in _line_paths(line_svgs["kernel_speedup"]) if len(p) == 4]
    assert len(paths) == 2 * 2 * 2 + 1  # 2 models x 2 loops x 2 contexts, and the speedup = N line
    legend = line_svgs["kernel_speedup"]
    for model in ("qwen2.5-1.5b", "qwen2.5-7b"):
        assert f"{model}, eager" in legend and f"{model}, static_compiled" in legend


def test_dash_legends_draw_dashes(line_svgs):
    """A strokeDash legend shows stroked dash samples, one pattern per entry (not identical filled dots)."""
    for name in ("kernel_speedup", "perturbation"):
        symbols = re.findall(r'role-legend-symbol[^>]*>(<path[^>]*/>)', line_svgs[name])
        dashed = [s for s in symbols if "stroke-dasharray" in s]
        assert len(dashed) >= 2, name
        assert all(re.search(r'\bstroke="#', s) for s in dashed), (name, dashed)
        assert len({re.search(r'stroke-dasharray="([^"]*)"', s).group(1) for s in dashed}) == len(dashed), name


def test_no_label_is_truncated(line_svgs):
    pytest.importorskip("vl_convert")
    long = pl.DataFrame([{"kernel_source": src, "baseline": "static_compiled", "corpus": "CommitEdits-express",
                          "framing": "file", "pooling": "corpus", "level": "line", "variant": "ideal", "bound": 3.0,
                          "ci_low": 2.0, "ci_high": 4.0}
                         for src in ("h200/qwen2.5-1.5b/static_compiled", "h200/qwen2.5-7b/static_compiled")])
    e2e = e2e_pooled(("HEvalFix-Py", "pooled"), ("pld_earliest_k64", "cad_line", "cad_token_overhead", "suffix_k64"))
    svgs = {**line_svgs, "bounds_by_kernel": _svg(charts.bounds_by_kernel(long, "line", "ideal")),
            "e2e": _svg(charts.e2e_speedup(e2e, chart_methods(("ar", "pld_earliest_k64", "cad_line", "cad_token_overhead",
                                                                 "suffix_k64"))))}
    for name, svg in svgs.items():
        assert "…" not in svg, name


def e2e_pooled(pools, methods) -> pl.DataFrame:
    """e2e_pooled.csv rows: every method 2x over 3 cases, CI 1.5-2.5, predicted 2.5x."""
    return pl.DataFrame([{"model": "smollm2-135m", "pool": p, "method": m, "cases": 3, "speedup_pooled": 2.0,
                          "ci_low": 1.5, "ci_high": 2.5, "speedup_with_prompt": 1.8, "predicted_pooled": 2.5}
                         for p in pools for m in methods])


def test_e2e_labels_are_readable_method_names_in_headline_order_with_case_counts():
    e2e = e2e_pooled(("HEvalFix-Py", "ProbeEdit-S"), ("ar", "pld_earliest_k10", "cad_line", "cad_line_overhead"))
    chart = charts.e2e_speedup(e2e, chart_methods(("ar", "pld_earliest_k10", "cad_line", "cad_line_overhead")))
    spec = chart.to_dict()
    values = _values(chart)
    assert {v["method_name"] for v in values} == {"PLD earliest, k=10", "Copy-as-Decode line, directives decoded",
                                                  "Copy-as-Decode line, ideal (upper bound)"}
    assert {v["cases_text"] for v in values} == {"3 cases"}  # the count stands on the chart
    sort = next(layer["encoding"]["y"]["sort"] for layer in spec["spec"]["layer"] if "y" in layer.get("encoding", {}))
    assert sort[0] == "Copy-as-Decode line, directives decoded" and sort[-1].endswith("(upper bound)")
    assert "labelAngle" not in str(spec)  # horizontal bars: labels are read level, never rotated


def test_perturbation_chart_marks_the_papers_em():
    from analysis.perturb import PAPER_EM

    assert charts.PAPER_PERTURB_EM == PAPER_EM
    spec = charts.perturbation(_perturbation_table(), "body").to_dict()
    layers = spec["spec"]["layer"]
    rules = [layer for layer in layers if (layer["mark"] if isinstance(layer["mark"], str) else layer["mark"]["type"]) == "rule"]
    assert rules and "paper: 15.48%" in str(spec["datasets"])


def test_wrapped_facets_leave_no_empty_panel():
    """5 panels wrapped 3 a row: every panel has its own x axis, and no axis stands under an empty slot."""
    pytest.importorskip("vl_convert")
    svg = _svg(charts.pilot_curve(_pilot_curve()))
    assert svg.count(">training step<") == len(charts.CURVE_METRICS)
    hist = _svg(charts.span_histogram(_hist(), "line", "body"))
    corpora = _hist().filter(pl.col("framing") != "decl")["corpus"].n_unique()
    assert hist.count(">span length in gold tokens (log2 bins)<") == corpora
