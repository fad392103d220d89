"""A profiling run over the grid: the pairs' checkpoints, the session that measured them and the
environment sidecar beside the raw file (the file I/O around kernels_profile.measure.profiler's measurement).

Around every pair the load average, other processes' CPU use and a fixed reference workload
(kernels_profile.measure.contention) are sampled; a pair whose reference time moved by more than `noisy_drift`
is marked noisy, and so is a run whose reference drifted or that was contended (other processes kept
more cores busy than the run left free, plus `contention_slack`); the sidecar's `noisy_reasons` says
which.

Checkpoints: one parquet file per pair, named by a hash of everything that determines it (the
ProfileSpec fields that change what is measured, the measurement code's version and
kernels_profile.runtime.checkpoints.fingerprint: the model's configuration or weights file, the torch,
transformers and peft versions, torch's thread count), written atomically
with its key and seconds and verified on load (kernels_profile.runtime.checkpoints: readable, the expected
columns, row count and key); a file that fails is discarded with a message and measured again.
Each profiling session's environment is written beside the pairs as run-<run_id>.json; the raw file and its
sidecar are written together by kernels_profile.measure.sidecar.write_with_sidecar.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analysis.pipeline.io import write_json
from analysis.parallel.progress import progress_bar
from kernels_profile.measure.contention import Drift, EnvironmentRecorder, LoadSample
from kernels_profile.measure.machine import gpu_info, gpu_reference_workload, machine_info, reference_workload
from kernels_profile.runtime.models import build_model, check_fits, torch_dtype
from kernels_profile.measure.profiler import (
    CacheBench,
    Pair,
    ProfileSpec,
    environment,
    expected_columns,
    measure_pair,
    pair_frame,
    pair_order,
    pair_steps,
    pair_units,
    warm_up,
)
from kernels_profile.runtime.checkpoints import (
    FromScratch,
    fingerprint,
    read_frame_checkpoint,
    write_frame_checkpoint,
)
from kernels_profile.runtime.loading import set_threads
from kernels_profile.measure.sidecar import judged_sessions, run_path

ENVIRONMENT_FORMAT = "copydecode.kernels.environment/1"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


# ---------------------------------------------------------------- the run

@dataclass(frozen=True)
class ProfileResult:
    raw: pl.DataFrame             # RAW_SCHEMA + PAIR_SCHEMA + environment columns, one row per timing
    environment: dict[str, Any]   # the sidecar written next to the raw parquet (see environment_record)
    from_scratch_s: float         # what the run would take with no pair to resume (kernels_profile.runtime.checkpoints)


@dataclass
class _Session:
    """The state of one profiling session: its recorder, the GPU it ran on (device name, clocks and
    versions at its start and, once done, its end) and where its run JSON goes."""

    recorder: EnvironmentRecorder
    root: Path
    gpu: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return run_path(self.root, self.recorder.run_id)

    def save(self) -> None:
        write_json({**self.recorder.snapshot().to_json(), **({"gpu": self.gpu} if self.gpu else {})}, self.path)


def default_reference(spec: ProfileSpec) -> Callable[[], float]:
    """The run's reference workload: a fixed bf16 matmul on the GPU timed with CUDA events when the
    profile runs on CUDA (a CPU product would only say how busy the host is), else a CPU matmul."""
    budget = spec.reference_budget_s
    if spec.device.startswith("cuda"):
        return lambda: gpu_reference_workload(spec.device, budget)
    return lambda: reference_workload(budget)


def profile_run(spec: ProfileSpec, checkpoint_dir: Path, progress: bool = True,
                reference: Callable[[], float] | None = None, load: Callable[[], tuple] | None = None,
                log: Callable[[str], None] = _stderr,
                other: Callable[[], LoadSample | float | None] | None = None) -> ProfileResult:
    """Run (or resume) every pair of the grid; returns the raw timings and the run environment.

    `reference`, `load` and `other` replace the reference workload, the load average and the
    sample of other processes' CPU use (tests inject known timings and loads); by default they are
    kernels_profile.measure.machine's. torch's thread count is set (spec.threads) before anything is measured."""
    spec.validate()
    set_threads(spec.threads)
    scratch = FromScratch()
    torch_dtype(spec.dtype, spec.device)  # a bad dtype or device fails before any model is built
    for model in spec.models:  # an invalid config, or one too large for this machine, before any allocation
        check_fits(model, spec.dtype, spec.device, max(spec.contexts) + spec.n_max, spec.n_max)
    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    fingerprints = {m: fingerprint(m, spec.weights) for m in spec.models}  # after set_threads: its count
    units = pair_units(spec)
    keys = {u: spec.key(u.model, u.context, u.baseline, u.repeat, fingerprints[u.model]) for u in units}
    rows = (1 + len(spec.prefills)) * len(spec.ns)
    frames: dict[Pair, pl.DataFrame] = {}
    for unit in units:
        found = read_frame_checkpoint(unit.path(checkpoint_dir, keys[unit]), keys[unit], rows=rows,
                                      columns=expected_columns(), what="kernels profile", log=log)
        if found is not None:
            frames[unit] = found.content
            scratch.read_back(found.seconds)
    todo = [u for u in units if u not in frames]
    if todo:
        scratch.mark()  # a pair's seconds include the session start, model build and warm-up before it
        on_gpu = spec.device.startswith("cuda")
        recorder = EnvironmentRecorder(
            # the CPU stream/matmul roofline says nothing about a GPU: its roof is the datasheet's (kernels fit)
            threshold=spec.noisy_drift, measure_roofline=spec.roofline and not on_gpu,
            contention_slack=spec.contention_slack, reference=reference or default_reference(spec),
            **({"load": load} if load is not None else {}), **({"other": other} if other is not None else {}),
        )
        session = _Session(recorder, checkpoint_dir, {"start": gpu_info(spec.device)} if on_gpu else {})
        recorder.start()
        steps = pair_steps(spec)  # a step per timed run, so the bar moves within each (minutes-long) pair
        bar = progress_bar(total=len(units) * steps, initial=(len(units) - len(todo)) * steps, desc="kernels profile",
                           unit="run", disable=not progress)
        for model_name in spec.models:
            _measure_model(spec, model_name, [u for u in todo if u.model == model_name], keys, frames,
                           session, checkpoint_dir, bar, scratch)
        bar.close()
        recorder.end()
        if on_gpu:
            session.gpu["end"] = gpu_info(spec.device)
        session.save()
    raw = pl.concat([frames[u] for u in units], how="vertical")
    raw = raw.with_columns(noisy=pl.col("ref_drift") > spec.noisy_drift)  # the threshold in force now
    raw = raw.sort("model", "context", "method", "baseline", "pair_baseline", "n", "repeat")
    return ProfileResult(raw, environment_record(raw, checkpoint_dir, spec, log), scratch.seconds())


def _measure_model(spec, model_name, todo, keys, frames, session, root, bar, scratch: FromScratch) -> None:
    if not todo:
        return
    bar.set_postfix_str(f"building {model_name}")
    lm = build_model(model_name, spec.weights, spec.dtype, spec.device, spec.seed)
    env = environment(lm, spec)
    recorder = session.recorder
    for context in spec.contexts:
        pending = [u for u in todo if u.context == context]
        if not pending:
            continue
        bench = CacheBench(lm, context, spec.n_max, spec.seed)
        bar.set_postfix_str(f"{model_name} c={context} warm-up")
        warm_up(bench, spec)
        recorder.sample()  # a fresh 'before' for the first pair (model build and warm-up came between)
        for unit in pending:
            bar.set_postfix_str(f"{model_name} c={context} {unit.baseline} #{unit.repeat}")
            order = pair_order(spec, unit.model, unit.context, unit.baseline, unit.repeat)
            load_before, ref_before = recorder.load()[0], recorder.last
            timings = measure_pair(bench, spec, unit.baseline, order, step=lambda: bar.update(1))
            ref_after, load_after = recorder.sample(), recorder.load()[0]
            frame = pair_frame(lm, spec, unit, timings, env).with_columns(
                run_id=pl.lit(recorder.run_id), load1_before=pl.lit(load_before, pl.Float64),
                load1_after=pl.lit(load_after, pl.Float64), ref_before_s=pl.lit(ref_before, pl.Float64),
                ref_after_s=pl.lit(ref_after, pl.Float64),
                ref_drift=pl.lit(Drift.of([ref_before, ref_after], spec.noisy_drift).drift, pl.Float64),
                checkpoint_key=pl.lit(keys[unit]),
            ).with_columns(noisy=pl.col("ref_drift") > spec.noisy_drift)
            write_frame_checkpoint(frame, unit.path(root, keys[unit]), keys[unit], scratch.measured())
            session.save()  # an interrupted run still leaves its environment beside its pairs
            frames[unit] = frame
    del lm



def profile(spec: ProfileSpec, checkpoint_dir: Path, progress: bool = True) -> pl.DataFrame:
    """The raw timings only (see profile_run for the environment that goes with them)."""
    return profile_run(spec, checkpoint_dir, progress).raw


# ---------------------------------------------------------------- the environment sidecar

def environment_record(raw: pl.DataFrame, checkpoint_dir: Path, spec: ProfileSpec,
                       log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """The sidecar of a raw file: this machine, every session that measured a pair in it (its load,
    reference drift, contention, roofline), and which pairs and runs are noisy under the spec's noise rules,
    with the reasons (kernels_profile.measure.sidecar.judged_sessions)."""
    judged = judged_sessions(raw, checkpoint_dir, spec.rules, "pair_id", "kernels profile", log)
    pairs, runs = judged.pop("units"), judged["runs"]
    return {
        "format": ENVIRONMENT_FORMAT,
        "machine": machine_info(),
        **{k: judged[k] for k in ("threads", "noisy_drift", "contention_slack", "noisy", "noisy_reasons", "contended")},
        "other_busy_cores": [r["contention"]["other_busy_cores"] for r in runs if r.get("contention")],
        "pairs": pairs.height,
        "noisy_pairs": judged["noisy_units"],
        "max_pair_drift": float(pairs["ref_drift"].max()),
        "median_pair_drift": float(pairs["ref_drift"].median()),
        "load1": {"min": float(raw["load1_before"].min()), "max": float(raw["load1_after"].max())},
        "runs": runs,
        "gpu": [r["gpu"] for r in runs if r.get("gpu")] or None,
        "spec": asdict(spec),
    }


def session_environment_metrics(sidecar: dict | None) -> dict | str:
    """The metrics of a raw file's environment sidecar (every session that measured a pair in it; one
    run's are kernels_profile.measure.contention.environment_metrics): what a reader needs to judge the
    timings: machine, threads, load, reference drift, other processes' CPU use and the contention verdict,
    the NOISY mark and its reasons. A sidecar from
    before contention was measured gives None for those (and says so in contention_unmeasured)."""
    if not sidecar:
        return "not recorded"
    runs = [r for r in sidecar.get("runs", []) if "drift" in r]
    machine = sidecar.get("machine") or {}
    unmeasured = sorted({(r.get("contention") or {}).get("unmeasured") or "not recorded" for r in runs
                         if not (r.get("contention") or {}).get("measured")})
    return {
        "noisy": sidecar.get("noisy"), "noisy_drift": sidecar.get("noisy_drift"),
        "noisy_reasons": sidecar.get("noisy_reasons", []), "contended": sidecar.get("contended"),
        "contention_slack": sidecar.get("contention_slack"), "other_busy_cores": sidecar.get("other_busy_cores"),
        "contention_rule": next((r["contention"]["rule"] for r in runs if (r.get("contention") or {}).get("measured")), None),
        "contention_unmeasured": "; ".join(unmeasured) or None,
        "threads": sidecar.get("threads"),
        "noisy_pairs": len(sidecar.get("noisy_pairs") or []), "pairs": sidecar.get("pairs"),
        "max_pair_drift": sidecar.get("max_pair_drift"), "median_pair_drift": sidecar.get("median_pair_drift"),
        "load1": sidecar.get("load1"),
        "reference_start_s": runs[0]["drift"]["reference_start_s"] if runs else None,
        "reference_end_s": runs[-1]["drift"]["reference_end_s"] if runs else None,
        "machine": {k: machine.get(k) for k in ("cpu_model", "cpu_flags", "logical_cores", "usable_cores", "torch_threads")},
    }
