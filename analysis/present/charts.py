"""Every altair chart of the suite, in one place.

Each function takes a table that is already filtered (by the stage's settings or the notebook's parameters) plus
those parameters as plain labels, and returns a chart: stage modules save it (analysis.pipeline.io.save_chart),
notebooks display it; the index's decision charts are in analysis.present.decisioncharts, on these helpers. No chart
code lives anywhere else, so a report and the figure a stage saves cannot draw the same data two ways. Sizes are for
a laptop page (a 1200 px column): a facet wraps its panels (`WRAP` a row), single panels at most `WIDE` px.
"""

from __future__ import annotations

import textwrap

import polars as pl

from analysis.pooling import POOLED, POOLING_LABELS, framing_filter, pooling_label  # noqa: F401 (re-exported)
from analysis.pooling import STAND_IN as STAND_INS
from analysis.errors import ParamsError
from analysis.present.colours import ROLE_DASHES, device_prefixes, method_palette, palette
from analysis.results.e2e import distinct_pools
from analysis.rivals.methods import parse_method

STAND_IN = "ProbeEdit-S is a stand-in"
WIDE, PANEL, HEIGHT, WRAP = 760, 300, 220, 3  # a full-width panel, a facet's panel, a height, panels a row


def stand_in_note(corpora) -> str:
    """'; ProbeEdit-S is a stand-in' for a title whose chart draws ProbeEdit-S, else '' (a one-off run of the
    user's own corpora has no stand-in to explain, C10)."""
    return f"; {STAND_IN}" if set(STAND_INS) & {str(c) for c in corpora} else ""


def _alt():
    import altair as alt

    return alt


def _framed(data: pl.DataFrame, framing: str | None) -> pl.DataFrame:
    return data if framing in (None, "all") or "framing" not in data.columns else data.filter(framing_filter(framing))


def _titled(chart, title: str):
    return chart.properties(title=title)


def _wrap(chart, field: str, columns: int = WRAP, title=None):
    """Facet `chart` by `field`, `columns` panels a row. Each panel draws its own x axis: with a shared
    one Vega-Lite puts the axis of a column whose last row is empty under that empty slot (an orphan
    panel with an axis and no data)."""
    alt = _alt()
    return chart.facet(facet=alt.Facet(field, title=title), columns=columns).resolve_axis(x="independent")


def colour_channel(field: str, values, **kwargs):
    """A colour channel on `field` whose colours come from the shared map (analysis.present.colours): the same
    series is the same colour on every page, whatever else the chart holds."""
    alt = _alt()
    labels = sorted({str(v) for v in values if v is not None})
    return alt.Color(f"{field}:N", scale=alt.Scale(domain=labels, range=palette(labels)), **kwargs)


def _dash_legend(title: str | None):
    """A legend for a strokeDash channel that draws each entry as a short dashed stroke (the default
    draws identical filled dots)."""
    return _alt().Legend(title=title, symbolType="stroke", symbolStrokeWidth=2, symbolSize=600,
                         symbolStrokeColor="#333", labelLimit=0)


def _dashed_lines(base, dash, **encoding):
    """Lines whose dash is a data channel, with their points as a layer of their own: `point=True` would
    make the dash legend's symbols filled points with no stroke, so its dashes would not show."""
    lines = base.mark_line().encode(strokeDash=dash, **encoding)
    points = base.mark_point(filled=True, size=30).encode(**encoding)
    return lines + points


def _series(data: pl.DataFrame, columns: list[str], sep: str = ", ") -> pl.Expr:
    """One label from the identity columns that vary in `data` (the first column always), so a legend
    names every series and never merges two."""
    varying = [c for i, c in enumerate(columns) if c in data.columns and (i == 0 or data[c].n_unique() > 1)]
    return pl.concat_str([pl.col(c).cast(pl.Utf8) for c in varying], separator=sep)


TITLE_CHARS = 110  # a longer one-line title widens the whole SVG past the chart (a 1,537 px kernel figure)


def wrapped_title(text: str, width: int = TITLE_CHARS) -> list[str]:
    """A title in lines of at most `width` characters, broken at spaces."""
    return textwrap.wrap(text, width=width, break_long_words=False) or [text]


def readable(chart):
    """Fonts a laptop reader can read at 100% zoom (altair's defaults are 10-11 px), and a long title wrapped onto
    lines, so the figure is as wide as its chart. Applied once, to the top-level chart each public function
    returns (a composed chart cannot hold a config)."""
    title = getattr(chart, "title", None)
    if isinstance(title, str) and len(title) > TITLE_CHARS:
        chart = chart.properties(title=wrapped_title(title))
    return (chart.configure_axis(labelFontSize=12, titleFontSize=13).configure_legend(labelFontSize=12, titleFontSize=13)
            .configure_header(labelFontSize=13, titleFontSize=13).configure_title(fontSize=15, anchor="start"))


# ---------------------------------------------------------------- spans and coverage


def span_histogram(hist: pl.DataFrame, level: str, framing: str):
    """Copy and gen span lengths at one level, one panel per corpus (wrapped)."""
    return readable(_span_histogram(hist, level, framing))


def _span_histogram(hist: pl.DataFrame, level: str, framing: str):
    alt = _alt()
    data = unstacked(_framed(hist.filter(pl.col("level") == level), framing), ["corpus", "range", "kind"],
                     "span_histogram")
    order = data.sort("bin")["range"].unique(maintain_order=True).to_list()
    chart = (
        alt.Chart(data.to_pandas()).mark_bar()
        .encode(x=alt.X("range:O", sort=order, title="span length in gold tokens (log2 bins)"),
                y=alt.Y("count:Q", title="spans", stack=None), color=colour_channel("kind", data["kind"], title="op"), xOffset="kind:N")
        .properties(width=PANEL, height=HEIGHT - 40)
    )
    chart = _wrap(chart, "corpus:N").resolve_scale(y="independent")  # token-level counts differ by corpus
    return _titled(chart, f"{level}-level oracle spans ({framing} framing{stand_in_note(data['corpus'])})")


def span_histograms(hist: pl.DataFrame, levels: list[str], framing: str):
    """The coverage report's histograms: one span_histogram per level, stacked."""
    return readable(_alt().vconcat(*(_span_histogram(hist, level, framing) for level in levels)))


def coverage_by_corpus(cov: pl.DataFrame, framing: str):
    """Coverage per corpus with its 95% CI, one colour per level (pooled rows included if present)."""
    alt = _alt()
    data = _framed(cov, framing).to_pandas()
    base = alt.Chart(data).encode(y=alt.Y("corpus:N", title=None), color=colour_channel("level", data["level"]), yOffset="level:N")
    x = alt.X("coverage:Q", title="gold tokens produced by copies", axis=alt.Axis(format="%"), scale=alt.Scale(zero=False))
    points = base.mark_point(filled=True, size=60).encode(x=x)
    errs = base.mark_errorbar(ticks=True).encode(x=alt.X("ci_low:Q", title="", scale=alt.Scale(zero=False)), x2="ci_high:Q")
    return readable((errs + points).properties(width=WIDE - 200, height=max(HEIGHT - 60, 34 * len(set(data["corpus"]))),
                                               title=f"Copy coverage with 95% CIs ({framing} framing)"))


# ---------------------------------------------------------------- bounds


def kernel_name(kernel_source: pl.Expr | str = "kernel_source", baseline: pl.Expr | str = "baseline") -> pl.Expr:
    """One label per kernel source: the source's own name where it names its AR loop (h200/qwen2.5-7b/eager),
    else the source with its loop in brackets (`fit (eager AR)`, `paper (A100, bf16)`), never the loop twice."""
    source = pl.col(kernel_source) if isinstance(kernel_source, str) else kernel_source
    loop = pl.col(baseline) if isinstance(baseline, str) else baseline
    return (pl.when(loop.str.starts_with(source)).then(loop)
            .when(source.str.ends_with(pl.concat_str([pl.lit("/"), loop]))).then(source)
            .when(loop == "device_time").then(source)
            .otherwise(pl.concat_str([source, pl.lit(" ("), loop, pl.lit(" AR)")])).alias("kernel"))


def unstacked(data: pl.DataFrame, keys: list[str], chart: str) -> pl.DataFrame:
    """`data` when each bar position (`keys`: facet, axis and offset fields) holds one row; otherwise a
    ValueError naming the repeated position. Two rows at one position would be summed into a bar
    that is in no table (Vega-Lite stacks them) or drawn over each other."""
    repeated = data.group_by(keys).len().filter(pl.col("len") > 1)
    if repeated.height:
        first = repeated.row(0, named=True)
        raise ValueError(f"chart {chart}: {repeated.height} bar positions hold more than one row, e.g. "
                         + ", ".join(f"{k}={first[k]!r}" for k in keys) + f" ({first['len']} rows)")
    return data


def bounds(table: pl.DataFrame, title: str, framing: str = "body"):
    """Bound per corpus and variant with CI bars; one panel per level (columns) and per kernel source (rows,
    each its own y scale: the paper kernel's bounds are an order of magnitude above a CPU's). Every bar is
    one row of `table`: nothing is stacked."""
    alt = _alt()
    data = pooling_label(_framed(table, framing)).with_columns(kernel=kernel_name())
    data = unstacked(data, ["kernel", "level", "corpus", "variant"], "bounds")
    base = alt.Chart(data.to_pandas()).encode(x=alt.X("corpus:N", title=None, axis=alt.Axis(labelAngle=-30)),
                                              xOffset="variant:N")
    bars = base.mark_bar().encode(y=alt.Y("bound:Q", title="closed-form speedup (x)", stack=None),
                                  color=colour_channel("variant", data["variant"]))
    errs = base.mark_errorbar().encode(y=alt.Y("ci_low:Q", title="closed-form speedup (x)"), y2="ci_high:Q")
    return readable((bars + errs).properties(width=PANEL + 60, height=HEIGHT - 60)
                    .facet(column=alt.Column("level:N", title=None),
                           row=alt.Row("kernel:N", title="kernel source", header=alt.Header(labelLimit=0)))
                    .resolve_scale(y="independent").properties(title=title))


def bounds_by_kernel(table: pl.DataFrame, level: str, variant: str):
    """One level and variant: each corpus's bound under each kernel source, log scale, with CIs."""
    alt = _alt()
    data = pooling_label(table.filter((pl.col("level") == level) & (pl.col("variant") == variant)))
    data = data.with_columns(kernel=kernel_name())
    base = alt.Chart(data.to_pandas()).encode(
        y=alt.Y("corpus:N", title=None, axis=alt.Axis(labelLimit=0)),
        color=colour_channel("kernel", data["kernel"], title="kernel", legend=alt.Legend(orient="bottom", columns=2, labelLimit=0)),
        yOffset="kernel:N")
    x = alt.X("bound:Q", title="closed-form speedup (x, log scale)", scale=alt.Scale(type="log"))
    points = base.mark_point(filled=True, size=60).encode(x=x)
    errs = base.mark_errorbar(ticks=True).encode(x=alt.X("ci_low:Q", title="", scale=alt.Scale(type="log")), x2="ci_high:Q")
    rows = data["corpus"].n_unique() * max(1, data["kernel"].n_unique())
    return readable((errs + points).properties(width=WIDE - 220, height=max(HEIGHT - 60, 14 * rows),
                                               title=f"Bound per corpus and kernel ({level} level, {variant}), 95% CI"))


# ---------------------------------------------------------------- corpora


def _distribution(sizes: pl.DataFrame, column: str, title: str, log: bool = False):
    alt = _alt()
    scale = alt.Scale(type="symlog") if log else alt.Scale(zero=True)
    return (alt.Chart(sizes.select("corpus", column).to_pandas()).mark_boxplot(extent=1.5, size=16)
            .encode(y=alt.Y("corpus:N", title=None), x=alt.X(f"{column}:Q", title=title, scale=scale),
                    color=colour_channel("corpus", sizes["corpus"], legend=None))
            .properties(width=(WIDE - 160) // 2, height=max(120, 30 * sizes["corpus"].n_unique())))


def corpus_sizes(sizes: pl.DataFrame):
    """File length (lines, tokens) and edit size (changed lines, generated tokens) per corpus."""
    alt = _alt()
    files = alt.hconcat(_distribution(sizes, "source_lines", "source file lines"),
                        _distribution(sizes, "source_tokens", "source file tokens"))
    edits = alt.hconcat(_distribution(sizes, "changed_lines", "changed lines (gen, line level, log)", log=True),
                        _distribution(sizes, "gen_tokens", "gold tokens from gen spans (log)", log=True))
    return readable(alt.vconcat(files.properties(title="File length"), edits.properties(title="Edit size")).properties(
        title="Per-case distributions" + (f" ({STAND_IN})" if stand_in_note(sizes["corpus"]) else "")))


# ---------------------------------------------------------------- per-case distributions


def share_at_least(frame: pl.DataFrame, value: str, title: str, log: bool = False, dash: str | None = None,
                   colour: str = "corpus"):
    """For each corpus (`colour`; `dash`: a second series such as the bound's variant), the share of its cases
    whose `value` is at least x: a step line read as "this share of edits gets x or more". `frame` holds one
    row per case, with `corpus`, `value` and `share` (analysis.present.distributions.survival)."""
    alt = _alt()
    x = alt.X(f"{value}:Q", title=title, scale=alt.Scale(type="log") if log else alt.Scale(zero=False))
    y = alt.Y("share:Q", title="share of cases at least x", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%"))
    base = alt.Chart(frame.to_pandas())
    encoding = {"x": x, "y": y, "color": alt.Color(f"{colour}:N", legend=alt.Legend(labelLimit=0))}
    if dash is not None:
        encoding["strokeDash"] = alt.StrokeDash(f"{dash}:N", legend=_dash_legend(dash))
        encoding["detail"] = alt.Detail(f"{dash}:N")
    lines = base.mark_line(interpolate="step-before").encode(**encoding)
    return readable(lines.properties(width=WIDE - 160, height=HEIGHT + 40, title=title + " per case"))


# ---------------------------------------------------------------- perturbation


# the paper's pooled EM under span noise (analysis.perturb.PAPER_EM; kept here so the stages that draw
# charts need not import the perturbation code; tests/analysis/present/test_charts.py checks the two agree)
PAPER_PERTURB_EM = 0.1548


def perturbation(table: pl.DataFrame, framing: str = "body", level: str | None = None):
    """EM against perturbation rate, one panel per kind; pooled rows only at `framing`. One line per
    (corpus, level); a rule marks the paper's 15.48%."""
    alt = _alt()
    if level not in (None, "all"):
        table = table.filter(pl.col("level") == level)
    per_corpus = table.filter(pl.col("corpus") != POOLED).filter(framing_filter(framing))
    pooled = table.filter((pl.col("corpus") == POOLED) & (pl.col("framing") == framing)).with_columns(
        corpus=pl.lit(f"{POOLED} (every corpus)"))  # the stage's pool: named, beside the paper's 3-corpus pool
    data = pl.concat([per_corpus, pooled]).to_pandas()
    y = alt.Y("em:Q", title="exact match", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%"))
    lines = _dashed_lines(alt.Chart(data), alt.StrokeDash("level:N", legend=_dash_legend("level")),
                          x=alt.X("rate:Q", title="share of copy spans perturbed"), y=y,
                          color=colour_channel("corpus", data["corpus"], legend=alt.Legend(labelLimit=0)),
                          detail=[alt.Detail("framing:N"), alt.Detail("level:N")])
    paper = pl.DataFrame({"em": [PAPER_PERTURB_EM], "label": [f"paper: {PAPER_PERTURB_EM:.2%}"]}).to_pandas()
    rule = alt.Chart(paper).mark_rule(color="#9a1c1c", strokeDash=[2, 2]).encode(y=alt.Y("em:Q"))
    text = (alt.Chart(paper).mark_text(align="right", baseline="bottom", dx=-2, dy=-2, color="#9a1c1c")
            .encode(y=alt.Y("em:Q"), x=alt.value(PANEL - 62), text="label:N"))
    chart = _wrap(alt.layer(*lines.layer, rule, text, data=data).properties(width=PANEL - 60, height=HEIGHT - 40), "kind:N",
                  columns=WRAP + 1, title="perturbation")
    where = f"{level} level, " if level not in (None, "all") else ""
    return readable(_titled(chart, f"EM under off-by-one span noise ({where}{framing} framing"
                                   f"{stand_in_note(per_corpus['corpus'])})"))


# ---------------------------------------------------------------- kernels


SERIES_COLUMNS = ("kernel_source", "model", "dtype", "device", "baseline", "prefill", "context")


def _kernel_series(speedups: pl.DataFrame) -> pl.DataFrame:
    """`series` for colour and `c` for the dash: one line per (model, loop, context), never two models joined
    into one path. The label is `model, AR loop` (dtype/device where they vary) and, where the table says how
    the two sides were built, `(decode loop/prefill)` with `not judged` for a comparison not built alike;
    without that column the prefill is named where it varies."""
    prefix = (pl.col("kernel_source").replace_strict(device_prefixes(speedups["kernel_source"]), default="")
              if "kernel_source" in speedups.columns else pl.lit(""))  # two devices: two series, named by device
    if "comparison" in speedups.columns:
        varying = pl.concat_str([pl.col("model"), pl.lit(", "), pl.col("baseline").cast(pl.Utf8)]
                                + ([pl.lit(", "), _series(speedups.drop("model"), ["dtype", "device"])]
                                   if any(speedups[c].n_unique() > 1 for c in ("dtype", "device") if c in speedups.columns)
                                   else []))
        judged = pl.col("judged").cast(pl.Boolean) if "judged" in speedups.columns else pl.lit(True)
        side = pl.when(judged).then(pl.format(" ({})", pl.col("comparison"))).otherwise(
            pl.format(" ({}, not judged)", pl.col("comparison")))
        data = speedups.with_columns(series=pl.concat_str([prefix, varying, side]),
                                     judged_label=pl.when(judged).then(pl.lit("judged")).otherwise(pl.lit("not judged")))
    else:
        data = speedups.with_columns(series=_series(speedups, ["model", "baseline", "prefill", "dtype", "device"]),
                                     judged_label=pl.lit("judged"))
    return data.with_columns(c=pl.format("c = {}", pl.col("context")))


def kernel_speedup(speedups: pl.DataFrame, note: str, paper: list[tuple[int, float]] | None = None):
    """T_ar(N) / T_prefill(N) per (model, AR loop) in colour and context as the dash, with the IQR of the
    paired repeats; the thin gray line is speedup = N. A comparison not built alike (a graph-captured loop
    against an eager prefill) is drawn faint and labelled `not judged`: the judged lines lead. `paper`: the paper's (N, speedup) points
    (analysis.latency.model.paper_kernel_points), drawn as labelled diamonds."""
    alt = _alt()
    keep = [c for c in (*SERIES_COLUMNS, "n", "speedup", "speedup_q25", "speedup_q75", "comparison", "judged")
            if c in speedups.columns]
    data = _kernel_series(speedups.select(keep))
    ns = sorted(set(data["n"].to_list()))
    ideal = pl.DataFrame({"n": ns, "speedup": [float(n) for n in ns]})
    base = alt.Chart(data.to_pandas())
    x = alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="N (tokens copied)")
    y = alt.Y("speedup:Q", scale=alt.Scale(type="log"), title="T_ar(N) / T_prefill(N)")
    detail = [alt.Detail(f"{c}:N") for c in SERIES_COLUMNS if c in data.columns]
    color = colour_channel("series", data["series"], title="model, AR loop (decode loop/prefill)",
                    legend=alt.Legend(labelLimit=0, titleLimit=0))
    opacity = alt.Opacity("judged_label:N", scale=alt.Scale(domain=["judged", "not judged"], range=[1.0, 0.35]),
                          legend=None)
    lines = _dashed_lines(base, alt.StrokeDash("c:N", legend=_dash_legend("context")), x=x, y=y, color=color,
                          detail=detail, opacity=opacity)
    bands = base.mark_errorbar().encode(x=x, y=alt.Y("speedup_q25:Q", title=""), y2="speedup_q75:Q",
                                        color=color, detail=detail, opacity=opacity)
    ideal_chart = alt.Chart(ideal.to_pandas())
    ideal_line = ideal_chart.mark_line(color="gray", strokeWidth=1, opacity=0.7).encode(x=x, y=y)
    ideal_text = (alt.Chart(ideal.tail(1).with_columns(label=pl.lit("speedup = N")).to_pandas())
                  .mark_text(align="right", baseline="bottom", dx=-4, color="gray").encode(x=x, y=y, text="label:N"))
    note = note.replace("; dashed: speedup = N", "").replace("dashed: speedup = N", "")
    title = f"Copy by one prefill vs N decode steps ({note}; gray: speedup = N"
    layers = ideal_line + ideal_text + bands + lines
    if paper:
        layers, title = layers + paper_reference(paper, x, y), title + "; red diamonds: the paper, A100 bf16"
    return readable(layers.properties(width=WIDE, height=340, title=title + ")"))


def paper_reference(paper: list[tuple[int, float]], x, y):
    """The paper's kernel figures as labelled points, so "against what" is on the chart and not only in the text."""
    alt = _alt()
    points = pl.DataFrame([{"n": n, "speedup": v, "label": f"paper {v:g}x"} for n, v in paper])
    base = alt.Chart(points.to_pandas())
    marks = base.mark_point(shape="diamond", size=90, filled=True, color="#9a1c1c").encode(x=x, y=y)
    text = base.mark_text(align="left", dx=7, dy=-7, color="#9a1c1c").encode(x=x, y=y, text="label:N")
    return marks + text


def judged_only(speedups: pl.DataFrame) -> pl.DataFrame:
    """The rows whose two sides were built alike (the `judged` column; all rows of a table without it): what
    a headline figure draws."""
    return speedups.filter(pl.col("judged").cast(pl.Boolean)) if "judged" in speedups.columns else speedups


def kernel_roofline(speedups: pl.DataFrame, ceilings: pl.DataFrame):
    """Measured speedups (strongest AR loop), one solid line per (model, context), against roofline ceilings
    min(N, ridge x bytes/param / 2), one dashed line per ceiling (`ceilings`: n, ceiling, label)."""
    alt = _alt()
    x = alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="N (tokens copied)")
    y = alt.Y("speedup:Q", scale=alt.Scale(type="log"), title="T_ar(N) / T_prefill(N)")
    strongest = speedups.filter(pl.col("is_strongest"))
    model = (pl.col("model") + pl.lit(", ")) if "model" in strongest.columns and strongest["model"].n_unique() > 1 else pl.lit("")
    measured = strongest.with_columns(
        label=pl.concat_str([pl.lit("measured here (strongest AR loop), "), model, pl.format("c = {}", pl.col("context"))]))
    measured = measured.select("n", "speedup", "label")
    legend = alt.Legend(orient="bottom", direction="vertical", labelLimit=0)
    colour = colour_channel("label", [*ceilings["label"], *measured["label"]], title=None, legend=legend)
    lines = (alt.Chart(ceilings.rename({"ceiling": "speedup"}).to_pandas()).mark_line(strokeDash=[5, 3])
             .encode(x=x, y=y, color=colour))
    points = alt.Chart(measured.to_pandas()).mark_line(point=True).encode(x=x, y=y, color=colour)
    return readable((lines + points).properties(width=WIDE - 120, height=300,
                                                title="Copy speedup against the roofline ceiling of each machine"))


# ---------------------------------------------------------------- end to end


def e2e_speedup(pooled: pl.DataFrame, methods: list[tuple[str, str]]):
    """Measured pooled speedup over AR (the e2e_pooled table: ratio of summed times) per method, one panel
    per pool (each corpus, HEvalFix, every case): horizontal bars in the order of `methods` ((name, label)
    pairs, analysis.results.e2e.chart_methods: directives decoded first), the case-bootstrap CI as a rule,
    the prediction as a tick, and the case count beside each bar."""
    alt = _alt()
    labels = dict(methods)
    data = distinct_pools(pooled).filter(pl.col("method").is_in(list(labels))).with_columns(
        method_name=pl.col("method").replace_strict(labels, return_dtype=pl.Utf8),
        cases_text=pl.format("{} {}", pl.col("cases"), pl.when(pl.col("cases") == 1).then(pl.lit("case")).otherwise(pl.lit("cases"))))
    order = [label for _, label in methods]
    base = alt.Chart(data.to_pandas()).encode(
        y=alt.Y("method_name:N", sort=order, title=None, axis=alt.Axis(labelLimit=0)), yOffset="model:N")
    bars = base.mark_bar().encode(x=alt.X("speedup_pooled:Q", title="measured speedup over AR (x, pooled)", stack=None),
                                  color=colour_channel("model", data["model"], legend=alt.Legend(orient="bottom", labelLimit=0)),
                                  tooltip=["pool", "method_name", "cases", "speedup_pooled", "ci_low", "ci_high",
                                           "speedup_with_prompt", "predicted_pooled"])
    ci = base.mark_rule(color="#333").encode(x="ci_low:Q", x2="ci_high:Q")
    pred = base.mark_tick(color="black", thickness=2, orient="vertical").encode(x="predicted_pooled:Q")
    text = base.mark_text(align="left", dx=4, fontSize=11).encode(x="ci_high:Q", text="cases_text:N")
    n_pools = max(1, data["pool"].n_unique())
    layered = (bars + ci + pred + text).properties(
        width=PANEL - 60, height=max(HEIGHT - 60, 22 * len(order) * max(1, data["model"].n_unique())))
    return readable(_wrap(layered, "pool:N", columns=min(WRAP, n_pools))
                    .resolve_scale(x="independent")
                    .properties(title="Measured end to end, pooled (bars; rules: case-bootstrap CI; ticks: prediction "
                                      "from each case's own curve; labels: case count)"))


def pilot_loss(losses: pl.DataFrame, window: int = 5):
    """Training loss per step of every pilot adapter, raw (faint) and a trailing mean over `window` steps."""
    alt = _alt()
    data = (losses.sort("mode", "seed", "step")
            .with_columns(smoothed=pl.col("loss").rolling_mean(window, min_samples=1).over("mode", "seed"),
                          adapter=pl.format("{} seed {}", pl.col("mode"), pl.col("seed")))
            .to_pandas())
    base = alt.Chart(data).encode(x=alt.X("step:Q", title="training step (one sequence each)"),
                                  color=colour_channel("adapter", data["adapter"], title=None))
    raw = base.mark_line(opacity=0.25).encode(y=alt.Y("loss:Q", title="loss (mean over loss tokens)"))
    smooth = base.mark_line(strokeWidth=2).encode(y="smoothed:Q", tooltip=["adapter", "step", "loss", "smoothed"])
    return readable((raw + smooth).properties(width=WIDE, height=HEIGHT,
                                              title=f"Pilot training loss (lines: trailing mean of {window} steps)"))


def pilot_em(em: pl.DataFrame):
    """Exact match before and after fine-tuning, per adapter seed and split: bars on a fixed 0-100% axis,
    each labelled with its count ("0/33"), so a run where nothing matched still shows every bar's count."""
    alt = _alt()
    before = pl.lit("before") if em["mode"].n_unique() < 2 else pl.format("before ({})", pl.col("mode"))
    data = em.with_columns(run=pl.when(pl.col("phase") == "before").then(before)
                           .otherwise(pl.format("{} seed {}", pl.col("mode"), pl.col("seed"))),
                           label=pl.format("{}/{}", pl.col("exact_match"), pl.col("cases")))
    data = unstacked(data, ["split", "run"], "pilot_em").to_pandas()
    base = alt.Chart(data).encode(x=alt.X("run:N", title=None))
    bars = base.mark_bar().encode(
        y=alt.Y("em:Q", title="exact match", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]), stack=None),
        color=colour_channel("mode", data["mode"]), tooltip=["split", "run", "cases", "exact_match", "valid", "copy_coverage"])
    text = base.mark_text(dy=-8).encode(y=alt.Y("em:Q"), text="label:N")
    return readable(_wrap(alt.layer(bars, text, data=data).properties(width=PANEL, height=HEIGHT), "split:N")
                    .properties(title="Pilot exact match, before and after fine-tuning (labels: exact / cases)"))


CURVE_METRICS = {"loss": "loss per supervised token (nats)", "directive_accuracy": "directive-token accuracy",
                 "copy_exact": "copy directives exactly right", "gen_exact": "gen spans exactly right",
                 "all_exact": "whole program exactly right"}


def pilot_curve(curve: pl.DataFrame):
    """The teacher-forced held-out learning curve: each metric against training steps, per adapter
    (step 0: the base model)."""
    alt = _alt()
    data = (curve.with_columns(adapter=pl.format("{} seed {}", pl.col("mode"), pl.col("seed")))
            .unpivot(index=["adapter", "step"], on=list(CURVE_METRICS), variable_name="metric")
            .with_columns(metric=pl.col("metric").replace_strict(CURVE_METRICS))
            .drop_nulls("value").to_pandas())
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("step:Q", title="training step"), y=alt.Y("value:Q", title=None),
        color=colour_channel("adapter", data["adapter"], title=None), tooltip=["adapter", "metric", "step", "value"])
    return readable(_wrap(lines.properties(width=PANEL, height=HEIGHT), "metric:N")
                    .resolve_scale(y="independent")
                    .properties(title="Pilot learning curve on the held-out cases (teacher-forced)"))

# ---------------------------------------------------------------- batched serving


def source_label(data: pl.DataFrame) -> pl.DataFrame:
    """`source` as shown: the kernel source and its basis (measured, or extrapolated from batch 1)."""
    return data.with_columns(source=pl.format("{} ({})", pl.col("kernel_source"), pl.col("basis")))


def _families(table: pl.DataFrame) -> dict[str, str]:
    """A family row's family (prompt lookup at its best k at each load: `best_member` names a member there)."""
    if "best_member" not in table.columns:
        return {}
    rows = table.filter(pl.col("best_member").is_not_null()).select("method", "best_member").unique("method")
    out = {}
    for r in rows.iter_rows(named=True):
        try:
            out[r["method"]] = parse_method(r["best_member"]).family
        except ParamsError:
            continue
    return out


def _methodcolour_channel(data: pl.DataFrame, families: dict[str, str], field: str = "method", **kwargs):
    """A colour channel on method names from the one method map (analysis.present.colours.method_palette)."""
    alt = _alt()
    domain, colours = method_palette(data[field].to_list(), families)
    return alt.Color(f"{field}:N", scale=alt.Scale(domain=domain, range=colours), **kwargs)


def _role_dash(roles):
    alt = _alt()
    domain = sorted({str(r) for r in roles if r is not None})
    return alt.StrokeDash("role:N", scale=alt.Scale(domain=domain, range=[ROLE_DASHES.get(r, [1, 0]) for r in domain]),
                          legend=_dash_legend("role"))


# log axes label only where labels do not collide ("100200" was two ticks run together), in SI units
LOG_AXIS = {"labelOverlap": "greedy", "format": "~s", "labelFlush": True}


def serving_speedup(table: pl.DataFrame, title: str):
    """Closed loop: each method's output tokens/s over AR against concurrency, one panel per kernel source."""
    alt = _alt()
    data = source_label(table.filter((pl.col("workload") == "closed") & (pl.col("role") != "baseline")))
    families = _families(data)
    data = data.select("source", "method", "role", "load", "speedup_vs_ar")
    base = alt.Chart(data.to_pandas())
    x = alt.X("load:Q", scale=alt.Scale(type="log", base=2), title="concurrency (requests in flight)",
              axis=alt.Axis(**LOG_AXIS))
    y = alt.Y("speedup_vs_ar:Q", scale=alt.Scale(type="log"), title="output tokens/s over AR (x)")
    color = _methodcolour_channel(data, families, legend=alt.Legend(orient="bottom", labelLimit=0, columns=4))
    lines = _dashed_lines(base, _role_dash(data["role"]), x=x, y=y, color=color)
    one = base.mark_rule(color="gray", strokeDash=[2, 2]).encode(y=alt.datum(1.0))  # same data: a facet needs one
    panel = (one + lines).properties(width=PANEL, height=HEIGHT)
    return readable(_wrap(panel, "source:N", columns=2).properties(title=title))


def serving_throughput_latency(table: pl.DataFrame, title: str):
    """Output tokens/s against p50 latency per method along the concurrency sweep, one panel per source."""
    alt = _alt()
    closed = table.filter(pl.col("workload") == "closed")
    families = _families(closed)
    data = source_label(closed).select("source", "method", "role", "load", "output_tokens_per_s",
                                        latency_ms_p50=pl.col("latency_s_p50") * 1000)
    base = alt.Chart(data.to_pandas())
    x = alt.X("output_tokens_per_s:Q", scale=alt.Scale(type="log"), title="output tokens/s", axis=alt.Axis(**LOG_AXIS))
    y = alt.Y("latency_ms_p50:Q", scale=alt.Scale(type="log"), title="p50 latency (ms)", axis=alt.Axis(**LOG_AXIS))
    color = _methodcolour_channel(data, families, legend=alt.Legend(orient="bottom", labelLimit=0, columns=4))
    chart = _dashed_lines(base.encode(order="load:Q", tooltip=["method", "load"]), _role_dash(data["role"]),
                          x=x, y=y, color=color)
    return readable(_wrap(chart.properties(width=PANEL, height=HEIGHT), "source:N", columns=2)
                    .resolve_scale(x="independent", y="independent").properties(title=title))


def step_cost_residuals(residuals: pl.DataFrame, title: str):
    """Measured against predicted step seconds (log-log) per kernel source; gray: equality."""
    alt = _alt()
    data = residuals.select("kernel_source", "measured_s", "predicted_s")
    top = float(max(data["measured_s"].max(), data["predicted_s"].max()))
    low = float(min(data["measured_s"].min(), data["predicted_s"].min()))
    scale = alt.Scale(type="log")
    points = alt.Chart(data.to_pandas()).mark_point(filled=True).encode(
        x=alt.X("measured_s:Q", scale=scale, title="measured step (s)"),
        y=alt.Y("predicted_s:Q", scale=scale, title="predicted step (s)"),
        color=alt.Color("kernel_source:N", legend=alt.Legend(orient="bottom", labelLimit=0)))
    line = alt.Chart(pl.DataFrame({"measured_s": [low, top], "predicted_s": [low, top]}).to_pandas()).mark_line(
        color="gray").encode(x="measured_s:Q", y="predicted_s:Q")
    return readable((line + points).properties(width=WIDE - 260, height=320, title=title))


# ---------------------------------------------------------------- rivals


def rivals_chart(table: pl.DataFrame, source: str, methods: list[tuple[str, str]]):
    """Speedup over AR per method under one kernel source (the rivals table), one panel per corpus and pool, log
    scale: a point per method, the case-bootstrap CI as a rule, bounds hollow. `methods`: (name, family title) pairs
    in drawing order (analysis.rivals.table.chart_methods: Copy-as-Decode first, prompt lookup's standard policy)."""
    alt = _alt()
    titles = dict(methods)
    data = table.filter((pl.col("kernel_source") == source) & (pl.col("role") != "baseline"))
    # the best rival of a panel is drawn whatever its policy (it may not be among `methods`)
    best = [n for n in best_rivals(data)["method"].unique().sort().to_list() if n not in titles]
    titles.update({n: parse_method(n).spec.title for n in best})
    data = data.filter(pl.col("method").is_in(list(titles))).with_columns(
        panel=pl.when(pl.col("pool") == "corpus").then(pl.col("corpus"))
        .otherwise(pl.format("pooled ({})", pl.col("pool"))),
        family_label=pl.col("method").replace_strict(titles, return_dtype=pl.Utf8),
        bound=pl.col("role") == "bound",
        cases=pl.format("{} cases", pl.col("n_cases")))
    labels = dict(data.select("method", "label").unique().iter_rows())
    order = [labels[name] for name in titles if name in labels]
    axis_title = f"speedup over AR (x, log; {source})"
    x = alt.X("speedup:Q", title=axis_title, scale=alt.Scale(type="log"))
    axis = alt.Axis(labelLimit=340)  # px: a longer label (the hybrid's, 95 characters) ends in an ellipsis
    base = alt.Chart(data.to_pandas()).encode(y=alt.Y("label:N", sort=order, title=None, axis=axis))
    ci = base.mark_rule(color="#555").encode(x=alt.X("ci_low:Q", scale=alt.Scale(type="log"), title=axis_title),
                                             x2="ci_high:Q")
    colour = _methodcolour_channel(data, {}, legend=None)  # the y axis names each method; its colour is its own everywhere
    points = base.mark_point(size=60, strokeWidth=2).encode(
        x=x, color=colour, fill=alt.condition("datum.bound", alt.value("white"), colour),
        tooltip=["panel", "label", "speedup", "ci_low", "ci_high", "cases", "forwards_per_case",
                 "gold_tokens_per_forward"])
    panels = max(1, data["panel"].n_unique())
    layered = (ci + points).properties(width=PANEL - 40, height=max(HEIGHT, 16 * len(order)))
    return readable(_wrap(layered, "panel:N", columns=min(WRAP, panels)).properties(
        title=f"Every method against AR under {source} (points; rules: case-bootstrap 95% CI; hollow: directive "
              "tokens free, an upper bound)"))


def best_rivals(table: pl.DataFrame) -> pl.DataFrame:
    """Per kernel source, corpus and pool of a rivals table, its fastest rival (role `rival`)."""
    keys = ["kernel_source", "corpus", "pool"]
    return (table.filter(pl.col("role") == "rival").sort("speedup", descending=True)
            .group_by(keys, maintain_order=True).first())
