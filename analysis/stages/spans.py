"""`copydecode spans`: span table, coverage with bootstrap CIs, span-length histograms."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis import charts
from analysis.corpora import humanevalpack
from analysis.corpora.cases import read_cases
from analysis.config import Bootstrap, bootstrap_settings, tokenizer_spec
from analysis.digest import parquet_metadata
from analysis.io import save_chart, write_json, write_parquet, write_table
from analysis.layout import CASES, FIGURES, LEVELS, METRICS, PER_CASE, PROGRAMS, SPANS, TABLES
from analysis.parallel import SERIAL, ParallelSettings, map_cases, parallel_settings
from analysis.params import choice, positive_int
from analysis.program import parse
from analysis.spans import (
    SPANS_SCHEMA,
    DirectiveCounter,
    coverage_table,
    per_case_coverage,
    program_spans,
    prompt_tokens,
    span_histogram,
)
from analysis.stages.common import progress, timed
from analysis.stages.tables import joined_programs
from analysis.tokenization import (
    count_split_boundaries,
    line_byte_starts,
    load_tokenizer,
)


@dataclass(frozen=True)
class SpansSettings:
    tokenizer: str
    bootstrap: Bootstrap
    chart_framing: str
    prompt_overhead_tokens: int
    parallel: ParallelSettings


def settings(params: dict) -> SpansSettings:
    return SpansSettings(
        tokenizer=tokenizer_spec(params),
        bootstrap=bootstrap_settings(params, "spans"),
        chart_framing=choice(params, "spans.chart_framing", humanevalpack.FRAMINGS),
        prompt_overhead_tokens=positive_int(params, "spans.prompt_overhead_tokens", minimum=0),
        parallel=parallel_settings(params),
    )


def build_spans(table: pl.DataFrame, tokenizer, prompt_overhead_tokens: int = 0,
                parallel: ParallelSettings = SERIAL) -> pl.DataFrame:
    sources = tokenizer.encode_many(table["source"].to_list())
    targets = tokenizer.encode_many(table["target"].to_list())
    rows = list(zip(table.iter_rows(named=True), sources, targets))
    parts = map_cases(span_columns, rows, parallel, tokenizer, prompt_overhead_tokens)
    columns = {name: [value for part in parts for value in part[name]] for name in SPANS_SCHEMA}
    return pl.DataFrame(columns, schema=SPANS_SCHEMA)


def span_columns(chunk, tokenizer, prompt_overhead_tokens: int) -> list[dict[str, list]]:
    """The span columns of a chunk of (program row, source tokens, target tokens), as one part."""
    directives = DirectiveCounter(tokenizer)  # a memo only: a fresh one per chunk counts the same
    columns: dict[str, list] = {name: [] for name in SPANS_SCHEMA}
    for row, src, tgt in progress(chunk, "spans", len(chunk)):
        prompt = prompt_tokens(src, prompt_overhead_tokens)
        for span in program_spans(parse(row["program"]), src, tgt, directives):
            for key in ("case_id", "corpus", "language", "framing", "level"):
                columns[key].append(row[key])
            for key in ("op_index", "kind", "n_tokens", "n_tokens_src", "n_lines", "directive_tokens"):
                columns[key].append(getattr(span, key))
            columns["prompt_tokens"].append(prompt)
    return [columns]


def boundary_counts(cases: pl.DataFrame, tokenizer) -> pl.DataFrame:
    """Per corpus and framing: line boundaries of the gold outputs that fall inside a BPE token."""
    targets = tokenizer.encode_many(cases["target"].to_list())
    inside = [count_split_boundaries(t) for t in targets]
    boundaries = [max(len(line_byte_starts(t.text)) - 2, 0) for t in targets]
    return (
        cases.select("corpus", "framing")
        .with_columns(inside=pl.Series(inside), boundaries=pl.Series(boundaries))
        .group_by("corpus", "framing")
        .agg(pl.col("inside").sum(), pl.col("boundaries").sum())
        .with_columns(share=pl.col("inside") / pl.col("boundaries"))
        .sort("corpus", "framing")
    )


def coverage_metrics(coverage: pl.DataFrame) -> dict:
    return {
        f"{r['level']}/{r['framing']}/{r['corpus']}": {
            "coverage": r["coverage"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "n_cases": r["n_cases"],
        }
        for r in coverage.iter_rows(named=True)
    }


def run(s: SpansSettings) -> dict:
    with timed("spans"):
        tokenizer = load_tokenizer(s.tokenizer)
        spans = build_spans(joined_programs(), tokenizer, s.prompt_overhead_tokens, s.parallel)
        per_case = per_case_coverage(spans)
        boot = s.bootstrap
        coverage = coverage_table(per_case, resamples=boot.resamples, seed=boot.seed, ci=boot.ci)
        hist = span_histogram(spans)
        boundaries = boundary_counts(read_cases(CASES), tokenizer)
        inputs = parquet_metadata([CASES, PROGRAMS])  # checked by joined_programs: the two agree
        write_parquet(spans, SPANS, metadata=inputs)
        write_parquet(per_case, PER_CASE, metadata=inputs)
        write_table(coverage, TABLES / "coverage")
        write_table(hist, TABLES / "span_histogram")
        write_table(boundaries, TABLES / "line_boundaries_inside_tokens")
        for level in LEVELS:
            save_chart(charts.span_histogram(hist, level, s.chart_framing), FIGURES / f"span_histogram_{level}")
    write_json({"coverage": coverage_metrics(coverage)}, METRICS / "coverage.json")
    return {"n_spans": spans.height}
