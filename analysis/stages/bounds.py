"""`copydecode bounds`: closed-form bounds (ideal and with directive overhead) with bootstrap CIs,
for each kernel source: this suite's fitted latency model (`fit`) and the paper's own kernel curve
(`paper`, through the abstract's 6.8x at N=8 and 303x at N=512), so that this suite's spans can be set
beside the paper's bounds on equal terms."""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

from analysis import charts
from analysis.bounds import (
    CONTEXT_MODES,
    POOLED_BOOTSTRAPS,
    CostSettings,
    bounds_table,
    case_costs,
    repeat_costs,
)
from analysis.config import Bootstrap, Config, bootstrap_settings
from analysis.digest import check_fresh, parquet_metadata
from analysis.errors import ParamsError
from analysis.io import read_parquet, save_chart, write_json, write_parquet, write_table
from analysis.latency import (
    FORMS,
    LatencyModel,
    from_document,
    paper_model,
    select_model,
)
from analysis.layout import (
    CASE_COSTS,
    FIGURES,
    LATENCY_MODEL,
    METRICS,
    PAPER_CORPORA,
    POOLED,
    SPANS,
    TABLES,
)
from analysis.params import choice, choices, get, positive_int
from analysis.stages.common import timed

KERNEL_SOURCES = ("fit", "paper")
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


def settings(cfg: Config) -> BoundsSettings:
    p = cfg.params
    cost = CostSettings(
        context_mode=choice(p, "bounds.context_mode", CONTEXT_MODES),
        context=positive_int(p, "bounds.context", minimum=0),
        extrapolate=get(p, "bounds.extrapolate", bool),
    ).validate()
    return BoundsSettings(
        kernel_sources=choices(p, "bounds.kernel_sources", KERNEL_SOURCES),
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


def select_kernels(kernel_sources, model: str, dtype: str, device: str, baselines, latency_form: str
                   ) -> list[tuple[str, str, LatencyModel]]:
    """(kernel source, baseline label, model) for each kernel source and, for `fit`, each baseline."""
    chosen = []
    if "fit" in kernel_sources:
        fitted = load_fitted_models()
        for baseline in baselines:
            chosen.append(("fit", baseline, select_model(fitted, model, dtype, device, baseline, latency_form)))
    if "paper" in kernel_sources:
        chosen.append(("paper", PAPER_BASELINE, paper_model()))
    return chosen


def kernel_models(s: BoundsSettings) -> list[tuple[str, str, LatencyModel]]:
    """(kernel source, baseline label, model) for every bound to compute."""
    return select_kernels(s.kernel_sources, s.model, s.dtype, s.device, s.baselines, s.latency_form)


def paper_pool(costs: pl.DataFrame, repeats: list[pl.DataFrame], s: BoundsSettings) -> pl.DataFrame:
    """The pooled rows over the paper's own corpora only (PAPER_CORPORA), so the paper's pooled bound
    stays comparable when this suite pools more corpora; empty when the pool holds nothing else."""
    mask = pl.col("corpus").is_in(PAPER_CORPORA)
    if costs.filter(~mask).height == 0 or costs.filter(mask).height == 0:
        return pl.DataFrame()
    keep = [r.filter(mask) for r in repeats]
    boot = s.bootstrap
    table = bounds_table(costs.filter(mask), boot.resamples, boot.seed, boot.ci, repeat_costs=keep,
                         pooled_bootstrap=s.pooled_bootstrap)
    return table.filter(pl.col("corpus") == POOLED).with_columns(pool=pl.lit("paper corpora"))


def bounds_for(spans: pl.DataFrame, s: BoundsSettings):
    """The bounds table, the per-case costs, the tokenization sensitivity and the paper-corpora
    pool, over every kernel."""
    tables, costs_all, tokenization, paper_pools = [], [], [], []
    boot = s.bootstrap
    gold_cost = CostSettings(s.cost.context_mode, s.cost.context, s.cost.prompt_column, "n_tokens", s.cost.extrapolate)
    for source, baseline, model in kernel_models(s):
        label = dict(kernel_source=pl.lit(source), baseline=pl.lit(baseline))
        costs = case_costs(spans, model, s.cost)
        repeats = repeat_costs(spans, model, s.cost) if s.kernel_repeats else []
        costs_all.append(costs.with_columns(**label))
        pool = paper_pool(costs, repeats, s)
        if pool.height:
            paper_pools.append(pool.with_columns(**label))
        t_step = float(model.t_step(s.cost.context, extrapolate=s.cost.extrapolate).seconds)
        tables.append(bounds_table(costs, boot.resamples, boot.seed, boot.ci, repeat_costs=repeats,
                                   pooled_bootstrap=s.pooled_bootstrap).with_columns(
            **label, t_step_ms=pl.lit(t_step * 1000 if source == "fit" else None, dtype=pl.Float64)))
        gold = bounds_table(case_costs(spans, model, gold_cost), 0, boot.seed, boot.ci)
        tokenization.append(gold.select("level", "corpus", "framing", "variant", "pooling",
                                        pl.col("bound").alias("bound_gold_prefill")).with_columns(**label))
    # in running mode there is no one context: each op has its own (prompt + output so far)
    context = s.cost.context if s.cost.context_mode == "fixed" else None
    table = pl.concat(tables).with_columns(model=pl.lit(s.model), dtype=pl.lit(s.dtype), device=pl.lit(s.device),
                                           context=pl.lit(context, dtype=pl.Int64),
                                           context_mode=pl.lit(s.cost.context_mode))
    tok = table.select(*KEYS, "bound").join(pl.concat(tokenization), on=KEYS).with_columns(
        rel_change=pl.col("bound_gold_prefill") / pl.col("bound") - 1)
    pools = pl.concat(paper_pools) if paper_pools else pl.DataFrame()
    return table, pl.concat(costs_all), tok, pools


def bound_metrics(table: pl.DataFrame) -> dict:
    return {
        f"{r['kernel_source']}/{r['baseline']}/{r['level']}/{r['variant']}/{r['framing']}/{r['corpus']}"
        + ("" if r["pooling"] != "mean_of_corpora" else "/mean_of_corpora"): {
            "bound": r["bound"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "extrapolated_spans": r["extrapolated_spans"]}
        for r in table.iter_rows(named=True)
    }


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("bounds"):
        spans = read_parquet(SPANS, "copydecode spans", ParamsError)
        check_fresh(SPANS, "copydecode spans")
        table, costs, tok, pools = bounds_for(spans, s)
        inputs = [SPANS, *([LATENCY_MODEL] if "fit" in s.kernel_sources else [])]
        write_parquet(costs, CASE_COSTS, metadata=parquet_metadata(inputs))
        write_table(table, TABLES / "bounds", digits=3)
        write_table(tok, TABLES / "bounds_tokenization", digits=4)
        write_table(pools, TABLES / "bounds_paper_pool", digits=3)
        fitted = table.filter((pl.col("kernel_source") == "fit") & (pl.col("pooling") != "mean_of_corpora"))
        where = (f"c={s.cost.context}" if s.cost.context_mode == "fixed"
                 else "c = prompt + output so far")
        title = (f"Closed-form bound: {s.model} {s.dtype} {s.device}, {s.latency_form} latency model, "
                 f"{where} ({charts.STAND_IN})")
        save_chart(charts.bounds(fitted, title), FIGURES / "bounds")
    write_json({"bounds": bound_metrics(table), "model": s.model, "dtype": s.dtype, "device": s.device,
                "context": s.cost.context if s.cost.context_mode == "fixed" else None, "context_mode": s.cost.context_mode, "latency_form": s.latency_form},
               METRICS / "bounds.json")
    return {"rows": table.height}
