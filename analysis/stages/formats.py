"""`copydecode formats`: edit-format token cost and token-boundary splices."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.pipeline.config import tokenizer_spec
from analysis.coverage.formats import boundary_summary, format_costs, span_boundary_rows
from analysis.pipeline.io import write_json, write_table
from analysis.layout import LEVELS, METRICS, TABLES
from analysis.pipeline.params import positive_int
from analysis.grammar.program import parse
from analysis.parallel.progress import progress, timed
from analysis.parallel.tables import joined_programs
from analysis.text.tokens import load_tokenizer


@dataclass(frozen=True)
class FormatsSettings:
    tokenizer: str
    udiff_context: int


# `copydecode formats`: its help line and what it reads and writes (the CLI's --help)
HELP = "edit-format token cost and token-boundary splices"
READS_WRITES = ("reads cases and programs; writes reports/tables/edit_formats.*, "
                "reports/tables/token_boundaries.*, reports/metrics/formats.json")


def settings(params: dict) -> FormatsSettings:
    return FormatsSettings(tokenizer_spec(params), positive_int(params, "formats.udiff_context", minimum=0))


CASE_KEYS = ("case_id", "corpus", "framing")


def per_case_formats(wide: pl.DataFrame, tokenizer, udiff_context: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per case, the token cost of each edit format; per copy span, its token-boundary record."""
    cost_rows, boundary_rows = [], []
    sources = tokenizer.encode_many(wide["source"].to_list())
    targets = tokenizer.encode_many(wide["target"].to_list())
    for row, src, tgt in progress(zip(wide.iter_rows(named=True), sources, targets), "edit formats", wide.height):
        programs = {level: row[level] for level in LEVELS}
        costs = format_costs(tokenizer, row["source"], row["target"], programs, udiff_context)
        cost_rows.append({k: row[k] for k in CASE_KEYS} | costs)
        for level in LEVELS:
            for span in span_boundary_rows(parse(row[level]), src, tgt, tokenizer):
                boundary_rows.append({"level": level, "corpus": row["corpus"], "framing": row["framing"], **span})
    return pl.DataFrame(cost_rows), pl.DataFrame(boundary_rows)


def format_summary(costs: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    formats = [c for c in costs.columns if c not in CASE_KEYS]
    summary = costs.group_by("corpus", "framing").agg(
        [pl.len().alias("n_cases")] + [pl.col(f).sum().alias(f) for f in formats]
    ).with_columns([(pl.col(f) / pl.col("rewrite")).alias(f"{f}_vs_rewrite") for f in formats if f != "rewrite"]
                   ).sort("framing", "corpus")
    return summary, formats


def run(s: FormatsSettings) -> dict:
    with timed("formats"):
        tokenizer = load_tokenizer(s.tokenizer)
        wide = joined_programs().pivot(on="level", index=["case_id", "corpus", "framing", "source", "target"],
                                       values="program")
        costs, spans = per_case_formats(wide, tokenizer, s.udiff_context)
        summary, formats = format_summary(costs)
        boundaries = boundary_summary(spans)
        write_table(summary, TABLES / "edit_formats", digits=3)
        write_table(boundaries, TABLES / "token_boundaries", digits=4)
    write_json({
        "edit_formats": {f"{r['framing']}/{r['corpus']}": {f: r[f] for f in formats} for r in summary.iter_rows(named=True)},
        "token_boundaries": {f"{r['level']}/{r['framing']}/{r['corpus']}": {"mismatch_share": r["mismatch_share"],
                                                                          "token_delta": r["token_delta"]}
                             for r in boundaries.iter_rows(named=True)},
    }, METRICS / "formats.json")
    return {"cases": costs.height}
