"""The measurement runtime: what every checkpointed, timed model run shares (profile, e2e, decode, pilot).

Checkpoints. A checkpoint is one finished unit of measurement (a profiler pair, an e2e case or latency
curve, a pilot evaluation job), stored under a name that ends in its key. The key is `checkpoint_key`:
sha256 of the canonical JSON of a format version (each caller's own, bumped when what a unit measures
changes) and everything that determines the unit; no other function hashes checkpoint keys. A
checkpoint is written atomically (analysis.pipeline.io) with its key and the seconds the unit took to measure
from scratch, and read back only if whole: readable, carrying the same key, the expected columns (or
JSON fields) and rows; anything else is discarded with a message and measured again.

Torch checkpoints. A unit whose state is tensors (the pilot's adapter weights and optimiser) is
`write_torch_checkpoint`ed atomically and read back by `read_torch_checkpoint` with torch's weights-only
unpickler: tensors, numbers, strings and containers, so a planted file runs no code; anything else is a
CheckpointError naming the file (the caller checks its own schema).

From-scratch seconds. `FromScratch` adds up, for a run, the seconds of every unit (measured now or read
back from its checkpoint) plus the run's own time outside the units measured now: what the run would
take with nothing to resume from. Stages write it as `from_scratch_s` beside their run time
(analysis.parallel.progress.timed), which the README's stage-time line reads.

Fingerprint. `fingerprint(model, weights)` is what every checkpoint key holds besides the unit's own
settings: the model's shapes and weights (without building it), the library versions (torch,
transformers, peft) and torch's thread count in force. The profile, e2e and pilot keys all use it, so a
library upgrade or another thread count measures every stage's units again.

Threads and model loading are kernels_profile.runtime.loading. The seeded run order is `kernels_profile.measure.interleave.interleaved_order`;
the one pairing and median/IQR summary of timings is `analysis.stats` (`ratio_pairs`, `summarize_ratios`).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import CopyDecodeError
from analysis.pipeline.io import atomic_path, write_json, write_with
from kernels_profile.runtime.models import SMOLLM2, is_registered, model_config, published_config, smollm2_gguf_path

KEY_LENGTH = 20               # hex digits of sha256 kept in a checkpoint key
KEY_FIELD = "copydecode.checkpoint_key"          # parquet metadata / JSON field holding the key
SECONDS_FIELD = "copydecode.checkpoint_seconds"  # ... and the unit's from-scratch seconds


def checkpoint_key(version: str, *parts: Any) -> str:
    """The key of one checkpointed unit: sha256 of [version, *parts] as canonical JSON (sorted keys;
    values JSON cannot hold are written with str)."""
    blob = json.dumps([version, *parts], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:KEY_LENGTH]


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back whole: its content and the seconds its unit took when measured."""

    content: Any                # a polars DataFrame (parquet checkpoints) or a dict (JSON checkpoints)
    seconds: float


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _check_seconds(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"checkpoint seconds must be a finite number >= 0, got {seconds!r}")
    return float(seconds)


def write_frame_checkpoint(frame: pl.DataFrame, path: Path, key: str, seconds: float) -> Path:
    """Write one unit's rows atomically, with its key and seconds in the parquet file's metadata."""
    metadata = {KEY_FIELD: key, SECONDS_FIELD: repr(_check_seconds(seconds))}
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp, metadata=metadata)
    return Path(path)


def write_json_checkpoint(payload: dict[str, Any], path: Path, key: str, seconds: float) -> Path:
    """Write one unit's JSON record atomically, with its key and seconds."""
    write_json({**payload, KEY_FIELD: key, SECONDS_FIELD: _check_seconds(seconds)}, Path(path))
    return Path(path)


def _discard(path: Path, why: str, what: str, log: Callable[[str], None]) -> None:
    log(f"{what}: checkpoint {path} is {why}; discarded, measuring it again")
    path.unlink(missing_ok=True)
    return None


def _recorded(key_found: Any, seconds_found: Any, key: str) -> tuple[str | None, float | None]:
    """(why the record is not this unit's, or None; its seconds)."""
    if key_found != key:
        return f"keyed {key_found!r}, expected {key}", None
    try:
        seconds = _check_seconds(float(seconds_found))
    except (TypeError, ValueError):
        return f"without valid seconds ({seconds_found!r})", None
    return None, seconds


def read_frame_checkpoint(path: Path, key: str, *, rows: int | None = None,
                          columns: dict[str, Any] | set[str] | frozenset[str] = frozenset(),
                          what: str = "checkpoint", log: Callable[[str], None] = _stderr) -> Checkpoint | None:
    """The parquet checkpoint at `path` if it is whole: readable, keyed `key`, holding `columns` (a
    dict also fixes their types), `rows` rows (when given) and, if it has a `seconds` column, positive
    finite seconds. None when absent; otherwise None after removing the file and saying why."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        metadata = pl.read_parquet_metadata(path)
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for a truncated or garbage file
        return _discard(path, f"unreadable ({type(exc).__name__}: {str(exc)[:120]})", what, log)
    why, seconds = _recorded(metadata.get(KEY_FIELD), metadata.get(SECONDS_FIELD), key)
    if why:
        return _discard(path, why, what, log)
    if isinstance(columns, dict):
        wrong = {c: str(frame.schema.get(c)) for c, dt in columns.items() if frame.schema.get(c) != dt}
    else:
        wrong = {c: "missing" for c in sorted(set(columns) - set(frame.columns))}
    if wrong:
        return _discard(path, f"missing or mistyped columns {wrong}", what, log)
    if rows is not None and frame.height != rows:
        return _discard(path, f"{frame.height} rows, expected {rows}", what, log)
    if "seconds" in frame.columns and not ((frame["seconds"] > 0).all() and frame["seconds"].is_finite().all()):
        return _discard(path, "non-positive or non-finite seconds", what, log)
    return Checkpoint(frame, seconds)


def read_json_checkpoint(path: Path, key: str, *, fields: set[str] | frozenset[str] = frozenset(),
                         what: str = "checkpoint", log: Callable[[str], None] = _stderr) -> Checkpoint | None:
    """The JSON checkpoint at `path` if it is whole (readable, keyed `key`, holding `fields`); its
    payload without the key and seconds. None when absent; otherwise None after removing it."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _discard(path, f"unreadable ({type(exc).__name__})", what, log)
    if not isinstance(payload, dict):
        return _discard(path, "not a JSON object", what, log)
    why, seconds = _recorded(payload.pop(KEY_FIELD, None), payload.pop(SECONDS_FIELD, None), key)
    if why:
        return _discard(path, why, what, log)
    missing = sorted(set(fields) - set(payload))
    if missing:
        return _discard(path, f"missing fields {missing}", what, log)
    return Checkpoint(payload, seconds)


# ---------------------------------------------------------------- fingerprint

def model_fingerprint(name: str, weights: str) -> str:
    """What identifies the model's shapes and weights without building it (fails early on a bad name)."""
    if name == SMOLLM2:
        path = smollm2_gguf_path()
        return f"{path.name}:{path.stat().st_size}"
    if weights == "random":  # a registered name, or any causal LM's config (a folder or a hub id)
        config = published_config(name) if is_registered(name) else model_config(name)
        return json.dumps(config, sort_keys=True, default=str)
    if weights == "real":
        model_config(name)  # fails early on a name that is no folder or hub id
        config = Path(name) / "config.json"
        return f"{name}:{config.read_text()}" if config.is_file() else name
    model_config(name)
    config = Path(weights) / "config.json"
    return f"{weights}:{config.read_text()}" if config.is_file() else weights


def library_versions() -> dict[str, str]:
    """The versions of the libraries a measured unit ran on."""
    import peft
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}


def fingerprint(model: str, weights: str) -> dict[str, Any]:
    """The one fingerprint of checkpoint keys: model (shapes and weights), library versions, torch threads."""
    import torch

    return {"model": model_fingerprint(model, weights), **library_versions(), "threads": torch.get_num_threads()}


# ---------------------------------------------------------------- torch checkpoints

class CheckpointError(CopyDecodeError):
    """A checkpoint that is not one this project wrote: unreadable, holding code or other objects than
    tensors and plain values, or (the caller's check) of another schema."""


def write_torch_checkpoint(state: dict[str, Any], path: Path) -> Path:
    """Write a state of tensors and plain values atomically (torch.save to a temporary file, renamed)."""
    import torch

    write_with(lambda tmp: torch.save(state, tmp), Path(path))
    return Path(path)


def _unpickler_error(exc: BaseException) -> str:
    import re

    found = re.search(r"WeightsUnpickler error:\s*(.+)", str(exc))
    return found.group(1).strip()[:200] if found else type(exc).__name__


def read_torch_checkpoint(path: Path, remedy: str) -> Any:
    """The object in the torch checkpoint at `path`, read with the weights-only unpickler; an unreadable
    file or one holding other objects is a CheckpointError naming it and `remedy` (what to do)."""
    import pickle
    import re

    import torch

    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        if found is None:
            raise CheckpointError(f"{path}: not a readable checkpoint ({_unpickler_error(exc)}); {remedy}") from None
        raise CheckpointError(f"{path}: refused: the checkpoint holds objects other than tensors and plain values "
                              f"({found.group(1)}); {remedy}") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {str(exc)[:200]}); "
                              f"{remedy}") from None


class FromScratch:
    """What a run would take with no checkpoint to resume from: its own elapsed time, minus the units
    it measured, plus every unit's recorded seconds (measured now or read back).

    A unit measured now takes the seconds since the previous `mark` or unit (so the model build and
    warm-up it waited for count towards it); `mark` restarts that clock."""

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.measured_now = 0.0
        self.recorded = 0.0

    def mark(self) -> None:
        self.last = time.perf_counter()

    def measured(self) -> float:
        """A unit finished now: its seconds (since the last mark or unit), counted."""
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        self.measured_now += seconds
        self.recorded += seconds
        return seconds

    def resumed(self, seconds: float) -> None:
        """A unit finished now that resumed from its checkpoint: the seconds since the last mark or unit
        were measured now, and `seconds` is what the whole unit recorded (earlier runs' part included)."""
        now = time.perf_counter()
        self.measured_now += now - self.last
        self.last = now
        self.recorded += _check_seconds(seconds)

    def read_back(self, seconds: float) -> None:
        """A unit read back from its checkpoint, which recorded `seconds`."""
        self.recorded += seconds

    def seconds(self) -> float:
        return round(time.perf_counter() - self.started - self.measured_now + self.recorded, 3)
