"""`copydecode serving replay`: the simulator checked against real steps.

Reads data/serving/steps.parquet (a seeded sample of the simulated steps of the measured source: per step,
each sequence's q and context; written by `serving simulate`), reports/kernels/step_cost.json (that source's
step-cost model and the spec it was measured with: model, weights, dtype, device, threads) and params
`serving.replay` (warm-up, repeats, order seed, noise flags). Times every sampled step as one real batched
forward (kernels_profile.measure.batched, the same engine the profile ran) and sets the measured median
beside the model's prediction. Writes data/serving/replay.parquet (every timing), reports/tables/serving_replay.csv
(per step), reports/tables/serving_replay_summary.csv (per step mix, per concurrency and per method: median
absolute percentage error) and reports/metrics/serving_replay.json (the error per step mix, the share of replayed
steps with more than one sequence, and whether every step mix meets the target).

The sample is stratified by step mix (analysis.serving.scheduler.STRATA: decode only, prefill chunk, copy chunk,
verify, mixed) and concurrency (analysis.stages.serving.replay_sample), so batched steps and copy chunks are timed
even where decode steps outnumber them. The target (under 15% median absolute percentage error) is said to be met
only when every step mix meets it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from analysis.errors import MissingOutputError, ParamsError
from analysis.latency.stepcost import StepCostModel, read_step_cost, step_summary
from analysis.layout import METRICS, REPLAY_CHECKPOINTS, REPLAY_RAW, STEP_COST, TABLES
from analysis.parallel.progress import timed
from analysis.pipeline.io import output_set, write_json, write_table
from analysis.pipeline.params import check_threads, get
from analysis.serving.steps import STEPS, read_steps
from kernels_profile.measure.batched import DEVICES, Step, bench_environment
from kernels_profile.measure.batched_session import StepSet, run_step_sets
from kernels_profile.measure.sidecar import write_with_sidecar
from kernels_profile.measure.timing import Timing
from kernels_profile.runtime.checkpoints import checkpoint_key, fingerprint
from kernels_profile.runtime.loading import set_threads
from kernels_profile.runtime.models import DTYPES, build_model, check_fits, torch_dtype

TARGET_MAPE = 0.15  # the target for the median absolute percentage error of every step mix


@dataclass(frozen=True)
class ReplaySettings:
    source: str
    timing: Timing


# `copydecode serving replay`: its help line and what it reads and writes (the CLI's --help)
HELP = "replay simulated steps as real batched forwards and compare measured with predicted step time"
READS_WRITES = ("reads data/serving/steps.parquet, reports/kernels/step_cost.json and the model's weights (params "
                "serving.replay); writes data/serving/replay.parquet, data/serving/replay.environment.json, "
                "reports/tables/serving_replay.*, reports/tables/serving_replay_summary.*, "
                "reports/metrics/serving_replay.json")


def settings(params: dict) -> ReplaySettings:
    return ReplaySettings(get(params, "serving.replay.source", str), Timing.from_params(params, "serving.replay"))


def measured_model(path: Path, source: str) -> tuple[StepCostModel, MeasuredSpec]:
    """The measured source's step-cost model and the batched profile's spec it was measured with, both read
    from the run folder's document and checked as the params are (threads, dtype, device, grid) before any
    model is built: a run folder is data."""
    if not Path(path).is_file():
        raise MissingOutputError(f"{path} not found; run `copydecode kernels profile --batched` first")
    found, document = read_step_cost(path)
    models = {m.source: m for m in found}
    if source not in models:
        raise ParamsError(f"serving.replay.source {source!r} is not in {path} (it holds {sorted(models)})")
    model = models[source]
    if model.extrapolated:
        raise ParamsError(f"serving.replay.source {source!r} is extrapolated from batch 1; the replay times the "
                          "measured source on this machine")
    return model, recorded_spec(document, path)


@dataclass(frozen=True)
class MeasuredSpec:
    """What the batched profile measured the replayed source with (its document's `environment.spec`)."""

    model: str
    weights: str
    dtype: str
    device: str
    threads: int | None
    seed: int


def recorded_spec(document: dict, path: Path) -> MeasuredSpec:
    """The document's spec, checked as params kernels.batched are (a thread count of 100,000 built a model
    and hung; -1 or "many" raised in torch)."""
    where = f"{path}: environment.spec"
    environment = document.get("environment")
    spec = environment.get("spec") if isinstance(environment, dict) else None
    names = [f.name for f in fields(MeasuredSpec)]
    if not isinstance(spec, dict) or set(names) - set(spec):
        raise ParamsError(f"{path} does not record the batched profile's spec; rerun `copydecode kernels profile --batched`")
    for name in ("model", "weights", "dtype", "device"):
        if not isinstance(spec[name], str) or not spec[name]:
            raise ParamsError(f"{where}.{name} must be a non-empty name, got {spec[name]!r}"[:200])
    if spec["dtype"] not in DTYPES:
        raise ParamsError(f"{where}.dtype {spec['dtype'][:40]!r} unknown; known: {', '.join(DTYPES)}")
    if spec["device"] not in DEVICES:
        raise ParamsError(f"{where}.device must be one of {', '.join(DEVICES)}, got {spec['device'][:40]!r}")
    if isinstance(spec["seed"], bool) or not isinstance(spec["seed"], int) or spec["seed"] < 0:
        raise ParamsError(f"{where}.seed must be an integer >= 0, got {spec['seed']!r}"[:200])
    return MeasuredSpec(**{n: spec[n] for n in names if n != "threads"}, threads=check_threads(spec["threads"], f"{where}.threads"))


def compare(summary: pl.DataFrame, sampled: pl.DataFrame, model: StepCostModel) -> pl.DataFrame:
    """Per replayed step: measured median (and IQR), the model's prediction, the percentage error, its step mix."""
    keep = [c for c in ("step_id", "method", "concurrency", "stratum") if c in sampled.columns]
    if "stratum" not in keep:
        raise MissingOutputError(f"{STEPS} has no step mix (stratum) column: stale output, rerun `copydecode serving simulate`")
    joined = summary.join(sampled.select(keep), on="step_id", how="left")
    return joined.with_columns(predicted_s=pl.Series(model.predict(joined))).with_columns(
        error=pl.col("predicted_s") / pl.col("seconds") - 1.0, mix=pl.col("stratum"),
    ).drop("stratum").sort("mix", "concurrency", "step_id")


def error_summary(rows: pl.DataFrame) -> pl.DataFrame:
    """The error per step mix (and per mix and concurrency), per method, and over every step."""
    def agg(frame) -> pl.DataFrame:
        return frame.agg(steps=pl.len(), batched_steps=(pl.col("batch") > 1).sum(),
                         mdape=pl.col("error").abs().median(), mape_mean=pl.col("error").abs().mean(),
                         median_signed_error=pl.col("error").median(), worst=pl.col("error").abs().max(),
                         noisy_share=pl.col("noisy_share").mean())
    everything = pl.lit("all")
    parts = [agg(rows.group_by(method=everything, mix=everything, concurrency=pl.lit(None, pl.Int64))),
             agg(rows.group_by("mix", method=everything, concurrency=pl.lit(None, pl.Int64))),
             agg(rows.group_by("mix", "concurrency", method=everything)),
             agg(rows.group_by("method", mix=everything, concurrency=pl.lit(None, pl.Int64)))]
    return pl.concat(parts, how="diagonal_relaxed").sort("method", "mix", "concurrency", nulls_last=False)


def replay_metrics(summary: pl.DataFrame, rows: pl.DataFrame) -> dict:
    """The overall error, the error per step mix, the batched share and whether every step mix meets the target."""
    overall = summary.filter((pl.col("method") == "all") & (pl.col("mix") == "all")).row(0, named=True)
    mixes = summary.filter((pl.col("method") == "all") & (pl.col("mix") != "all") & pl.col("concurrency").is_null())
    per_mix = {r["mix"]: {"mdape": r["mdape"], "steps": r["steps"], "batched_steps": r["batched_steps"],
                          "median_signed_error": r["median_signed_error"]} for r in mixes.iter_rows(named=True)}
    return {"mdape": overall["mdape"], "target": TARGET_MAPE, "steps": overall["steps"],
            "batched_share": float((rows["batch"] > 1).mean()), "per_mix": per_mix,
            "target_met": all(m["mdape"] <= TARGET_MAPE for m in per_mix.values()),
            "per_method": {r["method"]: r["mdape"] for r in summary.filter(pl.col("mix") == "all").iter_rows(named=True)}}


def run(s: ReplaySettings) -> dict:
    with timed("serving_replay"):
        model, spec = measured_model(STEP_COST, s.source)
        if not STEPS.is_file():
            raise MissingOutputError(f"{STEPS} not found; run `copydecode serving simulate` first")
        sampled = read_steps(STEPS)
        if sampled.height == 0:
            raise ParamsError(f"{STEPS} holds no step (serving.replay: no simulated step within max_context)")
        steps = {r["step_id"]: Step(tuple(r["qs"]), tuple(r["contexts"])) for r in sampled.iter_rows(named=True)}
        set_threads(spec.threads)
        torch_dtype(spec.dtype, spec.device)
        check_fits(spec.model, spec.dtype, spec.device,  # the largest step's cache, before allocating
                   max(sum(s.qs) + sum(s.contexts) for s in steps.values()), max(sum(s.qs) for s in steps.values()),
                   smaller="a lower serving.replay.max_context")
        timing = s.timing
        prints = fingerprint(spec.model, spec.weights)
        identity = {"model": spec.model, "weights": spec.weights, "dtype": spec.dtype, "device": spec.device}
        result = run_step_sets(
            lambda: build_model(spec.model, spec.weights, spec.dtype, spec.device, spec.seed), identity,
            [StepSet("replay", steps)], timing, REPLAY_CHECKPOINTS,
            lambda name, shapes, repeat: checkpoint_key("replay-1", identity, spec.threads, name, shapes, repeat, prints),
            bench_environment)
        rows = compare(step_summary(result.raw), sampled, model)
        summary = error_summary(rows)
        metrics = {**replay_metrics(summary, rows), "noisy": result.environment["noisy"],
                   "noisy_reasons": result.environment["noisy_reasons"], "source": s.source, "model": spec.model,
                   "threads": spec.threads}
        with output_set("serving replay"):  # its checkpoints landed as they finished; its outputs land as one set
            write_with_sidecar(result.raw, result.environment, REPLAY_RAW, "serving_replay")
            write_table(rows, TABLES / "serving_replay", digits=6)
            write_table(summary, TABLES / "serving_replay_summary", digits=4)
            write_json(metrics, METRICS / "serving_replay.json")
    return metrics
