"""A run of timed engine steps (kernels_profile.measure.batched): the batched profile's grid and the
replay of simulated steps, with the batch-1 profile's discipline.

- Warm-up: every step of a unit's context runs `warmup` times before the first timed unit.
- Repeats and interleaving: a *unit* is one repeat of a set of steps (the grid points of one context, or
  every replayed step); its steps run in a seeded Williams order (kernels_profile.measure.interleave), a
  different row per repeat, so no step always runs first or right after the same neighbour.
- Noise flags: around each unit the reference workload and other processes' CPU use are sampled
  (kernels_profile.measure.contention); a unit whose reference moved by more than `noisy_drift` is noisy,
  and the sidecar judges each session's drift and contention as the batch-1 profile does.
- Checkpoints: one parquet file per unit, keyed by everything that determines it (the keyed settings, the
  unit's steps, the model and software fingerprint); a finished unit is never measured again, a damaged one
  is discarded and measured again.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analysis.parallel.progress import progress_bar
from analysis.pipeline.io import write_json
from kernels_profile.measure.batched import BatchedBench, Step
from kernels_profile.measure.contention import Drift, EnvironmentRecorder, LoadSample
from kernels_profile.measure.interleave import interleaved_order
from kernels_profile.measure.machine import gpu_reference_workload, machine_info, reference_workload
from kernels_profile.measure.sidecar import judged_sessions, run_path
from kernels_profile.measure.timing import Timing
from kernels_profile.runtime.checkpoints import FromScratch, read_frame_checkpoint, write_frame_checkpoint
from kernels_profile.runtime.models import model_label

ENVIRONMENT_FORMAT = "copydecode.kernels.batched_environment/1"
STEP_SCHEMA = {
    "model": pl.String, "weights": pl.String, "dtype": pl.String, "device": pl.String,
    "step_id": pl.String,      # the step's name in its set (grid: b<B>-q<q>-c<c>; replay: the simulated step's id)
    "batch": pl.Int64, "tokens": pl.Int64, "sum_context": pl.Int64, "attention_keys": pl.Float64,
    "q_max": pl.Int64, "context_max": pl.Int64,
    "qs": pl.List(pl.Int64), "contexts": pl.List(pl.Int64),
    "repeat": pl.Int64, "seconds": pl.Float64,
    "order_index": pl.Int64,   # position of the step in its unit's seeded order
    "unit_id": pl.String, "run_id": pl.String,
    "load1_before": pl.Float64, "load1_after": pl.Float64,
    "ref_before_s": pl.Float64, "ref_after_s": pl.Float64, "ref_drift": pl.Float64,
    "noisy": pl.Boolean, "checkpoint_key": pl.String,
}


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class StepSet:
    """Named steps timed together as units (one unit per repeat); `fill` is the context every slot needs."""

    name: str
    steps: dict[str, Step]

    @property
    def fill(self) -> int:
        return max(max(s.contexts) for s in self.steps.values())

    @property
    def slots(self) -> int:
        return max(s.batch for s in self.steps.values())

    @property
    def capacity(self) -> int:
        return max(max(c + q for c, q in zip(s.contexts, s.qs)) for s in self.steps.values())

    def order(self, timing: Timing, model: str, repeat: int) -> list[str]:
        names = sorted(self.steps)
        return interleaved_order(names, repeat + 1, f"{timing.order_seed}/{model}/{self.name}")[repeat]


@dataclass(frozen=True)
class BatchedResult:
    raw: pl.DataFrame             # STEP_SCHEMA + environment columns, one row per timed step
    environment: dict[str, Any]   # the sidecar (see `environment_record`)
    from_scratch_s: float


def step_row(step: Step) -> dict[str, Any]:
    """A step's shape columns: B, sum q, sum c, attention (query, key) pairs, the largest q and c, the lists."""
    return {"batch": step.batch, "tokens": step.tokens, "sum_context": sum(step.contexts),
            "attention_keys": float(sum(q * (c + (q + 1) / 2) for q, c in zip(step.qs, step.contexts))),
            "q_max": max(step.qs), "context_max": max(step.contexts),
            "qs": list(step.qs), "contexts": list(step.contexts)}


def unit_path(root: Path, model: str, set_name: str, repeat: int, key: str) -> Path:
    """A unit's checkpoint, named by the model's label: a model given as a folder or hub id is a path, and
    its raw string would put the file beside the model, outside the tree."""
    return Path(root) / f"{model_label(model)}-{set_name}-r{repeat}-{key}.parquet"


@dataclass
class _Session:
    recorder: EnvironmentRecorder
    root: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        write_json({**self.recorder.snapshot().to_json(), **self.extra}, run_path(self.root, self.recorder.run_id))


def default_reference(device: str, budget: float) -> Callable[[], float]:
    if device.startswith("cuda"):
        return lambda: gpu_reference_workload(device, budget)
    return lambda: reference_workload(budget)


def run_step_sets(build: Callable[[], Any], identity: dict[str, Any], sets: Sequence[StepSet], timing: Timing,
                  checkpoint_dir: Path, key: Callable[..., str], environment: Callable[[Any], dict[str, Any]],
                  progress: bool = True, reference: Callable[[], float] | None = None,
                  load: Callable[[], tuple] | None = None, other: Callable[[], LoadSample | float | None] | None = None,
                  log: Callable[[str], None] = _stderr) -> BatchedResult:
    """Time (or resume) every unit of every step set. `build()` loads the model (only when a unit is left to
    measure); `identity` holds model, weights, dtype, device; `key(set_name, steps, repeat)` keys a unit;
    `environment(lm)` gives the columns recorded beside every row."""
    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    scratch = FromScratch()
    units = [(s, r) for s in sets for r in range(timing.repeats)]
    keys = {(s.name, r): key(s.name, {n: [list(st.qs), list(st.contexts)] for n, st in sorted(s.steps.items())}, r)
            for s, r in units}
    frames: dict[tuple[str, int], pl.DataFrame] = {}
    for s, r in units:
        path = unit_path(checkpoint_dir, identity["model"], s.name, r, keys[(s.name, r)])
        found = read_frame_checkpoint(path, keys[(s.name, r)], rows=len(s.steps), columns=STEP_SCHEMA,
                                      what="batched profile", log=log)
        if found is not None:
            frames[(s.name, r)] = found.content
            scratch.read_back(found.seconds)
    todo = [(s, r) for s, r in units if (s.name, r) not in frames]
    if todo:
        scratch.mark()
        recorder = EnvironmentRecorder(
            threshold=timing.rules.noisy_drift, contention_slack=timing.rules.contention_slack,
            reference=reference or default_reference(identity["device"], timing.rules.reference_budget_s),
            **({"load": load} if load is not None else {}), **({"other": other} if other is not None else {}))
        session = _Session(recorder, checkpoint_dir)
        recorder.start()
        bar = progress_bar(total=len(units), initial=len(units) - len(todo), desc="batched steps", unit="unit",
                           disable=not progress)
        bar.set_postfix_str(f"building {identity['model']}")
        lm = build()
        env = environment(lm)
        bench = BatchedBench(lm, max(s.slots for s, _ in todo), max(s.capacity for s, _ in todo), 0)
        warmed: set[str] = set()
        for s, r in todo:
            bench.fill(s.fill)
            if s.name not in warmed:
                bar.set_postfix_str(f"{s.name} warm-up")
                for _ in range(timing.warmup):
                    for name in sorted(s.steps):
                        bench.timed(s.steps[name])
                warmed.add(s.name)
                recorder.sample()  # a fresh 'before' after the fill and warm-up
            bar.set_postfix_str(f"{s.name} #{r}")
            load_before, ref_before = recorder.load()[0], recorder.last
            order = s.order(timing, identity["model"], r)
            seconds = {name: bench.timed(s.steps[name]) for name in order}
            ref_after, load_after = recorder.sample(), recorder.load()[0]
            drift = Drift.of([ref_before, ref_after], timing.rules.noisy_drift).drift
            k = keys[(s.name, r)]
            rows = [{**identity, "step_id": name, **step_row(s.steps[name]), "repeat": r, "seconds": seconds[name],
                     "order_index": order.index(name), "unit_id": f"{s.name}/r{r}", "run_id": recorder.run_id,
                     "load1_before": float(load_before), "load1_after": float(load_after),
                     "ref_before_s": float(ref_before), "ref_after_s": float(ref_after), "ref_drift": float(drift),
                     "noisy": drift > timing.rules.noisy_drift, "checkpoint_key": k} for name in sorted(s.steps)]
            frame = pl.DataFrame(rows, schema=STEP_SCHEMA).with_columns(**{c: pl.lit(v) for c, v in env.items()})
            write_frame_checkpoint(frame, unit_path(checkpoint_dir, identity["model"], s.name, r, k), k,
                                   scratch.measured())
            session.save()
            frames[(s.name, r)] = frame
            bar.update(1)
        bar.close()
        recorder.end()
        session.save()
        del bench, lm
    raw = pl.concat([frames[(s.name, r)] for s, r in units], how="diagonal_relaxed")
    raw = raw.with_columns(noisy=pl.col("ref_drift") > timing.rules.noisy_drift).sort("unit_id", "step_id")
    return BatchedResult(raw, environment_record(raw, checkpoint_dir, timing, log), scratch.seconds())


def environment_record(raw: pl.DataFrame, checkpoint_dir: Path, timing: Timing,
                       log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """The sidecar: this machine, every session that measured a unit (re-judged at today's thresholds), and
    which units are noisy, with the reasons (kernels_profile.measure.sidecar.judged_sessions)."""
    judged = judged_sessions(raw, checkpoint_dir, timing.rules, "unit_id", "batched profile", log)
    units = judged.pop("units")
    return {
        "format": ENVIRONMENT_FORMAT, "machine": machine_info(),
        **{k: judged[k] for k in ("threads", "noisy_drift", "contention_slack", "noisy", "noisy_reasons", "contended")},
        "units": units.height, "noisy_units": judged["noisy_units"],
        "max_unit_drift": float(units["ref_drift"].max()), "runs": judged["runs"],
        "timing": {"repeats": timing.repeats, "warmup": timing.warmup, "order_seed": timing.order_seed,
                   **asdict(timing.rules)},
    }
