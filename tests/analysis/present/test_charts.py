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
from analysis.present.templates import TEMPLATES
from analysis.present.reports import REPORTS

PAGE_WIDTH = 1200  # the reports' column (analysis.present.shell.PAGE_CSS: main max-width)


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
    assert {(v["corpus"], v["framing"]) for v in values} == {("HEvalFix-Py", "body"), ("pooled (every corpus)", "body")}
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
    book = nbformat.read(TEMPLATES / f"{name}.ipynb", as_version=4)
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
    e2e = e2e_pooled(("HEvalFix-Py", "pooled"), ("pld-earliest-k64", "copy-line-ideal", "copy-token-decoded", "suffix-k64"))
    svgs = {**line_svgs, "bounds_by_kernel": _svg(charts.bounds_by_kernel(long, "line", "ideal")),
            "e2e": _svg(charts.e2e_speedup(e2e, chart_methods(("ar", "pld-earliest-k64", "copy-line-ideal", "copy-token-decoded",
                                                                 "suffix-k64"))))}
    for name, svg in svgs.items():
        assert "…" not in svg, name


def e2e_pooled(pools, methods) -> pl.DataFrame:
    """e2e_pooled.csv rows: every method 2x over 3 cases, CI 1.5-2.5, predicted 2.5x."""
    return pl.DataFrame([{"model": "smollm2-135m", "pool": p, "method": m, "cases": 3, "speedup_pooled": 2.0,
                          "ci_low": 1.5, "ci_high": 2.5, "speedup_with_prompt": 1.8, "predicted_pooled": 2.5}
                         for p in pools for m in methods])


def test_e2e_labels_are_readable_method_names_in_headline_order_with_case_counts():
    e2e = e2e_pooled(("HEvalFix-Py", "ProbeEdit-S"), ("ar", "pld-earliest-k10", "copy-line-ideal", "copy-line-decoded"))
    chart = charts.e2e_speedup(e2e, chart_methods(("ar", "pld-earliest-k10", "copy-line-ideal", "copy-line-decoded")))
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


# ---------------------------------------------------------------- every bar is one row of its table (B1)
# The bounds page once stacked three kernel sources into one bar (13.2 + 66.5 + 65.0 = 144.8x, a number in
# no table): Vega-Lite stacks bars that share a position unless told not to.

def _e2e_summary() -> pl.DataFrame:
    """e2e_pooled.csv rows with a different speedup per method and pool (so a stacked bar would show)."""
    return pl.DataFrame([{"model": m, "pool": c, "method": k, "cases": 3, "speedup_pooled": s, "ci_low": s * 0.8,
                          "ci_high": s * 1.2, "speedup_with_prompt": s * 0.9, "predicted_pooled": s * 1.1}
                         for m in ("smollm2-135m", "qwen2.5-0.5b") for c in ("HEvalFix-Py", "HEvalFix-JS")
                         for k, s in (("copy-line-ideal", 2.5), ("copy-line-decoded", 1.3), ("pld-earliest-k10", 2.0))])


def _pilot_em() -> pl.DataFrame:
    rows = [{"phase": "before", "mode": m, "seed": None, "split": sp, "cases": 33, "exact_match": 0, "em": 0.0,
             "valid": 0.5, "copy_coverage": 0.6} for m in ("program", "rewrite") for sp in ("heldout", "HEvalFix-Py")]
    rows += [{"phase": "after", "mode": m, "seed": s, "split": sp, "cases": 33, "exact_match": 1 + s, "em": (1 + s) / 33,
              "valid": 1.0, "copy_coverage": 0.9}
             for m in ("program", "rewrite") for s in (0, 1) for sp in ("heldout", "HEvalFix-Py")]
    return pl.DataFrame(rows)


def _committed_bounds() -> pl.DataFrame | None:
    import io

    from fixtures import committed_bytes

    raw = committed_bytes("reports/tables/bounds.csv")
    return pl.read_csv(io.BytesIO(raw)) if raw else None


def _bar_charts() -> dict:
    """(chart, the table it draws from, the column its bars plot) of every bar chart of the suite."""
    out = {"bounds": (charts.bounds(_bounds(), "t"), _bounds(), "bound"),
           "span_histogram": (charts.span_histogram(_hist(), "line", "body"), _hist(), "count"),
           "e2e_speedup": (charts.e2e_speedup(_e2e_summary(), chart_methods(("copy-line-ideal", "copy-line-decoded",
                                                                              "pld-earliest-k10"))),
                           _e2e_summary(), "speedup_pooled"),
           "pilot_em": (charts.pilot_em(_pilot_em()), _pilot_em(), "em")}
    committed = _committed_bounds()
    if committed is not None:  # every kernel source of the committed run, as the bounds page draws it
        out["bounds_committed"] = (charts.bounds(committed, "t"), committed, "bound")
    return out


def _layers(node, inherited=None):
    """(mark, encoding, dataset name, title) of every layer of a Vega-Lite spec, with data inherited."""
    if isinstance(node, dict):
        data = node.get("data", {}).get("name", inherited) if isinstance(node.get("data"), dict) else inherited
        if "mark" in node:
            mark = node["mark"]["type"] if isinstance(node["mark"], dict) else node["mark"]
            yield mark, node.get("encoding", {}), data
        for key in ("layer", "spec", "vconcat", "hconcat", "concat"):
            children = node.get(key)
            for child in children if isinstance(children, list) else [children] if children else []:
                yield from _layers(child, data)


def _title(spec: dict) -> str:
    title = spec.get("title", "")
    return title.get("text", "") if isinstance(title, dict) else str(title)


def test_no_bar_chart_stacks_unless_it_says_so():
    import vl_convert

    for name, (chart, _, _) in _bar_charts().items():
        spec = chart.to_dict()
        if "stacked" in _title(spec).lower():
            continue
        bars = [enc for mark, enc, _ in _layers(spec) if mark in ("bar", "area")]
        assert bars, name
        for enc in bars:
            quantitative = [ch for ch in enc.values() if isinstance(ch, dict) and ch.get("type") == "quantitative"]
            assert quantitative and all("stack" in ch and ch["stack"] is None for ch in quantitative), (name, enc)
        compiled = vl_convert.vegalite_to_vega(chart.to_json())
        stacks = re.findall(r'"type":\s*"stack"', __import__("json").dumps(compiled))
        assert not stacks, f"{name}: the compiled chart stacks {len(stacks)} times"


def test_every_plotted_bar_value_is_in_the_table_it_draws_from():
    for name, (chart, table, column) in _bar_charts().items():
        spec = chart.to_dict()
        datasets = spec["datasets"]
        table_values = {round(float(v), 9) for v in table[column].drop_nulls().to_list()}
        checked = 0
        for mark, enc, data in _layers(spec):
            if mark != "bar":
                continue
            fields = [ch["field"] for ch in enc.values() if isinstance(ch, dict) and ch.get("type") == "quantitative"]
            for row in datasets[data]:
                for f in fields:
                    assert round(float(row[f]), 9) in table_values, f"{name}: a bar plots {row[f]} ({f}), in no row of its table"
                    checked += 1
        assert checked, name
        for marks in _rendered_bar_marks(chart):  # drawn from the zero line: its length is its own value
            bottoms = {round(item.get("y2", item["y"] + item["height"]), 6) for item in marks}
            lefts = {round(item["x"], 6) for item in marks}
            assert len(bottoms) == 1 or len(lefts) == 1, f"{name}: bars start at {len(bottoms)} heights (stacked)"


def _rendered_bar_marks(chart) -> list[list[dict]]:
    """The drawn bars of a chart (Vega's scenegraph), one list per bar layer and panel."""
    import vl_convert

    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("marktype") == "rect" and node.get("role") == "mark":
                items = [i for i in node.get("items", []) if i.get("ariaRoleDescription") == "bar"]
                if items:
                    found.append(items)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(vl_convert.vegalite_to_scenegraph(chart.to_json()))
    return found


def test_a_chart_refuses_two_rows_at_one_bar_position():
    doubled = pl.concat([_bounds(), _bounds().with_columns(bound=pl.lit(5.0))])
    with pytest.raises(ValueError, match="more than one row"):
        charts.bounds(doubled, "t")


def test_the_bounds_chart_has_one_row_of_panels_per_kernel_source():
    spec = charts.bounds(_bounds(), "t").to_dict()
    assert spec["facet"]["row"]["field"] == "kernel"
    assert {v["kernel"] for v in _values(charts.bounds(_bounds(), "t"))} == {"fit (eager AR)", "paper (A100, bf16)"}


def test_kernel_names_never_repeat_the_loop():
    frame = pl.DataFrame({"kernel_source": ["fit", "paper", "h200/qwen2.5-7b/eager", "h200-devtime/qwen2.5-7b"],
                          "baseline": ["eager", "paper (A100, bf16)", "eager", "device_time"]})
    assert frame.select(charts.kernel_name())["kernel"].to_list() == [
        "fit (eager AR)", "paper (A100, bf16)", "h200/qwen2.5-7b/eager", "h200-devtime/qwen2.5-7b"]


# ---------------------------------------------------------------- one colour per series on every page (C4)

def _colour_scales(chart) -> list[dict[str, str]]:
    """label -> colour of every colour channel of a chart."""
    out = []
    for _, enc, _ in _layers(chart.to_dict()):
        colour = enc.get("color")
        if isinstance(colour, dict) and "field" in colour:
            scale = colour.get("scale", {})
            out.append(dict(zip(scale.get("domain", []), scale.get("range", []))))
    return out


def _with_comparison(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(comparison=pl.when(pl.col("baseline") == "eager").then(pl.lit("eager/eager"))
                              .otherwise(pl.lit("graph/eager")), judged=pl.col("baseline") == "eager")


def test_every_colour_channel_takes_the_shared_map():
    charts_ = {**{k: v[0] for k, v in _bar_charts().items()}, **_line_charts(),
               "coverage": charts.coverage_by_corpus(pl.DataFrame([
                   {"corpus": c, "framing": "body", "level": lv, "coverage": 0.8, "ci_low": 0.7, "ci_high": 0.9}
                   for c in ("HEvalFix-Py", "ProbeEdit-S") for lv in ("line", "token")]), "body"),
               "bounds_by_kernel": charts.bounds_by_kernel(_bounds(), "line", "ideal")}
    for name, chart in charts_.items():
        scales = _colour_scales(chart)
        assert scales and all(scales), f"{name}: a colour channel without the shared scale"


def test_one_series_keeps_its_colour_whatever_else_the_chart_holds():
    """The index's H200 chart (judged lines) and the kernel page's (every source, device time too) drew the
    7B eager line red on one and green on the other."""
    h200 = _with_comparison(_speedups())
    devtime = h200.filter(pl.col("baseline") == "eager").with_columns(
        baseline=pl.lit("device_time"), prefill=pl.lit("device_time"), comparison=pl.lit("device/device"),
        kernel_source=pl.format("h200-devtime/{}", pl.col("model")))
    index = _colour_scales(charts.kernel_speedup(charts.judged_only(h200), "H200"))[0]
    page = _colour_scales(charts.kernel_speedup(pl.concat([h200, devtime]), "H200"))[0]
    shared = set(index) & set(page)
    assert "qwen2.5-7b, eager (eager/eager)" in shared
    assert all(index[k] == page[k] for k in shared), {k: (index[k], page[k]) for k in shared}
    assert len(set(page.values())) == len(page)  # no two series of one chart share a colour
    assert "qwen2.5-7b, static_compiled (graph/eager, not judged)" in page  # the comparison is named, not hidden
    # the same model and loop on the bounds chart (kernel names) is the same colour
    from analysis.present.colours import colour_of

    assert colour_of("h200/qwen2.5-7b/eager") == page["qwen2.5-7b, eager (eager/eager)"]
    assert colour_of("h200-devtime/qwen2.5-7b") == page["qwen2.5-7b, device_time (device/device)"]


def test_a_second_gpu_source_gets_its_own_colours_without_a_colour_edit():
    """Architecture review item 3: colours were keyed by model and loop, so a new GPU's 7B eager line took the H200's
    colour (and the kernel chart merged the two into one series). A source named only in params (`h100/...`) now
    draws its own series in a darker shade of the same hue, the H200 lines keep theirs, and the bounds chart's name
    and the kernel chart's label of one source are one colour."""
    from analysis.present.colours import colour_of

    h200 = _with_comparison(_speedups())
    h100 = h200.with_columns(kernel_source=pl.col("kernel_source").str.replace("^h200/", "h100/"),
                             speedup=pl.col("speedup") * 0.8)
    alone = _colour_scales(charts.kernel_speedup(h200, "H200"))[0]
    both = _colour_scales(charts.kernel_speedup(pl.concat([h200, h100]), "two GPUs"))[0]
    assert "h100: qwen2.5-7b, eager (eager/eager)" in both and "h200: qwen2.5-7b, eager (eager/eager)" in both
    assert len(set(both.values())) == len(both)  # no two series of one chart share a colour
    assert both["h200: qwen2.5-7b, eager (eager/eager)"] == alone["qwen2.5-7b, eager (eager/eager)"]
    assert colour_of("h100/qwen2.5-7b/eager") == both["h100: qwen2.5-7b, eager (eager/eager)"]
    assert colour_of("h100/qwen2.5-7b/eager") != colour_of("h200/qwen2.5-7b/eager")
    assert colour_of("h100-devtime/qwen2.5-7b") != colour_of("h200-devtime/qwen2.5-7b")


def test_a_chart_of_unknown_series_still_gets_distinct_colours():
    from analysis.present.colours import palette

    labels = ["HEvalFix-Py", "my-corpus-a", "my-corpus-b", "my-corpus-c"]
    colours = palette(labels)
    assert len(set(colours)) == len(labels) and colours[0] == palette(["HEvalFix-Py"])[0]


def test_the_stand_in_note_appears_only_where_the_stand_in_is_drawn():
    """C10: a one-off run of the user's own corpora had '(ProbeEdit-S is a stand-in)' in its chart titles."""
    own = _hist().filter(pl.col("corpus") == "CommitEdits-click")
    assert "stand-in" not in _title(charts.span_histogram(own, "line", "body").to_dict())
    assert "stand-in" in _title(charts.span_histogram(_hist(), "line", "body").to_dict())
    assert charts.stand_in_note(["Pairs-a"]) == "" and "stand-in" in charts.stand_in_note(["ProbeEdit-S"])
