"""The environment sidecar beside a raw timings file: where it lives, the one writer of a raw file and its sidecar,
and the judging of every session that measured a unit in it at today's noise rules.

A measuring stage (the batch-1 profile, the batched profile and the replay; the e2e stage writes its run's record
beside its measurements at the same path) keeps one run record per session beside its checkpoints
(`run-<run_id>.json`); the sidecar gathers them, re-judged with the noise rules now in force
(kernels_profile.measure.timing.NoiseRules), so loosening a threshold never needs a re-measurement.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from analysis.pipeline.io import output_set, write_json, write_parquet
from kernels_profile.measure.contention import Contention, Drift


class Rules(Protocol):
    noisy_drift: float
    contention_slack: float


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def environment_path(raw_path: Path) -> Path:
    """Where the environment sidecar of a raw parquet lives: <stem>.environment.json beside it."""
    raw_path = Path(raw_path)
    return raw_path.with_name(f"{raw_path.stem}.environment.json")


def read_environment(raw_path: Path) -> dict[str, Any] | None:
    """The sidecar of a raw parquet, or None for files written before sidecars existed."""
    path = environment_path(raw_path)
    return json.loads(path.read_text()) if path.is_file() else None


def write_with_sidecar(raw: pl.DataFrame, environment: dict[str, Any], out: Path, stage: str) -> Path:
    """The raw parquet and its environment sidecar as one set (never a new file beside an old sidecar); returns
    the sidecar path."""
    sidecar = environment_path(out)
    with output_set(stage, outputs=(Path(out).as_posix(), sidecar.as_posix())):
        write_parquet(raw, Path(out))
        write_json({**environment, "raw": str(out)}, sidecar)
    return sidecar


def run_path(root: Path, run_id: str) -> Path:
    """A session's run record beside the checkpoints it wrote."""
    return Path(root) / f"run-{run_id}.json"


def judged_run(run: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """A session's run record with its drift and contention re-judged at today's thresholds."""
    drift = Drift.of(run["reference_samples_s"], rules.noisy_drift)
    contention = Contention.from_json(run.get("contention"), rules.contention_slack)
    reasons = [r for r in (drift.reason, contention.reason) if r]
    return {**run, "drift": asdict(drift), "contention": contention.to_json(), "contended": contention.contended,
            "noisy": drift.noisy or contention.contended is True, "noisy_reasons": reasons}


def any_verdict(verdicts: list[bool | None]) -> bool | None:
    """True if any is True; None if none is but one is unknown; else False (an empty list: None)."""
    if any(v is True for v in verdicts):
        return True
    return None if not verdicts or any(v is None for v in verdicts) else False


def judged_sessions(raw: pl.DataFrame, checkpoint_dir: Path, rules: Rules, unit: str, what: str,
                    log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """Every session that measured a unit of `raw` (its `run_id`s) re-judged, the noisy units (column `unit`: the
    unit's drift is over `noisy_drift`) and the reasons: the fields every sidecar shares."""
    runs = []
    for run_id in sorted(set(raw["run_id"].to_list())):
        path = run_path(Path(checkpoint_dir), run_id)
        if not path.is_file():
            log(f"{what}: {path} not found; units of run {run_id} have no run environment")
            runs.append({"run_id": run_id, "missing": str(path), "noisy": None, "contended": None, "noisy_reasons": []})
            continue
        runs.append(judged_run(json.loads(path.read_text()), rules))
    units = raw.group_by(unit).agg(pl.col("ref_drift").first(), pl.col("noisy").first()).sort(unit)
    noisy_units = units.filter(pl.col("noisy"))[unit].to_list()
    reasons = [f"run {r['run_id']}: {why}" for r in runs for why in r["noisy_reasons"]]
    if noisy_units:
        reasons.append(f"{len(noisy_units)} of {units.height} {unit.removesuffix('_id')}s: reference drift > "
                       f"{rules.noisy_drift:.0%} within the {unit.removesuffix('_id')}")
    return {"threads": sorted({int(t) for t in raw["threads"].to_list()}) if "threads" in raw.columns else None,
            "noisy_drift": rules.noisy_drift, "contention_slack": rules.contention_slack,
            "noisy": bool(noisy_units) or any(r["noisy"] for r in runs), "noisy_reasons": reasons,
            "contended": any_verdict([r["contended"] for r in runs]), "units": units, "noisy_units": noisy_units,
            "runs": runs}
