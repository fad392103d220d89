"""The charts of the engine page (a sibling of analysis.present.charts, whose helpers they use): measured in a real
serving engine against AR per load, and measured against the simulator's prediction."""

from __future__ import annotations

import polars as pl

from analysis.present.charts import HEIGHT, PANEL, readable


def engine_vs_simulator(table: pl.DataFrame, title: str):
    """Measured in the engine against predicted by the simulator: output tokens/s per method (colour) and load
    (shape), one panel per step-cost fit, on the y = x line."""
    import altair as alt

    data = table.select("fit", "method", pl.col("concurrency").cast(pl.String).alias("concurrency"),
                        "output_throughput_measured", "output_throughput_predicted")
    lo = float(min(data["output_throughput_measured"].min(), data["output_throughput_predicted"].min())) * 0.8
    hi = float(max(data["output_throughput_measured"].max(), data["output_throughput_predicted"].max())) * 1.25
    scale = alt.Scale(type="log", domain=[lo, hi])
    diagonal = pl.DataFrame({"x": [lo, hi], "y": [lo, hi]}).to_pandas()
    panels = []
    for fit in data["fit"].unique(maintain_order=True).to_list():
        points = alt.Chart(data.filter(pl.col("fit") == fit).to_pandas()).mark_point(size=70, filled=True).encode(
            x=alt.X("output_throughput_measured:Q", scale=scale, title="measured in vLLM: output tokens/s"),
            y=alt.Y("output_throughput_predicted:Q", scale=scale, title="simulated: output tokens/s"),
            color=alt.Color("method:N", legend=alt.Legend(orient="bottom", labelLimit=0, columns=4)),
            shape=alt.Shape("concurrency:N", title="concurrency"),
            tooltip=["method", "concurrency", "output_throughput_measured", "output_throughput_predicted"])
        line = alt.Chart(diagonal).mark_line(color="gray", strokeDash=[3, 3]).encode(x="x:Q", y="y:Q")
        panels.append((line + points).properties(width=PANEL, height=HEIGHT, title=f"step-cost fit: {fit}"))
    return readable(alt.hconcat(*panels).properties(title=title))


def engine_speedup(speedups: pl.DataFrame, title: str):
    """Measured in the engine: each method's output tokens/s over AR against concurrency, with the paired
    request-bootstrap interval of the latency ratio."""
    import altair as alt

    data = speedups.filter(pl.col("method") != "ar").to_pandas()
    base = alt.Chart(data)
    x = alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2), title="concurrency (requests in flight)")
    color = alt.Color("method:N", legend=alt.Legend(orient="bottom", labelLimit=0, columns=4))
    lines = base.mark_line(point=True).encode(x=x, y=alt.Y("throughput_over_ar:Q", scale=alt.Scale(type="log"),
                                                           title="output tokens/s over AR (x)"), color=color)
    bars = base.mark_errorbar().encode(x=x, y=alt.Y("ci_low:Q", title="output tokens/s over AR (x)"), y2="ci_high:Q",
                                       color=color)
    one = base.mark_rule(color="gray", strokeDash=[2, 2]).encode(y=alt.datum(1.0))
    return readable((one + bars + lines).properties(width=PANEL, height=HEIGHT, title=title))
