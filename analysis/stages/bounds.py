"""`copydecode bounds`: closed-form bounds (ideal and with directive overhead) with bootstrap CIs,
for each kernel source: this suite's fitted latency model (`fit`) and the paper's own kernel curve
(`paper`, through the abstract's 6.8x at N=8 and 303x at N=512), so that this suite's spans can be set
beside the paper's bounds on equal terms."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import polars as pl

from analysis.present import charts
from analysis.bounds import (
    GOLD_PREFILL,
    POOLED_BOOTSTRAPS,
    STEP_COSTS,
    CostSettings,
    bounds_table,
    commit_costs,
    cost_settings,
    kernel_bounds,
)
from analysis.pipeline.config import Bootstrap, bootstrap_settings
from analysis.pipeline.digest import check_fresh, parquet_metadata
from analysis.errors import ParamsError
from analysis.pipeline.io import read_parquet, save_chart, write_json, write_parquet, write_table
from analysis.latency.names import FIT_SOURCE
from analysis.latency.sources import Kernel, KernelSettings, kernel_settings, kernels_for, needs_fit_document
from analysis.layout import CASE_COSTS, FIGURES, LATENCY_MODEL, METRICS, SPANS, TABLES, context_label
from analysis.pooling import MEAN_OF_CORPORA, PAPER_POOL, ALL_POOL, POOLED, paper_corpora
from analysis.pipeline.params import choice, get
from analysis.parallel.progress import timed

KEYS = ["kernel_source", "level", "corpus", "framing", "variant", "baseline", "pooling"]


@dataclass(frozen=True)
class BoundsSettings:
    kernel: KernelSettings     # params `kernel`: the sources, and the fitted model `fit` stands for
    cost: CostSettings
    kernel_repeats: bool
    pooled_bootstrap: str
    bootstrap: Bootstrap


# `copydecode bounds`: its help line and what it reads and writes (the CLI's --help)
HELP = "closed-form speedup bounds with bootstrap CIs"
READS_WRITES = ("reads data/spans/spans.parquet and reports/kernels/latency_model.json; writes "
                "data/bounds/case_costs.parquet, reports/tables/bounds*.*, reports/figures/bounds.{png,svg}, "
                "reports/metrics/bounds.json")


def settings(params: dict) -> BoundsSettings:
    p = params
    return BoundsSettings(
        kernel=kernel_settings(p),
        cost=cost_settings(p),
        kernel_repeats=get(p, "bounds.kernel_repeats", bool),
        pooled_bootstrap=choice(p, "bounds.pooled_bootstrap", POOLED_BOOTSTRAPS),
        bootstrap=bootstrap_settings(p, "bounds"),
    )


def kernel_models(s: BoundsSettings) -> list[Kernel]:
    """Every kernel a bound is computed with."""
    return kernels_for(s.kernel)


def both_pools(table: pl.DataFrame, paper: pl.DataFrame) -> pl.DataFrame:
    """Every kernel source's pooled rows over the paper's corpora (`pool` = paper, the judged pool) and
    over all corpora (`pool` = all). When this run holds only the paper's corpora the two pools are
    the same cases, and the paper rows are the all rows relabelled; when it holds none of them there
    are no paper rows."""
    pooled = table.filter(pl.col("corpus") == POOLED)
    if paper.height == 0:
        per_corpus = table.filter(pl.col("corpus") != POOLED)
        only_paper = per_corpus.height > 0 and per_corpus.filter(~paper_corpora()).height == 0
        paper = pooled if only_paper else pooled.clear()
    keep = [c for c in pooled.columns if c in paper.columns and c != "pool"]
    return pl.concat([paper.select(keep).with_columns(pool=pl.lit(PAPER_POOL)),
                      pooled.select(keep).with_columns(pool=pl.lit(ALL_POOL))]).select(
        "pool", *KEYS, pl.exclude("pool", *KEYS))


STEP_COLUMNS = [f"bound_{k}" for k in STEP_COSTS]  # the point bound under each decode-step pricing


def bounds_for(spans: pl.DataFrame, s: BoundsSettings):
    """The bounds table, the per-case costs, the tokenization sensitivity and the paper-corpora
    pool, over every kernel (analysis.bounds.kernel_bounds: each pricing of the spans once per kernel).
    `bound` (with its interval) is priced by bounds.step_cost (`step_cost` column); bound_steady and
    bound_first_step give both pricings' point bounds side by side."""
    tables, costs_all, paper_pools = [], [], []
    boot, cost = s.bootstrap, s.cost
    for kernel in kernel_models(s):
        priced = kernel_bounds(spans, kernel.model, cost, boot.resamples, boot.seed, boot.ci,
                               kernel_repeats=s.kernel_repeats, pooled_bootstrap=s.pooled_bootstrap)
        for step_cost, why in priced.unpriced.items():
            print(f"copydecode bounds: {kernel.source}: no bound_{step_cost} beside the judged {cost.step_cost} ({why})",
                  file=sys.stderr)
        label = dict(kernel_source=pl.lit(kernel.source), baseline=pl.lit(kernel.baseline),
                     kernel_model=pl.lit(kernel.built))
        costs_all.append(priced.costs.with_columns(kernel_source=label["kernel_source"], baseline=label["baseline"]))
        if priced.paper.height:
            paper_pools.append(priced.paper.select(pl.exclude(STEP_COLUMNS, GOLD_PREFILL), *STEP_COLUMNS).with_columns(
                **label, step_cost=pl.lit(cost.step_cost)))
        steps = {f"{k}_ms": pl.lit(v * 1000 if kernel.measured and v is not None else None, dtype=pl.Float64)
                 for k, v in priced.steps.items()}
        tables.append(priced.table.with_columns(
            **label, **steps, step_cost=pl.lit(cost.step_cost),
            model=pl.lit(kernel.model_name), dtype=pl.lit(kernel.dtype), device=pl.lit(kernel.device)))
    # in running mode there is no one context: each op has its own (prompt + output so far)
    context = cost.context if cost.context_mode == "fixed" else None
    table = pl.concat(tables).with_columns(context=pl.lit(context, dtype=pl.Int64),
                                           context_mode=pl.lit(cost.context_mode),
                                           pool=pl.when(pl.col("corpus") == POOLED).then(pl.lit(ALL_POOL)))
    tok = table.select(*KEYS, "bound", GOLD_PREFILL).with_columns(rel_change=pl.col(GOLD_PREFILL) / pl.col("bound") - 1)
    pools = pl.concat(paper_pools) if paper_pools else pl.DataFrame()
    return table.drop(GOLD_PREFILL), pl.concat(costs_all), tok, pools


def pools_for(table: pl.DataFrame, paper_pools: pl.DataFrame) -> pl.DataFrame:
    """bounds_pools: both pools of every kernel source (see both_pools)."""
    parts = []
    for source in table["kernel_source"].unique(maintain_order=True).to_list():
        rows = table.filter(pl.col("kernel_source") == source)
        paper = (paper_pools.filter(pl.col("kernel_source") == source) if paper_pools.height else pl.DataFrame())
        parts.append(both_pools(rows, paper))
    return pl.concat(parts, how="diagonal_relaxed")


def commit_bounds(costs: pl.DataFrame, s: BoundsSettings) -> pl.DataFrame:
    """Commit-level rows of the multi-file CommitEdits corpora (`analysis.bounds.commit_costs`: a commit's AR
    and program costs are the sums over its files), summarised like the per-file bounds with the
    bootstrap over commits (kernel repeats not resampled); empty when no corpus is multi-file."""
    labels = ("kernel_source", "baseline")
    summed = commit_costs(costs, labels)
    if summed.height == 0:  # the columns alone, so the table says what it would hold
        return pl.DataFrame(schema={**{k: pl.String for k in KEYS}, "n_cases": pl.Int64, "bound": pl.Float64,
                                    "ci_low": pl.Float64, "ci_high": pl.Float64, "coverage": pl.Float64,
                                    "n_files": pl.Int64, "unit": pl.String})
    boot = s.bootstrap
    tables = []
    for (source, baseline), rows in summed.group_by(labels, maintain_order=True):
        table = bounds_table(rows.drop(*labels), boot.resamples, boot.seed, boot.ci,
                             pooled_bootstrap="cases")
        files = rows.group_by("corpus", "level", "framing").agg(n_files=pl.col("n_files").sum())
        tables.append(table.join(files, on=["corpus", "level", "framing"], how="left").with_columns(
            kernel_source=pl.lit(source), baseline=pl.lit(baseline), unit=pl.lit("commit")))
    return pl.concat(tables, how="diagonal").select(*KEYS, pl.exclude(KEYS)).sort(KEYS)


def bound_metrics(table: pl.DataFrame) -> dict:
    return {
        f"{r['kernel_source']}/{r['baseline']}/{r['level']}/{r['variant']}/{r['framing']}/{r['corpus']}"
        + ("" if r["pooling"] != MEAN_OF_CORPORA else f"/{MEAN_OF_CORPORA}"): {
            "bound": r["bound"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "extrapolated_spans": r["extrapolated_spans"]}
        for r in table.iter_rows(named=True)
    }


def run(s: BoundsSettings) -> dict:
    with timed("bounds"):
        spans = read_parquet(SPANS, "copydecode spans", ParamsError)
        check_fresh(SPANS, "copydecode spans")
        table, costs, tok, pools = bounds_for(spans, s)
        inputs = [SPANS, *([LATENCY_MODEL] if needs_fit_document(s.kernel.sources) else [])]
        write_parquet(costs, CASE_COSTS, metadata=parquet_metadata(inputs))
        write_table(table, TABLES / "bounds", digits=3)
        write_table(tok, TABLES / "bounds_tokenization", digits=4)
        write_table(pools, TABLES / "bounds_paper_pool", digits=3)
        write_table(pools_for(table, pools), TABLES / "bounds_pools", digits=3)
        write_table(commit_bounds(costs, s), TABLES / "bounds_commits", digits=3)
        fitted = table.filter((pl.col("kernel_source") == FIT_SOURCE) & (pl.col("pooling") != MEAN_OF_CORPORA))
        where = context_label(s.cost.context_mode, s.cost.context)
        title = (f"Closed-form bound: {s.kernel.model} {s.kernel.dtype} {s.kernel.device}, {s.kernel.latency_form} latency model, "
                 f"{where}{charts.stand_in_note(fitted['corpus'])}")
        save_chart(charts.bounds(fitted, title), FIGURES / "bounds")
    write_json({"bounds": bound_metrics(table), "model": s.kernel.model, "dtype": s.kernel.dtype, "device": s.kernel.device,
                "context": s.cost.context if s.cost.context_mode == "fixed" else None, "context_mode": s.cost.context_mode, "latency_form": s.kernel.latency_form},
               METRICS / "bounds.json")
    return {"rows": table.height}
