"""The rivals page's crossover chart: where a rival's draft budget overtakes Copy-as-Decode (the rivals stage's
reports/tables/rivals_crossover.csv beside reports/tables/rivals.csv's speedups). A module of its own beside
analysis.present.charts, whose helpers it uses."""

from __future__ import annotations

import polars as pl

from analysis.errors import ParamsError
from analysis.present.charts import HEIGHT, PANEL, WRAP, _alt, _wrap, readable
from analysis.present.colours import family_colour, method_colour


def crossover_chart(table: pl.DataFrame, flips: pl.DataFrame, source: str, k_max: int):
    """Speedup over AR against the draft budget k (log) of each rival family with a budget (prompt lookup per match
    policy, suffix decoding), one panel per corpus and pool under `source`; Copy-as-Decode's best deployable
    variant as a red rule: where a line crosses the rule the ranking flips. Budgets past rivals.deployable_k_max and
    unbounded drafts (bounds) are not drawn."""
    alt = _alt()
    panel = pl.when(pl.col("pool") == "corpus").then(pl.col("corpus")).otherwise(pl.format("pooled ({})", pl.col("pool")))
    lines = (table.filter((pl.col("kernel_source") == source) & pl.col("k").is_not_null() & (pl.col("k") <= k_max)
                          & (pl.col("family") != "copy"))
             .with_columns(panel=panel).select("panel", "corpus", "pool", "label", "rival_group", "k", "speedup"))
    rules = (flips.filter(pl.col("kernel_source") == source).select("corpus", "pool", "best_copy", "best_copy_speedup")
             .unique(subset=["corpus", "pool"], maintain_order=True)) if not flips.is_empty() else None
    if rules is None or lines.is_empty():
        return alt.Chart(pl.DataFrame({"note": ["no rival with a draft budget"]}).to_pandas()).mark_text().encode(
            text="note:N").properties(title=f"Where the ranking flips under {source}: no rival with a draft budget")
    data = lines.join(rules, on=["corpus", "pool"], how="inner")
    groups = sorted(set(data["rival_group"]))
    colours = [group_colour(g, k_max) for g in groups]
    x = alt.X("k:Q", scale=alt.Scale(type="log", base=2), title="draft budget k (tokens, log)")
    y = alt.Y("speedup:Q", scale=alt.Scale(type="log"), title=f"speedup over AR (x, log; {source})")
    base = alt.Chart(data.to_pandas())
    drawn = base.mark_line(point=True).encode(
        x=x, y=y, color=alt.Color("rival_group:N", title="rival (family, match policy)",
                                  scale=alt.Scale(domain=groups, range=colours)),
        tooltip=["panel", "label", "k", "speedup"])
    copy = base.mark_rule(color="#d62728", strokeWidth=2).encode(
        y=alt.Y("best_copy_speedup:Q", scale=alt.Scale(type="log")), tooltip=["panel", "best_copy", "best_copy_speedup"])
    panels = max(1, data["panel"].n_unique())
    return readable(_wrap((drawn + copy).properties(width=PANEL - 40, height=HEIGHT), "panel:N",
                          columns=min(WRAP, panels)).properties(
        title=f"Where the ranking flips under {source}: each rival's speedup over AR by draft budget k (lines) against "
              f"Copy-as-Decode's best deployable variant (red rule); k up to {k_max}, the deployable cap"))


def group_colour(group: str, k: int) -> str:
    """A rival group (`pld-earliest`, `suffix`) in the colour of its member at budget k (its family's where no such
    name exists), so the line matches the method's colour on every other chart."""
    try:
        return method_colour(f"{group}-k{k}")
    except ParamsError:
        return family_colour(group.split("-")[0])
