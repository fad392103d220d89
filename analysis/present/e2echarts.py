"""The e2e page's acceptance chart (a sibling of analysis.present.charts, whose helpers it uses): how many draft
tokens each forward of a speculative method accepted, over the measured cases."""

from __future__ import annotations

import polars as pl

from analysis.present.charts import HEIGHT, PANEL, colour_channel, readable


def acceptance_chart(rows: pl.DataFrame, title: str):
    """Forwards by draft tokens accepted (analysis.results.e2e.acceptance_rows: buckets 0, 1, 2-3, 4-7, ...), as a
    share of each method's forwards, one panel per method, a bar per model; None when no method drafted."""
    import altair as alt

    if rows.is_empty():
        return None
    order = rows.sort("bucket_order")["accepted"].unique(maintain_order=True).to_list()
    bars = alt.Chart(rows.to_pandas()).mark_bar().encode(
        x=alt.X("accepted:N", sort=order, title="draft tokens accepted by a forward", axis=alt.Axis(labelAngle=0)),
        xOffset="model:N",
        y=alt.Y("share:Q", title="share of the method's forwards", axis=alt.Axis(format="%")),
        color=colour_channel("model", rows["model"], legend=alt.Legend(orient="bottom", labelLimit=0)),
        tooltip=["model", "label", "accepted", "forwards", alt.Tooltip("share:Q", format=".1%")])
    panels = bars.properties(width=PANEL, height=HEIGHT - 60).facet(
        facet=alt.Facet("label:N", title=None, header=alt.Header(labelLimit=0)), columns=2)
    return readable(panels.resolve_axis(x="independent").properties(title=title))
