"""Every altair chart of the suite. Functions take tables and plain labels and return a chart; stage
modules save them (analysis.io.save_chart), notebooks display them."""

from __future__ import annotations

import polars as pl

from analysis.layout import POOLED, framing_filter

STAND_IN = "ProbeEdit-S is a stand-in"


def span_histogram(hist: pl.DataFrame, level: str, framing: str):
    import altair as alt

    data = hist.filter((pl.col("level") == level) & framing_filter(framing))
    order = data.sort("bin")["range"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(data.to_pandas())
        .mark_bar()
        .encode(
            x=alt.X("range:O", sort=order, title="span length in gold tokens (log2 bins)"),
            y=alt.Y("count:Q", title="spans"),
            color=alt.Color("kind:N", title="op"),
            xOffset="kind:N",
            column=alt.Column("corpus:N", title=None),
        )
        .properties(width=220, height=180, title=f"{level}-level oracle spans ({framing} framing; {STAND_IN})")
    )


def bounds(table: pl.DataFrame, title: str, framing: str = "body"):
    import altair as alt

    data = table.filter(framing_filter(framing)).to_pandas()
    base = alt.Chart(data).encode(x=alt.X("corpus:N", title=None), xOffset="variant:N")
    bars = base.mark_bar().encode(y=alt.Y("bound:Q", title="closed-form speedup (x)"), color="variant:N")
    errs = base.mark_errorbar().encode(y=alt.Y("ci_low:Q", title="closed-form speedup (x)"), y2="ci_high:Q")
    return (bars + errs).properties(width=260, height=220).facet(
        column=alt.Column("level:N", title=None), row=alt.Row("baseline:N", title="AR baseline")
    ).properties(title=title)


def perturbation(table: pl.DataFrame, framing: str = "body"):
    import altair as alt

    per_corpus = table.filter(pl.col("corpus") != POOLED).filter(framing_filter(framing))
    pooled = table.filter((pl.col("corpus") == POOLED) & (pl.col("framing") == framing))
    data = pl.concat([per_corpus, pooled]).to_pandas()
    return (
        alt.Chart(data).mark_line(point=True)
        .encode(x=alt.X("rate:Q", title="share of copy spans perturbed"),
                y=alt.Y("em:Q", title="exact match", scale=alt.Scale(domain=[0, 1])),
                color=alt.Color("corpus:N"), strokeDash="level:N")
        .properties(width=200, height=180)
        .facet(column=alt.Column("kind:N", title="perturbation"))
        .properties(title=f"EM under off-by-one span noise ({framing} framing; {STAND_IN})")
    )


def kernel_speedup(speedups: pl.DataFrame, note: str):
    import altair as alt

    data = speedups.select("model", "dtype", "device", "context", "n", "baseline", "speedup", "speedup_q25", "speedup_q75")
    ns = sorted(set(data["n"].to_list()))
    ideal = pl.DataFrame({"n": ns, "speedup": [float(n) for n in ns], "baseline": ["ideal (speedup = N)"] * len(ns)})
    base = alt.Chart(data.to_pandas())
    x = alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="N (tokens copied)")
    y = alt.Y("speedup:Q", scale=alt.Scale(type="log"), title="T_ar(N) / T_prefill(N)")
    lines = base.mark_line(point=True).encode(x=x, y=y, color=alt.Color("baseline:N", title="AR baseline"),
                                              strokeDash=alt.StrokeDash("context:N", title="context c"))
    bands = base.mark_errorbar().encode(x=x, y=alt.Y("speedup_q25:Q", title=""), y2="speedup_q75:Q",
                                        color="baseline:N")
    ideal_line = alt.Chart(ideal.to_pandas()).mark_line(strokeDash=[4, 4], color="gray").encode(x=x, y=y)
    title = f"Copy by one prefill vs N decode steps ({note})"
    return (ideal_line + bands + lines).properties(width=460, height=300, title=title)


def e2e_speedup(summary: pl.DataFrame, methods: tuple[str, ...]):
    import altair as alt

    data = summary.to_pandas()
    base = alt.Chart(data).encode(x=alt.X("method:N", sort=list(methods), title=None), xOffset="model:N")
    bars = base.mark_bar().encode(y=alt.Y("speedup_total:Q", title="measured speedup over AR (x)"), color="model:N")
    pred = base.mark_tick(color="black", thickness=2, size=18).encode(y="predicted:Q")
    return (bars + pred).properties(width=220, height=200).facet(column=alt.Column("corpus:N", title=None)).properties(
        title="Measured end to end (bars) vs closed-form prediction for the same cases (ticks)")
