"""`copydecode kernels profile --batched`: what one continuous-batching engine step costs, measured, and the
step-cost model fitted to it (and, for the batch-1 sources, extrapolated).

Reads params `kernels.batched` (overlaid with `kernels.batched_presets.<name>` for `--preset`, and `--device`),
the frozen batch-1 files its `batch1_sources` name (through `kernels.fit.raw` and `kernel.device_time`) and the
datasheet (analysis/data/devices.json). Writes:

* data/kernels/batched.parquet and batched.environment.json: one row per timed step (B sequences, each q new
  tokens at context c; kernels_profile.measure.batched_session.STEP_SCHEMA), resumable from
  data/kernels/batched_checkpoints/;
* reports/kernels/step_cost.json: the step-cost model of every source (analysis.latency.stepcost): this run's
  (`batched`, measured) and each batch-1 source (extrapolated, its assumptions stated);
* reports/tables/step_cost_terms.csv/.md, step_cost_residuals.csv/.md, reports/metrics/step_cost.json.

The default grid (B 1-16, q 1-64, c 256 and 1024, SmolLM2-135M's real weights, one thread) took about
2 minutes on 2 quiet cores; `--preset batched-wide` is the larger sweep.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import ParamsError
from analysis.layout import BATCHED_CHECKPOINTS, BATCHED_RAW, METRICS, STEP_COST, TABLES
from analysis.latency.device_time import DeviceTimeFile, device_time_files, read_device_time
from analysis.latency.roofline import DEVICES_FILE, device_roof
from analysis.latency.sources import DEVICE_TIME, parse_name
from analysis.latency.stepcost import (
    EXTRAPOLATED,
    MEASURED,
    StepCostModel,
    fit_step_cost,
    residuals,
    step_summary,
    to_document,
)
from analysis.latency.steppoints import (
    EXTRAPOLATION_ASSUMPTIONS,
    batch1_points,
    device_fixed_terms,
    device_time_points,
    ridge_fixed_terms,
    step_floor,
)
from analysis.parallel.progress import timed
from analysis.pipeline.confine import OutputRootError, confined
from analysis.pipeline.io import read_parquet, write_json, write_table
from analysis.pipeline.params import get, merge_preset
from kernels_profile.measure.batched import BatchedSpec, Step, bench_environment
from kernels_profile.measure.batched_session import StepSet, run_step_sets
from kernels_profile.measure.sidecar import write_with_sidecar
from kernels_profile.runtime.checkpoints import fingerprint
from kernels_profile.runtime.loading import set_threads
from kernels_profile.runtime.models import build_model, check_fits, published_config, torch_dtype

MEASURED_SOURCE = "batched"  # this run's batched profile, as a serving kernel source
LIST_FIELDS = ("batch_sizes", "qs", "contexts", "holdout_batch_sizes", "holdout_qs")
SPEC_FIELDS = tuple(BatchedSpec.__dataclass_fields__)
GROUP_ONLY = ("batch1_sources",)  # kernels.batched keys that are not BatchedSpec fields
DEVICES_JSON = Path(__file__).resolve().parents[2] / "analysis" / "data" / DEVICES_FILE


@dataclass(frozen=True)
class Batch1Source:
    """A frozen batch-1 measurement to extrapolate: its kernel-source name and the file it is read from."""

    name: str
    kind: str     # measured (a raw profile file) | device_time (a probe file)
    model: str
    loop: str
    paths: tuple[Path, ...]   # a measured source's raw files (kernels.fit.raw may give one source several files)
    dtype: str


@dataclass(frozen=True)
class BatchedSettings:
    spec: BatchedSpec
    out: Path
    step_cost: Path
    batch1: tuple[Batch1Source, ...]
    preset: str | None


# `copydecode kernels profile --batched`: its help line and what it reads and writes (the CLI's --help)
HELP = "time batched engine steps (B sequences, q new tokens each at context c) and fit the step-cost model"
READS_WRITES = ("reads params kernels.batched (or --preset from kernels.batched_presets), the model's weights and "
                "the frozen batch-1 files of kernels.batched.batch1_sources; writes data/kernels/batched.parquet "
                "and data/kernels/batched.environment.json, reports/kernels/step_cost.json, "
                "reports/tables/step_cost_*.*, reports/metrics/step_cost.json")
OWN_OUT = "names the raw timings file"  # `kernels profile --out` (a one-off output root is refused)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `kernels profile` gains for the batched profile (its --preset, --device and --out apply too)."""
    parser.add_argument("--batched", action="store_true",
                        help="the batched step-cost profile instead: one forward of B sequences, each adding q tokens "
                             "at context c (params kernels.batched; --preset from kernels.batched_presets); writes "
                             f"{BATCHED_RAW}, {STEP_COST} and the step-cost tables")


def _batch1_sources(params: dict, names: list) -> tuple[Batch1Source, ...]:
    raw_files: dict[str, list[Path]] = {}
    for entry in get(params, "kernels.fit.raw", list):
        if isinstance(entry, dict) and "source" in entry and "path" in entry:
            raw_files.setdefault(entry["source"], []).append(Path(entry["path"]))
    probes = {d.source: d for d in device_time_files(params)}
    out = []
    for name in names:
        parsed = parse_name(name)
        if parsed.kind == "measured":
            if parsed.source not in raw_files:
                raise ParamsError(f"kernels.batched.batch1_sources: {name!r} names source {parsed.source!r}, which "
                                  f"kernels.fit.raw does not list (it lists {sorted(raw_files)})")
            out.append(Batch1Source(name, "measured", parsed.model, parsed.loop, tuple(raw_files[parsed.source]), ""))
        elif parsed.kind == DEVICE_TIME:
            if parsed.source not in probes:
                raise ParamsError(f"kernels.batched.batch1_sources: {name!r} names probe {parsed.source!r}, which "
                                  f"kernel.device_time does not list (it lists {sorted(probes)})")
            probe = probes[parsed.source]
            out.append(Batch1Source(name, DEVICE_TIME, parsed.model, DEVICE_TIME, (probe.path,), probe.dtype))
        else:
            raise ParamsError(f"kernels.batched.batch1_sources: {name!r} is not a measured or device-time source")
    if len({s.name for s in out}) != len(out):
        raise ParamsError(f"kernels.batched.batch1_sources lists a source twice: {names}")
    return tuple(out)


def spec_of(group: dict[str, Any]) -> BatchedSpec:
    unknown = set(group) - set(SPEC_FIELDS) - set(GROUP_ONLY)
    if unknown:
        raise ParamsError(f"kernels.batched: unknown settings {sorted(unknown)}; known: {sorted((*SPEC_FIELDS, *GROUP_ONLY))}")
    missing = set(SPEC_FIELDS) - set(group)
    if missing:
        raise ParamsError(f"kernels.batched: missing settings {sorted(missing)}")
    values = {k: group[k] for k in SPEC_FIELDS}
    for name in LIST_FIELDS:
        if not isinstance(values[name], list):
            raise ParamsError(f"kernels.batched.{name} must be a list, got {values[name]!r}")
        values[name] = tuple(values[name])
    return BatchedSpec(**values).validate()


def settings(params: dict, preset: str | None = None, out: str | Path | None = None, device: str | None = None,
             model: str | None = None, dtype: str | None = None, contexts=None, ns=None,
             weights: str | None = None) -> BatchedSettings:
    """kernels.batched overlaid with the preset and --device. The batch-1 profile's --model, --dtype,
    --contexts, --ns and --weights do not apply: a named error, not a silent drop."""
    given = [f"--{k}" for k, v in (("model", model), ("dtype", dtype), ("contexts", contexts), ("ns", ns),
                                   ("weights", weights)) if v is not None]
    if given:
        raise ParamsError(f"kernels profile --batched: {', '.join(given)} {'is an option' if len(given) == 1 else 'are options'} "
                          "of the batch-1 profile; set the batched grid in params kernels.batched (or a "
                          "kernels.batched_presets entry, or --set kernels.batched.KEY=VALUE)")
    group = merge_preset(params, "kernels.batched", "kernels.batched_presets", preset)
    named_out = BATCHED_RAW if preset is None else Path(group.pop("out", f"data/kernels/batched-{preset}.parquet"))
    if device is not None:
        group["device"] = device
    spec = spec_of(group)
    names = group.get("batch1_sources")
    if not isinstance(names, list):
        raise ParamsError(f"kernels.batched.batch1_sources must be a list of kernel-source names, got {names!r}")
    step_cost = STEP_COST if preset is None and out is None else Path(out or named_out).with_suffix(".step_cost.json")
    raw = Path(out) if out else named_out
    try:  # a preset's `out` (params) and --out stay inside the tree
        confined(raw, "the batched timings file")
    except OutputRootError as exc:
        raise ParamsError(f"{exc} (kernels profile --batched --out / the preset's out: give a path under this "
                          "folder)") from None
    return BatchedSettings(spec, raw, step_cost, _batch1_sources(params, names), preset)


# ---------------------------------------------------------------- the measured grid


def grid_sets(spec: BatchedSpec):
    """One step set per context: every (B, q) of the grid."""
    return [StepSet(f"c{c}", {f"b{b}-q{q}-c{c}": Step.uniform(b, q, c) for b, q in spec.points}) for c in spec.contexts]


def measure(spec: BatchedSpec, checkpoints: Path, progress: bool = True):
    set_threads(spec.threads)
    torch_dtype(spec.dtype, spec.device)  # a bad dtype or a missing GPU fails before any model is built
    # an invalid config, or B sequences of c + q tokens beyond this machine's memory: named before allocating
    check_fits(spec.model, spec.dtype, spec.device, max(spec.batch_sizes) * (max(spec.contexts) + max(spec.qs)),
               max(spec.batch_sizes) * max(spec.qs), smaller="a smaller grid (kernels.batched: batch_sizes, qs, contexts)")
    timing = spec.timing
    prints = fingerprint(spec.model, spec.weights)
    identity = {"model": spec.model, "weights": spec.weights, "dtype": spec.dtype, "device": spec.device}
    return run_step_sets(lambda: build_model(spec.model, spec.weights, spec.dtype, spec.device, spec.seed), identity,
                         grid_sets(spec), timing, checkpoints,
                         lambda name, steps, repeat: spec.key(name, steps, repeat, prints), bench_environment, progress)


# ---------------------------------------------------------------- the fits


def measured_fit(raw: pl.DataFrame, spec: BatchedSpec, source: str = MEASURED_SOURCE) -> tuple[StepCostModel, pl.DataFrame]:
    points = step_summary(raw)
    holdout = pl.col("batch").is_in(list(spec.holdout_batch_sizes)) | pl.col("q").is_in(list(spec.holdout_qs))
    where = f"{spec.model} {spec.dtype} {spec.device}, {points.height} step shapes, median of {spec.repeats} repeats"
    model = fit_step_cost(points, source, MEASURED, holdout=holdout,
                          assumptions=(f"measured: {where}; steps past B = {max(spec.batch_sizes)}, "
                                       f"T = {max(spec.batch_sizes) * max(spec.qs)} or c = {max(spec.contexts)} "
                                       "are extrapolated (counted by the simulation)",))
    return model, points


def _roof(device_name: str, roof_document: dict, source: str):
    roof = device_roof(device_name, roof_document)
    if roof is None:
        raise ParamsError(f"{source}: no datasheet roof for {device_name!r} in {DEVICES_FILE}")
    return roof


def batch1_fit(source: Batch1Source, roof_document: dict) -> tuple[StepCostModel, pl.DataFrame]:
    """A batch-1 source's model: T* at the datasheet ridge and c_seq = 0 (steppoints), the datasheet floor."""
    config = published_config(source.model)
    if source.kind == DEVICE_TIME:
        frame = read_device_time(DeviceTimeFile(source.name.split("/")[0], source.paths[0], source.dtype, "cuda", "random"))
        points = device_time_points(frame, source.model)
        roof = _roof(str(frame["device_name"][0]), roof_document, source.name)
        fixed, why = device_fixed_terms(config, roof, source.dtype)
        assumptions = (*EXTRAPOLATION_ASSUMPTIONS, *why,
                       "device time (torch.profiler kernel time, launch-free): what a graph-captured engine step approaches")
        return fit_step_cost(points, source.name, EXTRAPOLATED, fixed=fixed, assumptions=assumptions,
                             floor=step_floor(config, roof, source.dtype)), points
    raw = pl.concat([read_parquet(path, "the frozen batch-1 profile (kernels.fit.raw)", ParamsError)
                     for path in source.paths], how="diagonal_relaxed")
    rows = raw.filter(pl.col("model") == source.model)
    devices, dtypes = sorted(set(rows["device_name"].to_list())), sorted(set(rows["dtype"].to_list()))
    if len(devices) != 1 or len(dtypes) != 1:
        raise ParamsError(f"{source.name}: the batch-1 rows of {source.model} name {devices} devices and {dtypes} dtypes; "
                          "one of each is needed for its datasheet ridge")
    roof = _roof(devices[0], roof_document, source.name)
    fixed, why = ridge_fixed_terms(roof, dtypes[0])
    points = batch1_points(raw, source.model, source.loop)
    assumptions = (*EXTRAPOLATION_ASSUMPTIONS, *why,
                   f"the {source.loop} transformers loop and its eager prefill, both host-dispatched: each step pays the "
                   "Python and launch overhead that dominates these small forwards on the GPU")
    return fit_step_cost(points, source.name, EXTRAPOLATED, fixed=fixed, assumptions=assumptions,
                         holdout=pl.col("q").is_in([4, 32, 256]), floor=step_floor(config, roof, dtypes[0])), points


def terms_table(models: list[StepCostModel]) -> pl.DataFrame:
    rows = []
    for m in models:
        d, h = m.diagnostics, m.diagnostics.get("holdout") or {}
        rows.append({"kernel_source": m.source, "basis": m.basis, **m.terms(), "fixed": ", ".join(m.fixed),
                     "points": d.get("points"), "median_abs_rel_error": d.get("median_abs_rel_error"),
                     "max_abs_rel_error": d.get("max_abs_rel_error"),
                     "holdout_points": h.get("points"), "holdout_median_abs_rel_error": h.get("median_abs_rel_error"),
                     "holdout_max_abs_rel_error": h.get("max_abs_rel_error"),
                     "max_batch": m.fitted_range.batch, "max_tokens": m.fitted_range.tokens,
                     "max_context": m.fitted_range.context, "t_star_identified": d.get("t_star_identified"),
                     "marginal_s_per_token": m.marginal_s,
                     "floor_s_per_token": m.floor.token_s if m.floor else None})
    return pl.DataFrame(rows, infer_schema_length=None)


def run(s: BatchedSettings) -> dict:
    with timed("kernels_batched") as timing:
        result = measure(s.spec, BATCHED_CHECKPOINTS)
        sidecar = write_with_sidecar(result.raw, result.environment, s.out, "kernels_batched")
        timing["from_scratch_s"] = result.from_scratch_s
        measured, points = measured_fit(result.raw, s.spec)
        roofs = json.loads(DEVICES_JSON.read_text())
        fits = [measured] + [batch1_fit(source, roofs)[0] for source in s.batch1]
        write_json(to_document(fits, {"raw": str(s.out), "environment": str(sidecar), "spec": asdict(s.spec),
                                      "noisy": result.environment["noisy"],
                                      "noisy_reasons": result.environment["noisy_reasons"]}), s.step_cost)
        if s.preset is None:
            write_table(terms_table(fits), TABLES / "step_cost_terms", digits=6)
            res = pl.concat([residuals(m, p).with_columns(kernel_source=pl.lit(m.source)) for m, p in
                             [(measured, points)] + [batch1_fit(source, roofs) for source in s.batch1]], how="diagonal_relaxed")
            write_table(res, TABLES / "step_cost_residuals", digits=6)
            write_json({"step_cost": {m.source: {"median_abs_rel_error": m.diagnostics["median_abs_rel_error"],
                                                 "holdout_median_abs_rel_error": (m.diagnostics.get("holdout") or {}).get("median_abs_rel_error"),
                                                 "c0_ms": m.c0 * 1000, "t_star": m.t_star} for m in fits},
                        "noisy": result.environment["noisy"]}, METRICS / "step_cost.json")
    return {"rows": result.raw.height, "out": str(s.out), "step_cost": str(s.step_cost),
            "noisy": result.environment["noisy"], "noisy_reasons": result.environment["noisy_reasons"],
            "sources": [m.source for m in fits],
            "fit_median_abs_rel_error": measured.diagnostics["median_abs_rel_error"],
            "holdout": measured.diagnostics["holdout"], "from_scratch_s": result.from_scratch_s}
