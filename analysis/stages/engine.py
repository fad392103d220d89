"""`copydecode engine summary`: the frozen engine run read back and the simulator checked against it.

Reads the frozen run `reports/engine/frozen/<engine.frozen_run>/` (written by `copydecode engine run`; read here
as data, analysis.engine.frozen) and params `engine.compare`. Refits the step-cost model to the engine's own
steps and reruns the rivals and serving simulations on the run's requests (analysis.engine.compare). Writes
reports/tables/engine_runs.* (per run: measured figures), engine_speedups.* (per method and load: throughput
over AR with a paired request-bootstrap interval), engine_vs_simulator.* (measured against predicted, per fit,
method and load), engine_ranking.* (per load: the method orders and whether they agree), engine_error.* (per fit:
median errors), engine_decision.* (per load: Copy-as-Decode against the fastest rival the engine ran),
reports/metrics/engine.json (with the claims row) and the charts
reports/figures/engine_vs_simulator.* and engine_speedup.*. Cheap: no engine runs here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.engine.compare import (FITS, comparison, decisions, error_summary, fit_engine_steps, measured, predictions,
                                     rankings, speedups)
from analysis.engine.frozen import FROZEN, frozen_folder, read_frozen, simulation_inputs
from analysis.engine.verdict import engine_claim
from analysis.layout import FIGURES, METRICS, TABLES
from analysis.parallel.progress import timed
from analysis.pipeline.io import save_chart, write_json, write_table
from analysis.pipeline.params import get, number, positive_int
from analysis.present import enginecharts

HELP = "read the frozen engine run (vLLM) and check the serving simulator against it"
READS_WRITES = ("reads reports/engine/frozen/<engine.frozen_run>/ (run.json, requests.json, gold.json, plans.json, "
                "requests.jsonl, results/, steps.jsonl) and params engine.compare; writes reports/tables/engine_runs.*, "
                "reports/tables/engine_speedups.*, reports/tables/engine_vs_simulator.*, reports/tables/engine_ranking.*, "
                "reports/tables/engine_error.*, reports/tables/engine_decision.*, reports/metrics/engine.json, "
                "reports/figures/engine_vs_simulator.* and "
                "reports/figures/engine_speedup.*")

@dataclass(frozen=True)
class EngineSummarySettings:
    folder: Path
    resamples: int
    seed: int
    target_error: float


def settings(params: dict) -> EngineSummarySettings:
    return EngineSummarySettings(frozen_folder(get(params, "engine.frozen_run", str), FROZEN),
                                 positive_int(params, "engine.compare.resamples"),
                                 positive_int(params, "engine.compare.seed", 0),
                                 number(params, "engine.compare.target_error", lo=0.0, hi=10.0))


def copied_share(plans: dict | None, gold: dict) -> float | None:
    """The share of the gold tokens that Copy-as-Decode's programs copy (source tokens prefilled by a copy)."""
    if not plans:
        return None
    copied = sum(len(stage["append_ids"]) for plan in plans.values() for stage in plan["chain"])
    return copied / sum(len(g["ids"]) for g in gold.values())


def run(s: EngineSummarySettings) -> dict:
    with timed("engine_summary"):
        frozen = read_frozen(s.folder)
        inp = simulation_inputs(frozen)
        runs = measured(frozen.results)
        methods = sorted(runs["method"].unique().to_list())
        loads = sorted(runs["concurrency"].unique().to_list())
        repeats = sorted(runs["repeat"].unique().to_list())
        fits = {fit: fit_engine_steps(frozen.steps, fit) for fit in FITS}
        predicted = pl.concat([predictions(methods, loads, repeats, inp, cost, fit) for fit, cost in fits.items()])
        table = comparison(runs, predicted)
        ranks = rankings(table)
        errors = error_summary(table, ranks, s.target_error)
        gains = speedups(frozen.records, runs, s.resamples, s.seed)
        decided = decisions(frozen.records, gains, s.resamples, s.seed)
        write_table(runs.sort("method", "concurrency", "repeat"), TABLES / "engine_runs", digits=4)
        write_table(gains, TABLES / "engine_speedups", digits=3)
        write_table(decided, TABLES / "engine_decision", digits=4)
        write_table(table, TABLES / "engine_vs_simulator", digits=4)
        write_table(ranks, TABLES / "engine_ranking", digits=3)
        write_table(errors, TABLES / "engine_error", digits=3)
        record = frozen.record
        engine = {"engine_version": frozen.results[0].get("engine_version"), "cpu": record["machine"].get("cpu_model"),
                  "model": record.get("model", {}).get("model"), "frozen_run": s.folder.name, "commit": record["commit"]}
        copied = copied_share(frozen.plans, frozen.gold)
        claim = engine_claim(gains, errors, ranks, engine, record.get("suffix_not_run"), copied)
        metrics = {**engine, "requests": len(frozen.requests), "runs": len(frozen.results), "methods": methods,
                   "concurrency": loads, "repeats": len(repeats),
                   "same_text_share": float(frozen.records["same_text"].mean()), "copied_share": copied,
                   "speedups": {f"{r['method']}@c{r['concurrency']}": r["throughput_over_ar"]
                                for r in gains.iter_rows(named=True)},
                   "simulator": {r["fit"]: {"throughput_mdape": r["output_throughput_mdape"],
                                            "ttft_mdape": r["ttft_p50_s_mdape"], "tpot_mdape": r["tpot_p50_s_mdape"],
                                            "loads_same_ranking": r["loads_same_ranking"], "loads": r["loads"]}
                                 for r in errors.iter_rows(named=True)},
                   "step_cost": {fit: cost.to_record() | {"diagnostics": {k: v for k, v in cost.diagnostics.items()
                                                                          if k != "residuals"}}
                                 for fit, cost in fits.items()},
                   "target_error": s.target_error, "suffix_not_run": record.get("suffix_not_run"), "claim": claim}
        write_json(metrics, METRICS / "engine.json")
        title = f"vLLM {engine['engine_version']} on {engine['cpu']}: measured against simulated"
        save_chart(enginecharts.engine_vs_simulator(table, title), FIGURES / "engine_vs_simulator")
        save_chart(enginecharts.engine_speedup(gains, f"Measured in vLLM {engine['engine_version']} ({engine['model']}, CPU): "
                                                "throughput over AR, paired request-bootstrap 95% CIs"),
                   FIGURES / "engine_speedup")
    return {k: metrics[k] for k in ("frozen_run", "runs", "same_text_share")} | {
        "throughput_mdape": {fit: v["throughput_mdape"] for fit, v in metrics["simulator"].items()}}
