"""The "measured in a real engine" page's views: the `engine summary` stage's tables and metrics, and the frozen
run's own records, shaped for display (the page's template is notebooks/engine.ipynb)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.engine.frozen import FROZEN, frozen_folder, read_frozen
from analysis.engine.methods import parse_engine_method
from analysis.layout import METRICS, TABLES
from analysis.results.numbers import fmt_pct, fmt_x
from analysis.results.outputs import metrics, table


def facts(metrics_dir: Path = METRICS) -> dict:
    return metrics("engine", metrics_dir)


def labelled(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with each method's label beside its name."""
    labels = {m: parse_engine_method(m).label for m in frame["method"].unique().to_list()}
    return frame.with_columns(label=pl.col("method").replace_strict(labels)).select("label", pl.exclude("label"))


def cards(gains: pl.DataFrame) -> list[tuple[str, str]]:
    """One card per load and non-AR method: its throughput over AR with the interval."""
    out = []
    for r in gains.filter(pl.col("method") != "ar").sort("concurrency", "method").iter_rows(named=True):
        out.append((f"{parse_engine_method(r['method']).label}, C = {r['concurrency']}",
                    f"{fmt_x(r['throughput_over_ar'])} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"))
    return out


def comparison_view(table: pl.DataFrame) -> pl.DataFrame:
    """The measured-against-predicted table narrowed to what a reader compares: each figure measured, predicted
    and the error, per fit, method and load."""
    figures = [f"{f}_{k}" for f in ("output_throughput", "ttft_p50_s", "tpot_p50_s")
               for k in ("measured", "predicted", "error")]
    return table.select("fit", "method", "concurrency", *figures, "repeats")


def simulator_sentence(errors: pl.DataFrame, target: float) -> str:
    parts = []
    for r in errors.iter_rows(named=True):
        verdict = "within" if r["within_target"] else "outside"
        parts.append(f"fitted on {r['fit']}: median throughput error {fmt_pct(r['output_throughput_mdape'])} ({verdict} the "
                     f"{fmt_pct(target)} target), TTFT {fmt_pct(r['ttft_p50_s_mdape'])}, TPOT {fmt_pct(r['tpot_p50_s_mdape'])}; "
                     f"the same method ranking at {r['loads_same_ranking']} of {r['loads']} loads")
    return "; ".join(parts)


def per_request(name: str, root: Path = FROZEN) -> pl.DataFrame:
    """The frozen run's per-request records, one row per request and run (ITL lists left out)."""
    return read_frozen(frozen_folder(name, root)).records


def request_summary(records: pl.DataFrame) -> pl.DataFrame:
    """Per method and load over every request and repeat: medians of the per-request figures, the share with the
    gold text, and the drafted and accepted tokens (speculative methods)."""
    return labelled(records.group_by("method", "concurrency").agg(
        requests=pl.len(), same_text=pl.col("same_text").mean(), ttft_p50_s=pl.col("ttft_s").median(),
        tpot_p50_s=pl.col("tpot_s").median(), e2e_p50_s=pl.col("e2e_s").median(),
        output_tokens=pl.col("output_tokens").sum(), gold_tokens=pl.col("gold_tokens").sum(),
        engine_requests=pl.col("engine_requests").sum(), prefilled=pl.col("prefilled_tokens").sum(),
        cached=pl.col("cached_tokens").sum(), drafted=pl.col("drafted_tokens").sum(),
        accepted=pl.col("accepted_tokens").sum()).with_columns(
        acceptance=pl.when(pl.col("drafted") > 0).then(pl.col("accepted") / pl.col("drafted")))
        .sort("concurrency", "method"))


def tables(tables_dir: Path = TABLES) -> dict[str, pl.DataFrame]:
    return {name: table(f"engine_{name}", tables_dir) for name in ("runs", "speedups", "vs_simulator", "ranking", "error")}
