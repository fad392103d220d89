"""Device-time sources (params kernel.device_time): probe files of device-side kernel times (one decode
step and several prefills, torch.profiler, launch-free), checked against the probe's schema and turned
into kernel_speedup rows and one latency model per probed model (built as DEVICE_TIME_BUILT says)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.model import GridCurve, LatencyModel, ModelKey, QuadraticAR
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.latency.sources import DEVICE_TIME, DEVICE_TIME_BUILT, SOURCE_NAME
from analysis.pipeline.params import get


class DeviceTimeError(ParamsError):
    """A device-time probe file (kernel.device_time) is missing or does not have the probe's schema."""


PREFILL_FIELD = re.compile(r"^prefill(?P<n>\d+)_kernel_ms$")


@dataclass(frozen=True)
class DeviceTimeFile:
    """One device-time probe file and what its records do not say (dtype, device kind, weights)."""

    source: str
    path: Path
    dtype: str
    device: str
    weights: str


def device_time_files(params: dict) -> tuple[DeviceTimeFile, ...]:
    """kernel.device_time: a list of {source, path, dtype, device, weights} (may be empty)."""
    entries = get(params, "kernel.device_time", list)
    out = []
    fields = {"source", "path", "dtype", "device", "weights"}
    for i, entry in enumerate(entries):
        where = f"kernel.device_time[{i}]"
        if not isinstance(entry, dict) or set(entry) != fields:
            raise ParamsError(f"params: '{where}' must be a mapping with exactly {sorted(fields)}, got {entry!r}")
        bad = [k for k in sorted(fields) if not isinstance(entry[k], str) or not entry[k].strip()]
        if bad:
            raise ParamsError(f"params: '{where}' has empty or non-string {bad}")
        if not SOURCE_NAME.match(entry["source"]) or entry["source"] in (FIT_SOURCE, PAPER_SOURCE):
            raise ParamsError(f"params: '{where}.source' must be a lower-case name (letters, digits, '.', '_', '-'), "
                              f"not {FIT_SOURCE!r} or {PAPER_SOURCE!r}; got {entry['source']!r}")
        out.append(DeviceTimeFile(entry["source"], Path(entry["path"]), entry["dtype"], entry["device"], entry["weights"]))
    sources = [d.source for d in out]
    twice = sorted({x for x in sources if sources.count(x) > 1})
    if twice:
        raise ParamsError(f"params: 'kernel.device_time' names the source(s) {twice} more than once")
    return tuple(out)


def _number(record: dict, name: str, where: str) -> float:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise DeviceTimeError(f"{where}: {name!r} must be a positive number, got {value!r}")
    return float(value)


def read_device_time(entry: DeviceTimeFile) -> pl.DataFrame:
    """One row per (model, N): the probe's step and prefill kernel times, checked: every record has
    model, device (name), context, step_kernel_ms and at least two prefill<N>_kernel_ms; the same N
    set in every record; no model twice."""
    if not entry.path.is_file():
        raise DeviceTimeError(f"{entry.path}: device-time file not found (params kernel.device_time)")
    rows, seen, ns_seen = [], set(), None
    for i, line in enumerate(entry.path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{entry.path}:{i}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DeviceTimeError(f"{where}: not a JSON line ({exc})") from exc
        if not isinstance(record, dict):
            raise DeviceTimeError(f"{where}: a record must be a JSON object, got {type(record).__name__}")
        for name in ("model", "device"):
            if not isinstance(record.get(name), str) or not record[name]:
                raise DeviceTimeError(f"{where}: {name!r} must be a non-empty string, got {record.get(name)!r}")
        context = record.get("context")
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise DeviceTimeError(f"{where}: 'context' must be a non-negative integer, got {context!r}")
        step = _number(record, "step_kernel_ms", where)
        prefills = {int(m["n"]): _number(record, k, where) for k in record if (m := PREFILL_FIELD.match(k))}
        if len(prefills) < 2:
            raise DeviceTimeError(f"{where}: needs prefill<N>_kernel_ms for at least two N, got {sorted(prefills)}")
        if ns_seen is not None and sorted(prefills) != ns_seen:
            raise DeviceTimeError(f"{where}: prefill N {sorted(prefills)} differ from the first record's {ns_seen}")
        ns_seen = sorted(prefills)
        if record["model"] in seen:
            raise DeviceTimeError(f"{where}: model {record['model']!r} appears twice")
        seen.add(record["model"])
        for n, prefill_ms in sorted(prefills.items()):
            rows.append({"model": record["model"], "device_name": record["device"], "context": context, "n": n,
                         "step_ms": step, "prefill_ms": prefill_ms})
    if not rows:
        raise DeviceTimeError(f"{entry.path}: holds no device-time records")
    return pl.DataFrame(rows)


def device_time_speedups(frame: pl.DataFrame, entry: DeviceTimeFile) -> pl.DataFrame:
    """The probe's rows in kernel_speedup's columns: T_ar = N x step kernel time, one measurement each
    (no quartiles), labelled device/device."""
    return frame.select(
        kernel_source=pl.format("{}/{}", pl.lit(entry.source), pl.col("model")),
        model="model", weights=pl.lit(entry.weights), dtype=pl.lit(entry.dtype), device=pl.lit(entry.device),
        context=pl.col("context").cast(pl.Int64), n=pl.col("n").cast(pl.Int64),
        baseline=pl.lit(DEVICE_TIME), prefill=pl.lit(DEVICE_TIME),
        t_ar=pl.col("n") * pl.col("step_ms") / 1000, t_prefill=pl.col("prefill_ms") / 1000,
        speedup=pl.col("n") * pl.col("step_ms") / pl.col("prefill_ms"),
        speedup_q25=pl.lit(None, dtype=pl.Float64), speedup_q75=pl.lit(None, dtype=pl.Float64),
        repeats=pl.lit(1, dtype=pl.UInt32), strongest=pl.lit(DEVICE_TIME), is_strongest=pl.lit(True),
        overhead_share=pl.lit(None, dtype=pl.Float64), source=pl.lit(entry.source),
    ).sort("kernel_source", "context", "n")


def device_time_models(frame: pl.DataFrame, entry: DeviceTimeFile) -> list[LatencyModel]:
    """One latency model per probed model (form `device_time`, see DEVICE_TIME_BUILT): N range the probed
    prefill N, the one probed context."""
    models = []
    for (model,), rows in frame.group_by(["model"], maintain_order=True):
        rows = rows.sort("n")
        ns = tuple(float(n) for n in rows["n"])
        context = float(rows["context"][0])
        key = ModelKey(model, entry.weights, entry.dtype, entry.device, DEVICE_TIME, source=entry.source,
                       prefill=DEVICE_TIME)
        models.append(LatencyModel(
            key=key, form=DEVICE_TIME, ar=QuadraticAR(float(rows["step_ms"][0]) / 1000, 0.0),
            prefill=GridCurve(ns, (context,), (tuple(float(s) / 1000 for s in rows["prefill_ms"]),)),
            ns=(ns[0], ns[-1]), contexts=(context,),
            diagnostics={"notes": [DEVICE_TIME_BUILT, f"probe: {entry.path} ({rows['device_name'][0]})"]}))
    return models
