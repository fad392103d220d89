"""The index's decision charts (a sibling of analysis.present.charts, whose helpers they use): Copy-as-Decode's
best deployable variant against each family's fastest setting per corpus at batch 1, and against the best rival
at each load under continuous batching. Colours from the one method map (analysis.present.colours)."""

from __future__ import annotations

import polars as pl

from analysis.present.charts import HEIGHT, LOG_AXIS, WIDE, best_rivals, colour_channel, readable, source_label
from analysis.present.colours import family_colour
from analysis.rivals.methods import family_of


def _family_colour(data: pl.DataFrame, **kwargs):
    """Colour by method family (its label), each family its dark shade of the one method map."""
    import altair as alt

    pairs = sorted(set(zip(data["family_label"].to_list(), data["family"].to_list())))
    return alt.Color("family_label:N", scale=alt.Scale(domain=[p[0] for p in pairs],
                                                       range=[family_colour(p[1]) for p in pairs]), **kwargs)


LEGEND = {"orient": "bottom", "title": None, "labelLimit": 0}


def decision_chart(table: pl.DataFrame, source: str, where: dict[tuple[str, str], str]):
    """The index's decision chart: under one kernel source, per corpus and pool (`where`: (corpus, pool) -> its
    label, in order), each deployable family's fastest member as its speedup over AR (log) with its case-bootstrap
    interval; the best rival ringed. Colours: the family's shade of the one method map."""
    import altair as alt

    rows = table.filter((pl.col("kernel_source") == source) & pl.col("role").is_in(["copy", "rival"]))
    best = (rows.sort("speedup", descending=True).group_by(["corpus", "pool", "family"], maintain_order=True).first())
    rival = best_rivals(rows).select("corpus", "pool", pl.col("method").alias("rival_method"))
    data = best.join(rival, on=["corpus", "pool"], how="left").with_columns(
        best_rival=pl.col("method") == pl.col("rival_method"),
        family_label=pl.col("family").map_elements(lambda f: family_of(f).title, return_dtype=pl.String),
        where=pl.struct("corpus", "pool").map_elements(lambda r: where.get((r["corpus"], r["pool"]), r["corpus"]),
                                                       return_dtype=pl.String))
    data = data.filter(pl.col("where").is_in(list(where.values())))
    order = [w for w in where.values() if w in set(data["where"])]
    axis = f"speedup over AR (x, log; {source})"
    base = alt.Chart(data.to_pandas()).encode(y=alt.Y("where:N", sort=order, title=None, axis=alt.Axis(labelLimit=0)),
                                              yOffset=alt.YOffset("family_label:N"))
    ci = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low:Q", scale=alt.Scale(type="log"), title=axis),
                                              x2="ci_high:Q", color=_family_colour(data, legend=LEGEND))
    points = base.mark_point(filled=True, size=70).encode(
        x=alt.X("speedup:Q", scale=alt.Scale(type="log"), title=axis),
        color=_family_colour(data, legend=LEGEND),
        tooltip=["where", "label", "speedup", "ci_low", "ci_high"])
    ring = (base.transform_filter("datum.best_rival").mark_point(size=260, strokeWidth=2, color="#111", filled=False)
            .encode(x=alt.X("speedup:Q", scale=alt.Scale(type="log"), title=axis)))
    height = max(HEIGHT, 46 * len(order))
    return readable((ci + points + ring).properties(
        width=WIDE - 120, height=height,
        title=["Speedup over AR per method family and corpus (each family's fastest deployable setting; rules: "
               "case-bootstrap 95% CI;", "ring: the best rival there; directive-free Copy-as-Decode, an upper bound, "
               "left out)"]))


def serving_decision_chart(table: pl.DataFrame):
    """Copy-as-Decode's best variant over the best rival against concurrency, per kernel source (closed loop, the
    smallest budget), with its paired request-bootstrap interval; gray: parity."""
    import altair as alt

    budget = table["max_num_batched_tokens"].min()
    rows = source_label(table.filter((pl.col("workload") == "closed") & (pl.col("role") == "copy")
                                      & (pl.col("max_num_batched_tokens") == budget)
                                      & pl.col("speedup_vs_best_rival").is_not_null()))
    best = (rows.sort("speedup_vs_best_rival", descending=True).group_by(["source", "load"], maintain_order=True)
            .first().sort("source", "load"))
    data = best.select("source", "kernel_source", "load", "method", "best_rival", gain="speedup_vs_best_rival",
                       low=pl.col("vs_best_rival_ci_low") if "vs_best_rival_ci_low" in best.columns else pl.lit(None),
                       high=pl.col("vs_best_rival_ci_high") if "vs_best_rival_ci_high" in best.columns else pl.lit(None))
    base = alt.Chart(data.to_pandas())
    x = alt.X("load:Q", scale=alt.Scale(type="log", base=2), title="concurrency (requests in flight)",
              axis=alt.Axis(**LOG_AXIS))
    y = alt.Y("gain:Q", scale=alt.Scale(type="log"), title="Copy-as-Decode over the best rival (x, output tokens/s)",
              axis=alt.Axis(**LOG_AXIS))
    # coloured by kernel source, as on every other chart (each source's basis: the block's table above)
    colour = colour_channel("kernel_source", data["kernel_source"], title=None,
                            legend=alt.Legend(orient="bottom", columns=2, labelLimit=0))
    band = base.mark_area(opacity=0.15).encode(x=x, y=alt.Y("low:Q", scale=alt.Scale(type="log")), y2="high:Q",
                                               color=colour)
    lines = base.mark_line(point=True).encode(x=x, y=y, color=colour,
                                              tooltip=["source", "load", "method", "best_rival", "gain", "low", "high"])
    one = base.mark_rule(color="gray", strokeDash=[2, 2]).encode(y=alt.datum(1.0))
    return readable((band + one + lines).properties(
        width=WIDE - 120, height=HEIGHT + 40,
        title=[f"Under load (simulated continuous batching, budget {budget:,} tokens): Copy-as-Decode's best variant "
               "over the best rival at each load", "bands: paired request-bootstrap 95% CI; gray: parity"]))
