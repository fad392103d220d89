"""Result stages: bounds, perturbation, edit formats and token boundaries (`copydecode bounds|perturb|formats`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import polars as pl

from analysis import corpora
from analysis.bounds import KernelModel, bounds_table, case_costs
from analysis.errors import ParamsError
from analysis.formats import boundary_summary, format_costs, span_boundary_rows
from analysis.io import save_chart, write_json, write_parquet, write_table
from analysis.params import get, positive_int
from analysis.perturb import PerturbCase, em_table, run_perturbation
from analysis.program import parse
from analysis.stages import FIGURES, METRICS, PROGRAMS, SPANS, TABLES, _joined_programs, _progress
from analysis.tokenization import load_tokenizer

LATENCY_MODEL = Path("reports/kernels/latency_model.json")
CASE_COSTS = Path("data/bounds/case_costs.parquet")
PERTURB_RESULTS = Path("data/perturb/results.parquet")


# ---------------------------------------------------------------- bounds

def load_kernel_fits(path: Path = LATENCY_MODEL) -> list[dict]:
    if not path.is_file():
        raise ParamsError(f"{path} not found; run `copydecode kernels fit` (or `dvc repro`) first")
    return json.loads(path.read_text())["fits"]


def select_fit(fits: list[dict], model: str, dtype: str, device: str, baseline: str) -> dict:
    for fit in fits:
        if (fit["model"], fit["dtype"], fit["device"], fit["baseline"]) == (model, dtype, device, baseline):
            return fit
    have = sorted({f"{f['model']}/{f['dtype']}/{f['device']}/{f['baseline']}" for f in fits})
    raise ParamsError(f"no latency fit for {model}/{dtype}/{device}/{baseline}; fitted: {have}")


def bounds_chart(table: pl.DataFrame, title: str):
    import altair as alt

    data = table.filter(pl.col("framing").is_in(["body", "unit"])).to_pandas()
    base = alt.Chart(data).encode(
        x=alt.X("corpus:N", title=None),
        xOffset="variant:N",
    )
    bars = base.mark_bar().encode(y=alt.Y("bound:Q", title="closed-form speedup (x)"), color="variant:N")
    errs = base.mark_errorbar().encode(y=alt.Y("ci_low:Q", title="closed-form speedup (x)"), y2="ci_high:Q")
    return (bars + errs).properties(width=260, height=220).facet(
        column=alt.Column("level:N", title=None), row=alt.Row("baseline:N", title="AR baseline")
    ).properties(title=title)


def run_bounds(params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    fits = load_kernel_fits()
    model, dtype, device = (get(params, f"bounds.{k}", str) for k in ("model", "dtype", "device"))
    context = positive_int(params, "bounds.context", minimum=0)
    spans = pl.read_parquet(SPANS)
    resamples = positive_int(params, "bounds.bootstrap_resamples", minimum=0)
    seed, ci = get(params, "bounds.seed", int), float(get(params, "bounds.ci", float))
    tables, costs_all, tokenization = [], [], []
    for baseline in get(params, "bounds.baselines", list):
        kernel = KernelModel.from_fit(select_fit(fits, model, dtype, device, baseline))
        costs = case_costs(spans, kernel, context)
        costs_all.append(costs.with_columns(baseline=pl.lit(baseline)))
        tables.append(bounds_table(costs, resamples, seed, ci).with_columns(baseline=pl.lit(baseline),
                                                                            t_step_ms=pl.lit(kernel.t_step(context) * 1000)))
        gold = bounds_table(case_costs(spans, kernel, context, prefill_tokens="n_tokens"), 0, seed, ci)
        tokenization.append(gold.select("level", "corpus", "framing", "variant", pl.col("bound").alias("bound_gold_prefill"))
                            .with_columns(baseline=pl.lit(baseline)))
    table = pl.concat(tables).with_columns(model=pl.lit(model), dtype=pl.lit(dtype), device=pl.lit(device),
                                           context=pl.lit(context))
    write_parquet(pl.concat(costs_all), CASE_COSTS)
    write_table(table, TABLES / "bounds", digits=3)
    tok = table.select("level", "corpus", "framing", "variant", "baseline", "bound").join(
        pl.concat(tokenization), on=["level", "corpus", "framing", "variant", "baseline"]
    ).with_columns(rel_change=pl.col("bound_gold_prefill") / pl.col("bound") - 1)
    write_table(tok, TABLES / "bounds_tokenization", digits=4)
    title = f"Closed-form bound: {model} {dtype} {device}, c={context} (ProbeEdit-S is a stand-in)"
    save_chart(bounds_chart(table, title), FIGURES / "bounds")
    metrics = {
        f"{r['baseline']}/{r['level']}/{r['variant']}/{r['framing']}/{r['corpus']}": {
            "bound": r["bound"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]}
        for r in table.iter_rows(named=True)
    }
    write_json({"bounds": metrics, "model": model, "dtype": dtype, "device": device, "context": context,
                "seconds": round(time.perf_counter() - started, 3)}, METRICS / "bounds.json")
    return {"rows": table.height, "seconds": round(time.perf_counter() - started, 3)}


# ---------------------------------------------------------------- perturbation

def perturb_cases(table: pl.DataFrame, tokenizer, levels: list[str]) -> list[PerturbCase]:
    table = table.filter(pl.col("level").is_in(levels))
    needs_tokens = "token" in levels
    sources = tokenizer.encode_many(table["source"].to_list()) if needs_tokens else [None] * table.height
    return [
        PerturbCase(r["case_id"], r["corpus"], r["framing"], r["level"], parse(r["program"]), r["source"],
                    r["target"], src.char_bounds if src is not None and r["level"] == "token" else None)
        for r, src in zip(table.iter_rows(named=True), sources)
    ]


def perturbation_chart(table: pl.DataFrame):
    import altair as alt

    data = table.filter(pl.col("corpus") != "pooled").filter(pl.col("framing").is_in(["body", "unit"]))
    pooled = table.filter((pl.col("corpus") == "pooled") & (pl.col("framing") == "body"))
    data = pl.concat([data, pooled]).to_pandas()
    return (
        alt.Chart(data).mark_line(point=True)
        .encode(x=alt.X("rate:Q", title="share of copy spans perturbed"),
                y=alt.Y("em:Q", title="exact match", scale=alt.Scale(domain=[0, 1])),
                color=alt.Color("corpus:N"), strokeDash="level:N")
        .properties(width=200, height=180)
        .facet(column=alt.Column("kind:N", title="perturbation"))
        .properties(title="EM under off-by-one span noise (body framing; ProbeEdit-S is a stand-in)")
    )


def run_perturb(params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    tokenizer = load_tokenizer(get(params, "tokenizer.spec", str))
    levels = get(params, "perturb.levels", list)
    framings = get(params, "perturb.framings", list)
    table = _joined_programs().filter(pl.col("framing").is_in(framings + ["unit"]))
    cases = perturb_cases(table, tokenizer, levels)
    n_seeds = positive_int(params, "perturb.seeds")
    results = run_perturbation(
        list(_progress(cases, "perturbation", len(cases))),
        get(params, "perturb.kinds", list), [float(r) for r in get(params, "perturb.rates", list)],
        list(range(get(params, "perturb.seed", int), get(params, "perturb.seed", int) + n_seeds)),
    )
    write_parquet(results, PERTURB_RESULTS)
    table = em_table(results)
    write_table(table, TABLES / "perturbation", digits=4)
    table.filter(pl.col("corpus") == "pooled").select("level", "kind", "rate", "framing", "em").write_csv(
        TABLES / "perturbation_plot.csv")
    save_chart(perturbation_chart(table), FIGURES / "perturbation")
    at_one = table.filter(pl.col("rate") == 1.0)
    metrics = {
        f"{r['level']}/{r['kind']}/{r['framing']}/{r['corpus']}": {"em_at_rate_1": r["em"], "invalid": r["invalid"],
                                                                    "no_copy": r["no_copy"]}
        for r in at_one.iter_rows(named=True)
    }
    write_json({"perturbation": metrics, "seconds": round(time.perf_counter() - started, 3)}, METRICS / "perturbation.json")
    return {"rows": results.height, "seconds": round(time.perf_counter() - started, 3)}


# ---------------------------------------------------------------- formats and token boundaries

def run_formats(params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    tokenizer = load_tokenizer(get(params, "tokenizer.spec", str))
    context = positive_int(params, "formats.udiff_context", minimum=0)
    programs = _joined_programs()
    wide = programs.pivot(on="level", index=["case_id", "corpus", "framing", "source", "target"], values="program")
    cost_rows, boundary_rows = [], []
    sources = tokenizer.encode_many(wide["source"].to_list())
    targets = tokenizer.encode_many(wide["target"].to_list())
    for row, src, tgt in _progress(zip(wide.iter_rows(named=True), sources, targets), "edit formats", wide.height):
        costs = format_costs(tokenizer, row["source"], row["target"], {"line": row["line"], "token": row["token"]}, context)
        cost_rows.append({"case_id": row["case_id"], "corpus": row["corpus"], "framing": row["framing"], **costs})
        for level in ("line", "token"):
            for span in span_boundary_rows(parse(row[level]), src, tgt, tokenizer):
                boundary_rows.append({"level": level, "corpus": row["corpus"], "framing": row["framing"], **span})
    costs = pl.DataFrame(cost_rows)
    formats = [c for c in costs.columns if c not in ("case_id", "corpus", "framing")]
    summary = costs.group_by("corpus", "framing").agg(
        [pl.len().alias("n_cases")] + [pl.col(f).sum().alias(f) for f in formats]
    ).with_columns([(pl.col(f) / pl.col("rewrite")).alias(f"{f}_vs_rewrite") for f in formats if f != "rewrite"]).sort("framing", "corpus")
    write_table(summary, TABLES / "edit_formats", digits=3)
    boundaries = boundary_summary(pl.DataFrame(boundary_rows))
    write_table(boundaries, TABLES / "token_boundaries", digits=4)
    write_json({
        "edit_formats": {f"{r['framing']}/{r['corpus']}": {f: r[f] for f in formats} for r in summary.iter_rows(named=True)},
        "token_boundaries": {f"{r['level']}/{r['framing']}/{r['corpus']}": {"mismatch_share": r["mismatch_share"],
                                                                          "token_delta": r["token_delta"]}
                             for r in boundaries.iter_rows(named=True)},
        "seconds": round(time.perf_counter() - started, 3),
    }, METRICS / "formats.json")
    return {"cases": costs.height, "seconds": round(time.perf_counter() - started, 3)}
