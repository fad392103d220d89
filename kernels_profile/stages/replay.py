"""`copydecode serving replay`: the simulator checked against real steps.

Reads data/serving/steps.parquet (a seeded sample of the simulated steps of the measured source: per step,
each sequence's q and context; written by `serving simulate`), reports/kernels/step_cost.json (that source's
step-cost model and the spec it was measured with: model, weights, dtype, device, threads) and params
`serving.replay` (warm-up, repeats, order seed, noise flags). Times every sampled step as one real batched
forward (kernels_profile.measure.batched, the same engine the profile ran) and sets the measured median
beside the model's prediction. Writes data/serving/replay.parquet (every timing), reports/tables/serving_replay.csv
(per step), reports/tables/serving_replay_summary.csv (per method and step mix: median absolute percentage
error) and reports/metrics/serving_replay.json.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from analysis.errors import MissingOutputError, ParamsError
from analysis.latency.stepcost import StepCostModel, read_step_cost, step_summary
from analysis.layout import METRICS, STEP_COST, TABLES
from analysis.parallel.progress import timed
from analysis.pipeline.io import output_set, write_json, write_table
from analysis.pipeline.params import check_slack, check_threads, check_threshold, get, number, positive_int
from analysis.serving.steps import STEPS, read_steps
from kernels_profile.measure.batched import DEVICES, Step, bench_environment
from kernels_profile.measure.batched_session import StepSet, Timing, run_step_sets, write_result
from kernels_profile.runtime.checkpoints import checkpoint_key, fingerprint
from kernels_profile.runtime.loading import set_threads
from kernels_profile.runtime.models import DTYPES, build_model, check_fits, torch_dtype

REPLAY_RAW = Path("data/serving/replay.parquet")
REPLAY_CHECKPOINTS = Path("data/serving/replay_checkpoints")
TARGET_MAPE = 0.15  # the target for the median absolute percentage error


@dataclass(frozen=True)
class ReplaySettings:
    source: str
    repeats: int
    warmup: int
    order_seed: int
    noisy_drift: float
    reference_budget_s: float
    contention_slack: float


# `copydecode serving replay`: its help line and what it reads and writes (the CLI's --help)
HELP = "replay simulated steps as real batched forwards and compare measured with predicted step time"
READS_WRITES = ("reads data/serving/steps.parquet, reports/kernels/step_cost.json and the model's weights (params "
                "serving.replay); writes data/serving/replay.parquet, data/serving/replay.environment.json, "
                "reports/tables/serving_replay.*, reports/tables/serving_replay_summary.*, "
                "reports/metrics/serving_replay.json")


def settings(params: dict) -> ReplaySettings:
    return ReplaySettings(
        source=get(params, "serving.replay.source", str),
        repeats=positive_int(params, "serving.replay.repeats"),
        warmup=positive_int(params, "serving.replay.warmup", minimum=0),
        order_seed=positive_int(params, "serving.replay.order_seed", minimum=0),
        noisy_drift=check_threshold(number(params, "serving.replay.noisy_drift"), "serving.replay.noisy_drift"),
        reference_budget_s=number(params, "serving.replay.reference_budget_s", lo=1e-3),
        contention_slack=check_slack(number(params, "serving.replay.contention_slack"), "serving.replay.contention_slack"))


def step_mix(qs: list[int]) -> str:
    """How a step is made up: decodes only, small chunks (verifies and short copies, q <= 16), or a long chunk."""
    top = max(qs)
    return "decode only" if top == 1 else ("q <= 16" if top <= 16 else "a chunk q > 16")


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
    """Per replayed step: measured median (and IQR), the model's prediction, the percentage error."""
    joined = summary.join(sampled.select("step_id", "method", "concurrency", "qs"), on="step_id", how="left")
    return joined.with_columns(predicted_s=pl.Series(model.predict(joined))).with_columns(
        error=pl.col("predicted_s") / pl.col("seconds") - 1.0,
        mix=pl.col("qs").map_elements(step_mix, return_dtype=pl.String),
    ).drop("qs").sort("method", "concurrency", "step_id")


def error_summary(rows: pl.DataFrame) -> pl.DataFrame:
    def agg(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.agg(steps=pl.len(), mdape=pl.col("error").abs().median(), mape_mean=pl.col("error").abs().mean(),
                         median_signed_error=pl.col("error").median(), worst=pl.col("error").abs().max(),
                         noisy_share=pl.col("noisy_share").mean())
    by_method = agg(rows.group_by("method")).with_columns(mix=pl.lit("all"))
    by_mix = agg(rows.group_by("method", "mix"))
    overall = agg(rows.group_by(pl.lit("all").alias("method"))).with_columns(mix=pl.lit("all"))
    mixes = agg(rows.group_by(pl.lit("all").alias("method"), "mix"))
    return pl.concat([overall, mixes, by_method, by_mix], how="diagonal_relaxed").sort("method", "mix")


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
        timing = Timing(s.repeats, s.warmup, s.order_seed, s.noisy_drift, s.reference_budget_s, s.contention_slack)
        prints = fingerprint(spec.model, spec.weights)
        identity = {"model": spec.model, "weights": spec.weights, "dtype": spec.dtype, "device": spec.device}
        result = run_step_sets(
            lambda: build_model(spec.model, spec.weights, spec.dtype, spec.device, spec.seed), identity,
            [StepSet("replay", steps)], timing, REPLAY_CHECKPOINTS,
            lambda name, shapes, repeat: checkpoint_key("replay-1", identity, spec.threads, name, shapes, repeat, prints),
            bench_environment)
        rows = compare(step_summary(result.raw), sampled, model)
        summary = error_summary(rows)
        overall = summary.filter((pl.col("method") == "all") & (pl.col("mix") == "all")).row(0, named=True)
        metrics = {"mdape": overall["mdape"], "target": TARGET_MAPE, "steps": overall["steps"],
                   "per_method": {r["method"]: r["mdape"] for r in summary.filter(pl.col("mix") == "all").iter_rows(named=True)},
                   "noisy": result.environment["noisy"], "noisy_reasons": result.environment["noisy_reasons"],
                   "source": s.source, "model": spec.model, "threads": spec.threads}
        with output_set("serving replay"):  # its checkpoints landed as they finished; its outputs land as one set
            write_result(result, REPLAY_RAW)
            write_table(rows, TABLES / "serving_replay", digits=6)
            write_table(summary, TABLES / "serving_replay_summary", digits=4)
            write_json(metrics, METRICS / "serving_replay.json")
    return metrics
