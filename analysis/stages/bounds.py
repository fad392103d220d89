"""`copydecode bounds`: closed-form bounds (ideal and with directive overhead) with bootstrap CIs,
for each kernel source: this suite's fitted latency model (`fit`) and the paper's own kernel curve
(`paper`, through the abstract's 6.8x at N=8 and 303x at N=512), so that this suite's spans can be set
beside the paper's bounds on equal terms."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace

import polars as pl

from analysis import charts
from analysis.corpora import commits
from analysis.bounds import (
    CONTEXT_MODES,
    POOLED_BOOTSTRAPS,
    STEP_COSTS,
    CostSettings,
    bounds_table,
    case_costs,
    repeat_costs,
)
from analysis.config import Bootstrap, bootstrap_settings
from analysis.digest import check_fresh, parquet_metadata
from analysis.errors import ParamsError
from analysis.io import read_parquet, save_chart, write_json, write_parquet, write_table
from analysis.latency import (
    FIT_SOURCE,
    FORMS,
    PAPER_SOURCE,
    LatencyModel,
    from_document,
    paper_model,
    select_kernel_source,
    select_model,
)
from analysis.layout import (
    CASE_COSTS,
    FIGURES,
    LATENCY_MODEL,
    METRICS,
    POOLED,
    SPANS,
    TABLES,
    context_label,
    paper_corpora,
)
from analysis.params import choice, choices, get, positive_int
from analysis.stages.common import timed

KERNEL_SOURCES = (FIT_SOURCE, PAPER_SOURCE)  # and any measured source the latency model holds, by name
BASELINES = ("eager", "static", "static_compiled")
KEYS = ["kernel_source", "level", "corpus", "framing", "variant", "baseline", "pooling"]


@dataclass(frozen=True)
class BoundsSettings:
    kernel_sources: tuple[str, ...]
    model: str
    dtype: str
    device: str
    baselines: tuple[str, ...]
    latency_form: str
    cost: CostSettings
    kernel_repeats: bool
    pooled_bootstrap: str
    bootstrap: Bootstrap


def settings(params: dict) -> BoundsSettings:
    p = params
    cost = CostSettings(
        context_mode=choice(p, "bounds.context_mode", CONTEXT_MODES),
        context=positive_int(p, "bounds.context", minimum=0),
        extrapolate=get(p, "bounds.extrapolate", bool),
        step_cost=choice(p, "bounds.step_cost", STEP_COSTS),
        steady_max_n=positive_int(p, "bounds.steady_max_n", minimum=2),
    ).validate()
    return BoundsSettings(
        kernel_sources=kernel_source_names(p, "bounds.kernel_sources"),
        model=get(p, "bounds.model", str), dtype=get(p, "bounds.dtype", str), device=get(p, "bounds.device", str),
        baselines=choices(p, "bounds.baselines", BASELINES),
        latency_form=choice(p, "bounds.latency_form", FORMS),
        cost=cost,
        kernel_repeats=get(p, "bounds.kernel_repeats", bool),
        pooled_bootstrap=choice(p, "bounds.pooled_bootstrap", POOLED_BOOTSTRAPS),
        bootstrap=bootstrap_settings(p, "bounds"),
    )


def load_fitted_models() -> list[LatencyModel]:
    if not LATENCY_MODEL.is_file():
        raise ParamsError(f"{LATENCY_MODEL} not found; run `copydecode kernels fit` (or `dvc repro`) first")
    try:
        return from_document(json.loads(LATENCY_MODEL.read_text()))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ParamsError(f"{LATENCY_MODEL} is not a latency model file ({exc}); rerun `copydecode kernels fit`") from exc


PAPER_BASELINE = "paper (A100, bf16)"
FROZEN_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*/[A-Za-z0-9._-]+/[a-z_]+(/[a-z]+_prefill)?$")


def kernel_source_names(params: dict, dotted: str) -> tuple[str, ...]:
    """A list of kernel source names: `fit`, `paper`, or a measured source `<source>/<model>/<AR
    loop>[/<kind>_prefill]` (e.g. `h200/qwen2.5-7b/static_compiled`); whether a measured source exists is
    checked against the latency model when the stage runs."""
    values = get(params, dotted, list)
    if not values:
        raise ParamsError(f"params: {dotted!r} must not be empty; e.g. [{FIT_SOURCE}, {PAPER_SOURCE}]")
    bad = [v for v in values if not isinstance(v, str) or (v not in KERNEL_SOURCES and not FROZEN_NAME.match(v))]
    if bad:
        raise ParamsError(f"params: {dotted!r} has unknown kernel sources {bad}; use {FIT_SOURCE}, {PAPER_SOURCE} "
                          f"or a measured source <source>/<model>/<AR loop> (e.g. h200/qwen2.5-1.5b/eager)")
    if len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} lists a kernel source twice: {values}")
    return tuple(values)


@dataclass(frozen=True)
class Kernel:
    """One kernel source a bound is composed with, and what to label its rows with."""

    source: str        # fit | paper | <source>/<model>/<AR loop>
    baseline: str      # the AR loop (or the paper's label)
    model: LatencyModel
    model_name: str
    dtype: str
    device: str

    @property
    def measured(self) -> bool:
        return self.source != PAPER_SOURCE


def select_kernels(kernel_sources, model: str, dtype: str, device: str, baselines, latency_form: str) -> list[Kernel]:
    """Each kernel source in order; `fit` once per AR baseline of this run's profile."""
    chosen = []
    fitted = load_fitted_models() if any(k != PAPER_SOURCE for k in kernel_sources) else []
    for name in kernel_sources:
        if name == FIT_SOURCE:
            chosen += [Kernel(FIT_SOURCE, b, select_model(fitted, model, dtype, device, b, latency_form), model, dtype, device)
                       for b in baselines]
        elif name == PAPER_SOURCE:
            chosen.append(Kernel(PAPER_SOURCE, PAPER_BASELINE, paper_model(), PAPER_SOURCE, "bfloat16", "A100 80GB (paper)"))
        else:
            m = select_kernel_source(fitted, name, latency_form)
            chosen.append(Kernel(name, m.key.baseline, m, m.key.model, m.key.dtype, m.key.device))
    return chosen


def kernel_models(s: BoundsSettings) -> list[Kernel]:
    """Every kernel a bound is computed with."""
    return select_kernels(s.kernel_sources, s.model, s.dtype, s.device, s.baselines, s.latency_form)


def paper_pool(costs: pl.DataFrame, repeats: list[pl.DataFrame], s: BoundsSettings) -> pl.DataFrame:
    """The pooled rows over the paper's own corpora only (PAPER_CORPORA), so the paper's pooled bound
    stays comparable when this suite pools more corpora; empty when the pool holds nothing else."""
    mask = paper_corpora()
    if costs.filter(~mask).height == 0 or costs.filter(mask).height == 0:
        return pl.DataFrame()
    keep = [r.filter(mask) for r in repeats]
    boot = s.bootstrap
    table = bounds_table(costs.filter(mask), boot.resamples, boot.seed, boot.ci, repeat_costs=keep,
                         pooled_bootstrap=s.pooled_bootstrap)
    return table.filter(pl.col("corpus") == POOLED).with_columns(pool=pl.lit("paper corpora"))


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
        rows = pl.concat([point.with_columns(pool=pl.lit("all corpora")),
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
        label = dict(kernel_source=pl.lit(kernel.source), baseline=pl.lit(kernel.baseline))
        costs = case_costs(spans, model, s.cost)
        repeats = repeat_costs(spans, model, s.cost) if s.kernel_repeats else []
        costs_all.append(costs.with_columns(**label))
        both = step_cost_bounds(spans, model, s, kernel.source)
        pool = paper_pool(costs, repeats, s)
        if pool.height:
            pool = pool.join(both.filter(pl.col("pool") == "paper corpora").drop("pool"), on=POINT_KEYS, how="left")
            paper_pools.append(pool.with_columns(**label, step_cost=pl.lit(s.cost.step_cost)))
        table = bounds_table(costs, boot.resamples, boot.seed, boot.ci, repeat_costs=repeats,
                             pooled_bootstrap=s.pooled_bootstrap)
        table = table.join(both.filter(pl.col("pool") == "all corpora").drop("pool"), on=POINT_KEYS, how="left")
        tables.append(table.with_columns(
            **label, **step_cost_columns(model, s, kernel.measured), step_cost=pl.lit(s.cost.step_cost),
            model=pl.lit(kernel.model_name), dtype=pl.lit(kernel.dtype), device=pl.lit(kernel.device)))
        gold = bounds_table(case_costs(spans, model, gold_cost), 0, boot.seed, boot.ci)
        tokenization.append(gold.select("level", "corpus", "framing", "variant", "pooling",
                                        pl.col("bound").alias("bound_gold_prefill")).with_columns(**label))
    # in running mode there is no one context: each op has its own (prompt + output so far)
    context = s.cost.context if s.cost.context_mode == "fixed" else None
    table = pl.concat(tables).with_columns(context=pl.lit(context, dtype=pl.Int64),
                                           context_mode=pl.lit(s.cost.context_mode))
    tok = table.select(*KEYS, "bound").join(pl.concat(tokenization), on=KEYS).with_columns(
        rel_change=pl.col("bound_gold_prefill") / pl.col("bound") - 1)
    pools = pl.concat(paper_pools) if paper_pools else pl.DataFrame()
    return table, pl.concat(costs_all), tok, pools


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
        + ("" if r["pooling"] != "mean_of_corpora" else "/mean_of_corpora"): {
            "bound": r["bound"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "extrapolated_spans": r["extrapolated_spans"]}
        for r in table.iter_rows(named=True)
    }


def run(s: BoundsSettings) -> dict:
    with timed("bounds"):
        spans = read_parquet(SPANS, "copydecode spans", ParamsError)
        check_fresh(SPANS, "copydecode spans")
        table, costs, tok, pools = bounds_for(spans, s)
        inputs = [SPANS, *([LATENCY_MODEL] if "fit" in s.kernel_sources else [])]
        write_parquet(costs, CASE_COSTS, metadata=parquet_metadata(inputs))
        write_table(table, TABLES / "bounds", digits=3)
        write_table(tok, TABLES / "bounds_tokenization", digits=4)
        write_table(pools, TABLES / "bounds_paper_pool", digits=3)
        write_table(commit_bounds(costs, s), TABLES / "bounds_commits", digits=3)
        fitted = table.filter((pl.col("kernel_source") == "fit") & (pl.col("pooling") != "mean_of_corpora"))
        where = context_label(s.cost.context_mode, s.cost.context)
        title = (f"Closed-form bound: {s.model} {s.dtype} {s.device}, {s.latency_form} latency model, "
                 f"{where} ({charts.STAND_IN})")
        save_chart(charts.bounds(fitted, title), FIGURES / "bounds")
    write_json({"bounds": bound_metrics(table), "model": s.model, "dtype": s.dtype, "device": s.device,
                "context": s.cost.context if s.cost.context_mode == "fixed" else None, "context_mode": s.cost.context_mode, "latency_form": s.latency_form},
               METRICS / "bounds.json")
    return {"rows": table.height}
