"""`copydecode bounds`: closed-form bounds (ideal and with directive overhead) with bootstrap CIs."""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

from analysis import charts
from analysis.bounds import KernelModel, bounds_table, case_costs
from analysis.config import Bootstrap, Config, bootstrap_settings
from analysis.errors import ParamsError
from analysis.io import read_parquet, save_chart, write_json, write_parquet, write_table
from analysis.layout import CASE_COSTS, FIGURES, LATENCY_MODEL, METRICS, SPANS, TABLES
from analysis.params import choices, get, positive_int
from analysis.stages.common import timed


@dataclass(frozen=True)
class BoundsSettings:
    model: str
    dtype: str
    device: str
    baselines: tuple[str, ...]
    context: int
    bootstrap: Bootstrap


BASELINES = ("eager", "static", "static_compiled")


def settings(cfg: Config) -> BoundsSettings:
    p = cfg.params
    return BoundsSettings(
        model=get(p, "bounds.model", str), dtype=get(p, "bounds.dtype", str), device=get(p, "bounds.device", str),
        baselines=choices(p, "bounds.baselines", BASELINES),
        context=positive_int(p, "bounds.context", minimum=0),
        bootstrap=bootstrap_settings(p, "bounds"),
    )

KEYS = ["level", "corpus", "framing", "variant", "baseline"]


def load_kernel_fits() -> list[dict]:
    if not LATENCY_MODEL.is_file():
        raise ParamsError(f"{LATENCY_MODEL} not found; run `copydecode kernels fit` (or `dvc repro`) first")
    try:
        return json.loads(LATENCY_MODEL.read_text())["fits"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ParamsError(f"{LATENCY_MODEL} is not a latency model file ({exc}); rerun `copydecode kernels fit`") from exc


def select_fit(fits: list[dict], model: str, dtype: str, device: str, baseline: str) -> dict:
    for fit in fits:
        if (fit["model"], fit["dtype"], fit["device"], fit["baseline"]) == (model, dtype, device, baseline):
            return fit
    have = sorted({f"{f['model']}/{f['dtype']}/{f['device']}/{f['baseline']}" for f in fits})
    raise ParamsError(f"no latency fit for {model}/{dtype}/{device}/{baseline}; fitted: {have}")


def bounds_for(spans: pl.DataFrame, fits: list[dict], s: BoundsSettings):
    """The bounds table, the per-case costs and the tokenization sensitivity, over every baseline."""
    tables, costs_all, tokenization = [], [], []
    boot = s.bootstrap
    for baseline in s.baselines:
        kernel = KernelModel.from_fit(select_fit(fits, s.model, s.dtype, s.device, baseline))
        costs = case_costs(spans, kernel, s.context)
        costs_all.append(costs.with_columns(baseline=pl.lit(baseline)))
        tables.append(bounds_table(costs, boot.resamples, boot.seed, boot.ci).with_columns(
            baseline=pl.lit(baseline), t_step_ms=pl.lit(kernel.t_step(s.context) * 1000)))
        gold = bounds_table(case_costs(spans, kernel, s.context, prefill_tokens="n_tokens"), 0, boot.seed, boot.ci)
        tokenization.append(gold.select("level", "corpus", "framing", "variant", pl.col("bound").alias("bound_gold_prefill"))
                            .with_columns(baseline=pl.lit(baseline)))
    table = pl.concat(tables).with_columns(model=pl.lit(s.model), dtype=pl.lit(s.dtype), device=pl.lit(s.device),
                                           context=pl.lit(s.context))
    tok = table.select(*KEYS, "bound").join(pl.concat(tokenization), on=KEYS).with_columns(
        rel_change=pl.col("bound_gold_prefill") / pl.col("bound") - 1)
    return table, pl.concat(costs_all), tok


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("bounds"):
        fits = load_kernel_fits()
        spans = read_parquet(SPANS, "copydecode spans", ParamsError)
        table, costs, tok = bounds_for(spans, fits, s)
        write_parquet(costs, CASE_COSTS)
        write_table(table, TABLES / "bounds", digits=3)
        write_table(tok, TABLES / "bounds_tokenization", digits=4)
        title = f"Closed-form bound: {s.model} {s.dtype} {s.device}, c={s.context} ({charts.STAND_IN})"
        save_chart(charts.bounds(table, title), FIGURES / "bounds")
    metrics = {
        f"{r['baseline']}/{r['level']}/{r['variant']}/{r['framing']}/{r['corpus']}": {
            "bound": r["bound"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]}
        for r in table.iter_rows(named=True)
    }
    write_json({"bounds": metrics, "model": s.model, "dtype": s.dtype, "device": s.device, "context": s.context},
               METRICS / "bounds.json")
    return {"rows": table.height}
