"""`copydecode bounds`: closed-form bounds (ideal and with directive overhead) with bootstrap CIs,
for each kernel source: this suite's fitted latency model (`fit`) and the paper's own kernel curve
(`paper`, through the abstract's 6.8x at N=8 and 303x at N=512), so that this suite's spans can be set
beside the paper's bounds on equal terms."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING
from dataclasses import dataclass, replace

import polars as pl

from analysis.present import charts
from analysis.corpora import commits
from analysis.bounds import (
    POOLED_BOOTSTRAPS,
    STEP_COSTS,
    CostSettings,
    bounds_table,
    case_costs,
    cost_settings,
    repeat_costs,
)
from analysis.pipeline.config import Bootstrap, bootstrap_settings
from analysis.pipeline.digest import check_fresh, parquet_metadata
from analysis.errors import ParamsError
from analysis.pipeline.io import read_parquet, save_chart, write_json, write_parquet, write_table
from analysis.latency.names import FIT_SOURCE
from analysis.latency.sources import Kernel, KernelSettings, kernel_settings, kernels_for, needs_fit_document
from analysis.layout import CASE_COSTS, FIGURES, LATENCY_MODEL, METRICS, SPANS, TABLES, context_label
from analysis.pooling import MEAN_OF_CORPORA, PAPER_POOL, ALL_POOL, POOLED, paper_cases, paper_corpora
from analysis.pipeline.params import choice, get
from analysis.parallel.progress import timed

if TYPE_CHECKING:
    from analysis.latency.model import LatencyModel

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


def paper_pool(costs: pl.DataFrame, repeats: list[pl.DataFrame], s: BoundsSettings) -> pl.DataFrame:
    """The pooled rows over the paper's own corpora only (PAPER_CORPORA), so the paper's pooled bound
    stays comparable when this suite pools more corpora; empty when the pool holds nothing else."""
    cases = paper_cases(costs)  # analysis.pooling: the paper pool's cases, the one membership rule
    if cases.height == 0:
        return pl.DataFrame()
    keep = [r.filter(paper_corpora()) for r in repeats]
    boot = s.bootstrap
    table = bounds_table(cases, boot.resamples, boot.seed, boot.ci, repeat_costs=keep,
                         pooled_bootstrap=s.pooled_bootstrap)
    return table.filter(pl.col("corpus") == POOLED).with_columns(pool=pl.lit(PAPER_POOL))


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


POINT_KEYS = ["level", "corpus", "framing", "variant", "pooling"]


def step_cost_bounds(spans: pl.DataFrame, model: LatencyModel, s: BoundsSettings, label: str) -> pl.DataFrame:
    """The point bound under each decode-step pricing (columns bound_steady, bound_first_step), so the
    tables show the v1 pricing (every token at the first step's time) beside the corrected one. A
    pricing other than the judged one that this model cannot give (a profile with too few short runs
    for the steady split) is left null and said on stderr."""
    out = None
    for step_cost in sorted(STEP_COSTS, key=lambda k: k != s.cost.step_cost):  # the judged one first
        settings = replace(s.cost, step_cost=step_cost)
        try:
            costs = case_costs(spans, model, settings)
        except ParamsError as exc:
            if step_cost == s.cost.step_cost:
                raise
            print(f"copydecode bounds: {label}: no bound_{step_cost} beside the judged {s.cost.step_cost} ({exc})",
                  file=sys.stderr)
            out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias(f"bound_{step_cost}"))
            continue
        point = bounds_table(costs, 0, s.bootstrap.seed, s.bootstrap.ci)
        pool = paper_pool(costs, [], replace(s, bootstrap=replace(s.bootstrap, resamples=0)))
        rows = pl.concat([point.with_columns(pool=pl.lit(ALL_POOL)),
                          *([pool] if pool.height else [])], how="diagonal")
        rows = rows.select(*POINT_KEYS, "pool", pl.col("bound").alias(f"bound_{step_cost}"))
        out = rows if out is None else out.join(rows, on=[*POINT_KEYS, "pool"], how="full", coalesce=True)
    return out.select(*POINT_KEYS, "pool", *(f"bound_{k}" for k in STEP_COSTS))


def step_cost_columns(model: LatencyModel, s: BoundsSettings, measured: bool) -> dict:
    """The decode step at bounds.context, in ms: T_ar(1, c) (t_step_ms, the v1 price of every token),
    the steady step and the first-step overhead (None for the paper kernel, whose unit is a step)."""
    t_step = float(model.t_step(s.cost.context, extrapolate=True).seconds)
    try:
        first, steady = (float(e.seconds) for e in model.step_costs(s.cost.context, s.cost.steady_max_n, extrapolate=True))
    except ParamsError:  # judged first_step on a profile without the steady split (step_cost_bounds says so)
        first = steady = None
    values = {"t_step_ms": t_step, "steady_step_ms": steady, "first_step_overhead_ms": first}
    return {k: pl.lit(v * 1000 if measured and v is not None else None, dtype=pl.Float64) for k, v in values.items()}


def bounds_for(spans: pl.DataFrame, s: BoundsSettings):
    """The bounds table, the per-case costs, the tokenization sensitivity and the paper-corpora
    pool, over every kernel. `bound` (with its interval) is priced by bounds.step_cost (`step_cost`
    column); bound_steady and bound_first_step give both pricings' point bounds side by side."""
    tables, costs_all, tokenization, paper_pools = [], [], [], []
    boot = s.bootstrap
    gold_cost = replace(s.cost, prefill_tokens="n_tokens")
    for kernel in kernel_models(s):
        model = kernel.model
        label = dict(kernel_source=pl.lit(kernel.source), baseline=pl.lit(kernel.baseline),
                     kernel_model=pl.lit(kernel.built))
        costs = case_costs(spans, model, s.cost)
        repeats = repeat_costs(spans, model, s.cost) if s.kernel_repeats else []
        costs_all.append(costs.with_columns(kernel_source=label["kernel_source"], baseline=label["baseline"]))
        both = step_cost_bounds(spans, model, s, kernel.source)
        pool = paper_pool(costs, repeats, s)
        if pool.height:
            pool = pool.join(both.filter(pl.col("pool") == PAPER_POOL).drop("pool"), on=POINT_KEYS, how="left")
            paper_pools.append(pool.with_columns(**label, step_cost=pl.lit(s.cost.step_cost)))
        table = bounds_table(costs, boot.resamples, boot.seed, boot.ci, repeat_costs=repeats,
                             pooled_bootstrap=s.pooled_bootstrap)
        table = table.join(both.filter(pl.col("pool") == ALL_POOL).drop("pool"), on=POINT_KEYS, how="left")
        tables.append(table.with_columns(
            **label, **step_cost_columns(model, s, kernel.measured), step_cost=pl.lit(s.cost.step_cost),
            model=pl.lit(kernel.model_name), dtype=pl.lit(kernel.dtype), device=pl.lit(kernel.device)))
        gold = bounds_table(case_costs(spans, model, gold_cost), 0, boot.seed, boot.ci)
        tokenization.append(gold.select("level", "corpus", "framing", "variant", "pooling",
                                        pl.col("bound").alias("bound_gold_prefill")).with_columns(
            kernel_source=label["kernel_source"], baseline=label["baseline"]))
    # in running mode there is no one context: each op has its own (prompt + output so far)
    context = s.cost.context if s.cost.context_mode == "fixed" else None
    table = pl.concat(tables).with_columns(context=pl.lit(context, dtype=pl.Int64),
                                           context_mode=pl.lit(s.cost.context_mode),
                                           pool=pl.when(pl.col("corpus") == POOLED).then(pl.lit(ALL_POOL)))
    tok = table.select(*KEYS, "bound").join(pl.concat(tokenization), on=KEYS).with_columns(
        rel_change=pl.col("bound_gold_prefill") / pl.col("bound") - 1)
    pools = pl.concat(paper_pools) if paper_pools else pl.DataFrame()
    return table, pl.concat(costs_all), tok, pools


def pools_for(table: pl.DataFrame, paper_pools: pl.DataFrame) -> pl.DataFrame:
    """bounds_pools: both pools of every kernel source (see both_pools)."""
    parts = []
    for source in table["kernel_source"].unique(maintain_order=True).to_list():
        rows = table.filter(pl.col("kernel_source") == source)
        paper = (paper_pools.filter(pl.col("kernel_source") == source) if paper_pools.height else pl.DataFrame())
        parts.append(both_pools(rows, paper))
    return pl.concat(parts, how="diagonal_relaxed")


def commit_bounds(costs: pl.DataFrame, s: BoundsSettings) -> pl.DataFrame:
    """Commit-level rows of the multi-file CommitEdits corpora (`commits.commit_costs`: a commit's AR
    and program costs are the sums over its files), summarised like the per-file bounds with the
    bootstrap over commits (kernel repeats not resampled); empty when no corpus is multi-file."""
    labels = ("kernel_source", "baseline")
    summed = commits.commit_costs(costs, labels)
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
