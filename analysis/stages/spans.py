"""`copydecode spans`: span table, coverage with bootstrap CIs, span-length histograms."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from analysis.present import charts
from analysis.corpora.entries import FRAMINGS
from analysis.pipeline.config import Bootstrap, bootstrap_settings, tokenizer_spec
from analysis.pipeline.digest import parquet_metadata
from analysis.pipeline.io import save_chart, write_json, write_parquet, write_table
from analysis.layout import CASES, FIGURES, LEVELS, METRICS, PER_CASE, PROGRAMS, SPANS, TABLES
from analysis.parallel.workers import ParallelSettings, cluster_session, parallel_settings
from analysis.pipeline.params import choice
from analysis.coverage.spans import (
    SPANS_SCHEMA,
    build_spans,
    coverage_table,
    histogram_from_counts,
    merge_per_case,
    per_case_coverage,
    prompt_overhead_tokens,
    span_bin_counts,
)
from analysis.parallel.shards import ShardWriter, Spill, shard_cases
from analysis.parallel.progress import timed
from analysis.parallel.tables import case_shards, program_shards
from analysis.text.tokens import (
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
    shard_cases: int


# `copydecode spans`: its help line and what it reads and writes (the CLI's --help)
HELP = "span table, coverage with bootstrap CIs, histograms"
READS_WRITES = ("reads cases and programs; writes data/spans/*.parquet, reports/tables/coverage.*, "
                "reports/tables/span_histogram.*, reports/tables/line_boundaries_inside_tokens.*, "
                "reports/figures/span_histogram_*.{png,svg}, reports/metrics/coverage.json")


def settings(params: dict) -> SpansSettings:
    return SpansSettings(
        tokenizer=tokenizer_spec(params),
        bootstrap=bootstrap_settings(params, "spans"),
        chart_framing=choice(params, "spans.chart_framing", FRAMINGS),
        prompt_overhead_tokens=prompt_overhead_tokens(params),
        parallel=parallel_settings(params),
        shard_cases=shard_cases(params),
    )


def boundary_counts(shards: Iterable[pl.DataFrame], tokenizer) -> pl.DataFrame:
    """Per corpus and framing: line boundaries of the gold outputs that fall inside a BPE token, over
    the shards of a cases table (read one at a time: only their sums are kept)."""
    counts = pl.concat([boundary_sums(cases, tokenizer) for cases in shards])
    return (
        counts.group_by("corpus", "framing")
        .agg(pl.col("inside").sum(), pl.col("boundaries").sum())
        .with_columns(share=pl.col("inside") / pl.col("boundaries"))
        .sort("corpus", "framing")
    )


def boundary_sums(cases: pl.DataFrame, tokenizer) -> pl.DataFrame:
    """Per corpus and framing of one shard of cases: boundaries inside a token, and all boundaries."""
    targets = tokenizer.encode_many(cases["target"].to_list())
    inside = [count_split_boundaries(t) for t in targets]
    boundaries = [max(len(line_byte_starts(t.text)) - 2, 0) for t in targets]
    return (
        cases.select("corpus", "framing")
        .with_columns(inside=pl.Series(inside, dtype=pl.Int64), boundaries=pl.Series(boundaries, dtype=pl.Int64))
        .group_by("corpus", "framing")
        .agg(pl.col("inside").sum(), pl.col("boundaries").sum())
    )


def coverage_metrics(coverage: pl.DataFrame) -> dict:
    return {
        f"{r['level']}/{r['framing']}/{r['corpus']}": {
            "coverage": r["coverage"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "n_cases": r["n_cases"],
        }
        for r in coverage.iter_rows(named=True)
    }


def run(s: SpansSettings) -> dict:
    with timed("spans"), cluster_session(s.parallel):  # dask/ray: one cluster for the whole stage
        tokenizer = load_tokenizer(s.tokenizer)
        shards = program_shards(s.shard_cases)  # checks the two inputs exist and agree, before reading any
        inputs = parquet_metadata([CASES, PROGRAMS])
        per_case_parts, bin_counts = [], []
        with ShardWriter(SPANS, SPANS_SCHEMA, metadata=inputs) as out, Spill() as spill:
            for table in shards:  # one shard's programs and spans in memory at a time
                spans = build_spans(table, tokenizer, s.prompt_overhead_tokens, s.parallel)
                out.write(spans)
                per_case_parts.append(spill.put(per_case_coverage(spans)))  # a few numbers per case, on disk
                bin_counts.append(span_bin_counts(spans))
            if not per_case_parts:  # no program: the empty tables, as one empty shard gives them
                empty = pl.DataFrame(schema=SPANS_SCHEMA)
                per_case_parts, bin_counts = [per_case_coverage(empty)], [span_bin_counts(empty)]
            per_case = merge_per_case([Spill.concat(per_case_parts)])
        boot = s.bootstrap
        coverage = coverage_table(per_case, resamples=boot.resamples, seed=boot.seed, ci=boot.ci)
        hist = histogram_from_counts(*bin_counts)
        boundaries = boundary_counts(case_shards(s.shard_cases, ["corpus", "framing", "target"]), tokenizer)
        write_parquet(per_case, PER_CASE, metadata=inputs)
        write_table(coverage, TABLES / "coverage")
        write_table(hist, TABLES / "span_histogram")
        write_table(boundaries, TABLES / "line_boundaries_inside_tokens")
        for level in LEVELS:
            save_chart(charts.span_histogram(hist, level, s.chart_framing), FIGURES / f"span_histogram_{level}")
    write_json({"coverage": coverage_metrics(coverage)}, METRICS / "coverage.json")
    return {"n_spans": out.rows}
