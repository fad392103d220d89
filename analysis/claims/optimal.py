"""Beyond the paper: the cost-optimal oracle. The bound with directive tokens decoded under the
coverage-maximising oracle and under the cost-optimal one (fewer, longer copies), per kernel source over
the paper's three corpora, beside the paper's floors (claim 4); no verdict."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, metric_input
from analysis.errors import MissingOutputError
from analysis.latency.names import PAPER_SOURCE
from analysis.pooling import PER_CORPUS, paper_view
from analysis.results.numbers import fmt_range, fmt_x

METHOD = "dynamic-programming oracle minimising the modelled cost, fixed context [optimal]"


@register("optimal")
def optimal_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    rows = paper_view(metric_input(spec, 0, tables, metrics_dir)).filter(pl.col("pooling") == PER_CORPUS)
    if rows.height == 0:
        raise MissingOutputError("optimal.csv has no rows for the paper's corpora")
    parts = []
    for (source, baseline, level), group in rows.sort("kernel_source", "level").group_by(
            "kernel_source", "baseline", "level", maintain_order=True):
        context = group["context"].drop_nulls().unique().to_list() if "context" in group.columns else []
        kernel = "paper kernel" if source == PAPER_SOURCE else f"{source} kernel ({baseline} AR)"
        parts.append(f"{kernel}, {level} level{f', c={context[0]}' if len(context) == 1 else ''}: "
                     f"{fmt_range(group['covmax_bound'].min(), group['covmax_bound'].max(), fmt_x)} coverage-max -> "
                     f"{fmt_range(group['optimal_bound'].min(), group['optimal_bound'].max(), fmt_x)} cost-optimal")
    token = rows.filter((pl.col("kernel_source") == PAPER_SOURCE) & (pl.col("level") == "token"))
    beside = spec.get("beside_claim") or {}
    floors = (beside["floor_low"], beside["floor_high"]) if "floor_low" in beside else None
    reason = "the paper does not state an optimal oracle; bounds with directive tokens decoded, per corpus"
    if token.height and floors:
        inside = token.filter(pl.col("optimal_bound").is_between(floors[0], floors[1]))
        reason += (f"; with the paper kernel, {inside.height} of {token.height} corpora's token-level cost-optimal "
                   f"floors lie in the paper's {fmt_range(*floors, fmt_x)}")
    return Claim(claim=spec["title"], paper=spec["text"], ours="; ".join(parts), verdict=BEYOND, reason=reason,
                 method=METHOD)
