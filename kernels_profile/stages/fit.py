"""`copydecode kernels fit`: the latency model (json), the kernel speedup table and chart."""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from analysis.present import charts
from analysis.errors import ParamsError
from analysis.pipeline.io import read_parquet, save_chart, write_csv, write_json, write_table
from analysis.latency.tables import (
    ar_step_segments,
    ar_step_shifts,
    kernel_table,
    source_metrics,
    speedup_table,
    summarize,
    unshifted_speedups,
)
from analysis.latency.model import FORMS, paper_kernel_points, to_document
from analysis.latency.fit import FitOptions, fit_latency, holdout_table
from analysis.latency.roofline import (
    BYTES_PER_PARAM,
    PrefillFloor,
    decoder_weights,
    device_roof,
    paper_gpu_ceiling,
    paper_models,
    read_devices,
    roofline_metrics,
    roofline_table,
    source_roofs,
)
from analysis.latency.names import FIT_SOURCE
from analysis.latency.device_time import (
    DeviceTimeFile,
    device_time_files,
    device_time_models,
    device_time_speedups,
    read_device_time,
)
from analysis.latency.sources import (
    DEVICE_TIME,
    RawSource,
    raw_sources,
    DEVICE_TIME_BUILT,
    SHIFT_RATIO,
    format_name,
    with_ar_shift,
    with_comparison,
    with_unshifted,
)
from analysis.layout import FIGURES, LATENCY_MODEL, METRICS, TABLES
from analysis.pipeline.params import choice, choices, number_list, positive_int
from analysis.parallel.progress import timed
from kernels_profile.measure.session import session_environment_metrics
from kernels_profile.measure.sidecar import read_environment
from kernels_profile.runtime.models import published_config

RAW_COLUMNS = ("model", "weights", "dtype", "device", "method", "baseline", "context", "n", "repeat", "seconds")


@dataclass(frozen=True)
class FitSettings:
    raw: tuple[RawSource, ...]
    holdout_ns: tuple[int, ...]
    forms: tuple[str, ...]
    one_context: str
    early_steps: int   # the AR step-shift table: ms per step over steps 1..early_steps ...
    late_from: int     # ... against steps after late_from
    device_time: tuple[DeviceTimeFile, ...]  # params kernel.device_time: device-time probes, fitted as sources of their own


# `copydecode kernels fit`: its help line and what it reads and writes (the CLI's --help)
HELP = "fit the latency model to the raw timings"
READS_WRITES = ("reads the raw timing files of params kernels.fit.raw (this run's and the frozen H200 runs); "
                "writes reports/kernels/latency_model.json, reports/tables/kernel_*.*, "
                "reports/tables/latency_holdout.*, reports/figures/kernel_speedup*.{png,svg}, "
                "reports/metrics/kernels.json")


def settings(params: dict) -> FitSettings:
    """kernels.fit, validated (the only reader of that group), and the device-time probes of kernel.device_time."""
    p = params
    raw, probes = raw_sources(p), device_time_files(p)
    clash = sorted({r.source for r in raw} & {d.source for d in probes})
    if clash:
        raise ParamsError(f"params: kernel source(s) {clash} name both a raw timing file (kernels.fit.raw) and a "
                          f"device-time probe (kernel.device_time); give the probe its own source (e.g. h200-devtime)")
    return FitSettings(raw,
                       number_list(p, "kernels.fit.holdout_ns", lo=1, integer=True, nonempty=False),
                       choices(p, "kernels.fit.forms", FORMS), choice(p, "kernels.fit.one_context", ("drop", "keep")),
                       positive_int(p, "kernels.fit.step_shift.early_until"),
                       positive_int(p, "kernels.fit.step_shift.late_from"),
                       probes)


def read_source(entries: list[RawSource]) -> pl.DataFrame:
    """The raw timings of one kernel source: its files stacked, each checked for the profiler's
    columns, and no timing measured twice (the same model, loop, context, N and repeat in two files)."""
    frames = []
    for entry in entries:
        frame = read_parquet(entry.path, "copydecode kernels profile", ParamsError)
        missing = [c for c in RAW_COLUMNS if c not in frame.columns]
        if missing:
            raise ParamsError(f"{entry.path}: not a kernel profile (no {missing} columns)")
        if frame.filter(pl.col("method") == "ar").height == 0 or frame.filter(pl.col("method") == "prefill").height == 0:
            raise ParamsError(f"{entry.path}: holds no AR timings or no prefill timings; a latency model needs both")
        frames.append(frame.with_columns(source=pl.lit(entry.source), raw_file=pl.lit(str(entry.path))))
    raw = pl.concat(frames, how="diagonal_relaxed")
    keys = [c for c in ("model", "weights", "dtype", "device", "method", "baseline", "pair_baseline", "context", "n",
                        "repeat") if c in raw.columns]
    clash = (raw.group_by(keys, maintain_order=True).agg(files=pl.col("raw_file").unique(maintain_order=True))
             .filter(pl.col("files").list.len() > 1))
    if clash.height:
        row = clash.row(0, named=True)
        raise ParamsError(f"kernel source {entries[0].source!r}: {sorted(row['files'])} both hold {row['method']} "
                          f"timings of {row['model']}/{row['baseline']} at c={row['context']}, N={row['n']}, "
                          f"repeat {row['repeat']}; give each file its own source in kernels.fit.raw")
    return raw


def by_source(raw: tuple[RawSource, ...]) -> dict[str, pl.DataFrame]:
    grouped: dict[str, list[RawSource]] = {}
    for entry in raw:
        grouped.setdefault(entry.source, []).append(entry)
    return {source: read_source(entries) for source, entries in grouped.items()}


ENVIRONMENT_COLUMNS = ("device_name", "cpu_flags", "torch_version", "transformers_version", "threads",
                       "attn_implementation", "weights_note", "ar_mode")


def speedup_range(speedups: pl.DataFrame, rows: pl.Expr) -> list[float] | None:
    """[min, max] speedup over the chosen rows; None when none are chosen (e.g. no eager loop profiled)."""
    chosen = speedups.filter(rows)["speedup"]
    return [float(chosen.min()), float(chosen.max())] if chosen.len() else None


def read_sidecar(raw_path) -> dict | None:
    return read_environment(raw_path)


def fit_source(raw: pl.DataFrame, source: str, s: FitSettings):
    """The latency models and tables of one kernel source, every row labelled with it."""
    models = [replace(m, key=replace(m.key, source=source))
              for form in s.forms for m in fit_latency(raw, FitOptions(form, s.holdout_ns, s.one_context))]
    label = pl.lit(source).alias("source")
    summary = summarize(raw)
    holdout = holdout_table(summary, s.holdout_ns, s.forms, s.one_context)
    speedups = speedup_table(raw).with_columns(
        kernel_source=pl.struct("model", "baseline").map_elements(
            lambda r: format_name(source, r["model"], r["baseline"]), return_dtype=pl.String),
        source=pl.lit(source))
    speedups = speedups.select("kernel_source", *[c for c in speedups.columns if c != "kernel_source"])
    return models, summary.select(label, pl.all()), holdout.select(label, pl.all()) if holdout.height else holdout, speedups


def device_names(raw: dict[str, pl.DataFrame], probes: dict[str, pl.DataFrame]) -> dict[str, list[str]]:
    """The recorded device names of each source's raw timings or device-time probe."""
    frames = {**raw, **probes}
    return {source: sorted(set(frame["device_name"].to_list())) if "device_name" in frame.columns else []
            for source, frame in frames.items()}


def with_floors(models: list, names_by_source: dict[str, list[str]]) -> list:
    """Each GPU model with its device's prefill floor (`LatencyModel.floor`: the datasheet roof of its recorded device
    name, the model's published weight count), which no price past its profiled range goes under
    (docs/bounds-pricing.md). A CPU profile has no datasheet: its measured peak is not a floor (a loaded machine
    measures it low), so its models keep none."""
    weights = model_weights(sorted({m.key.model for m in models}))
    devices = read_devices()
    out = []
    for m in models:
        roof = next((device_roof(n, devices) for n in names_by_source.get(m.key.source, [])), None)
        count, bpp = weights.get(m.key.model), BYTES_PER_PARAM.get(m.key.dtype)
        usable = m.key.device.startswith("cuda") and None not in (roof, count, bpp)
        out.append(replace(m, floor=PrefillFloor(count, roof, bpp)) if usable else m)
    return out


def model_weights(models: list[str]) -> dict[str, object]:
    out = {}
    for name in models:
        try:
            out[name] = decoder_weights(published_config(name))
        except (ParamsError, KeyError):
            continue  # a model without a published dense config (e.g. a GGUF file) gets no roofline row
    return out


def run(s: FitSettings) -> dict:
    with timed("kernels_fit"):
        raw = by_source(s.raw)
        parts = [fit_source(frame, source, s) for source, frame in raw.items()]
        models = [m for part in parts for m in part[0]]
        summary = pl.concat([p[1] for p in parts], how="diagonal_relaxed")
        holdout = pl.concat([p[2] for p in parts if p[2].height], how="diagonal_relaxed") if any(p[2].height for p in parts) else pl.DataFrame()
        segments = pl.concat([ar_step_segments(f) for f in raw.values()], how="diagonal_relaxed")
        shifts = ar_step_shifts(segments, s.early_steps, s.late_from)
        speedups = with_ar_shift(pl.concat([p[3] for p in parts], how="diagonal_relaxed"), shifts, s.early_steps)
        unshifted = pl.concat([unshifted_speedups(frame, shifts.filter(pl.col("source") == source), s.early_steps,
                                                  SHIFT_RATIO).with_columns(source=pl.lit(source))
                               for source, frame in raw.items()], how="diagonal_relaxed")
        speedups = with_unshifted(speedups, unshifted)
        probes = {entry.source: read_device_time(entry) for entry in s.device_time}
        for entry in s.device_time:
            models += device_time_models(probes[entry.source], entry)
            speedups = pl.concat([speedups, device_time_speedups(probes[entry.source], entry).with_columns(
                ar_shift=pl.lit(False))], how="diagonal_relaxed")
        speedups = with_comparison(speedups)
        names_by_source = device_names(raw, probes)
        models = with_floors(models, names_by_source)
        fit_raw = raw.get(FIT_SOURCE)
        environment = fit_raw.select([c for c in ENVIRONMENT_COLUMNS if c in fit_raw.columns]).unique().to_dicts() if fit_raw is not None else []
        fit_paths = [r.path for r in s.raw if r.source == FIT_SOURCE]
        sidecar = read_sidecar(fit_paths[0]) if len(fit_paths) == 1 else None
        document = to_document(models, ", ".join(f"{r.source}: {r.path}" for r in s.raw), environment)
        if s.device_time:  # the device-time form is built, not fitted: its formula beside the fitted forms'
            document["formulas"] = {**document["formulas"], DEVICE_TIME: DEVICE_TIME_BUILT}
            document["device_time"] = [{"source": d.source, "path": str(d.path)} for d in s.device_time]
        document["raw"] = [{"source": r.source, "path": str(r.path)} for r in s.raw]
        document["run_environment"] = sidecar  # None: not recorded (a raw file from before sidecars, or no fit source)
        document["frozen_environment"] = {r.source: read_sidecar(r.path) for r in s.raw if r.source != FIT_SOURCE}
        write_json(document, LATENCY_MODEL)
        write_table(summary, TABLES / "kernel_timings", digits=6)
        write_table(holdout, TABLES / "latency_holdout", digits=4)
        write_table(speedups, TABLES / "kernel_speedup")
        write_table(kernel_table(speedups), TABLES / "kernel_table", digits=2)
        fit_speedups = speedups.filter(pl.col("source") == FIT_SOURCE)
        roof = roofline_metrics(sidecar, fit_speedups) if fit_speedups.height else "no fit source"
        roofs, unroofed = source_roofs(speedups, names_by_source, roof)
        roofline = roofline_table(speedups, model_weights(speedups["model"].unique().to_list()), roofs)
        write_table(roofline, TABLES / "kernel_roofline", digits=4)
        write_table(shifts, TABLES / "kernel_ar_steps", digits=3)
        for source in raw:
            chosen = speedups.filter(pl.col("source") == source)
            envs = raw[source].select([c for c in ENVIRONMENT_COLUMNS if c in raw[source].columns]).unique().to_dicts()
            notes = sorted({f"{e.get('weights_note', '')}; {e.get('device_name', '')}" for e in envs})
            name = "kernel_speedup" if source == FIT_SOURCE else f"kernel_speedup_{source}"
            judged = charts.judged_only(chosen)  # the figure the index shows: comparisons built alike lead
            left_out = sorted(set(chosen["comparison"]) - set(judged["comparison"])) if "comparison" in chosen.columns else []
            notes += [f"not judged, on the kernel page: {', '.join(left_out)}"] if left_out else []
            if source == FIT_SOURCE and (sidecar or {}).get("noisy"):  # a figure of a noisy run says so
                notes = [f"NOISY run: {'; '.join(sidecar.get('noisy_reasons') or ['reason not recorded'])}", *notes]
            save_chart(charts.kernel_speedup(judged if judged.height else chosen, "; ".join(notes), list(paper_kernel_points())),
                       FIGURES / name)
        write_csv(speedups.select("kernel_source", "model", "dtype", "device", "context", "n", "baseline", "speedup"),
                  TABLES / "kernel_speedup_plot.csv")
    is_fit = pl.col("source") == FIT_SOURCE
    metrics = {
        "source": ", ".join(f"{r.source}: {r.path}" for r in s.raw),
        "speedup_range_eager": speedup_range(speedups, is_fit & (pl.col("baseline") == "eager")),
        "speedup_range_strongest": speedup_range(speedups, is_fit & pl.col("is_strongest")),
        "kernel_sources": source_metrics(speedups, names_by_source, 8, 512),
        "roofline_sources": {name: roof.source for name, roof in roofs.items()},
        "no_roofline": unroofed,
        "holdout_max_rel_error": {("" if r["source"] == FIT_SOURCE else f"{r['source']}:")
                                  + f"{r['model']}/{r['baseline']}/{r['form']}/{r['curve']}": r["holdout_max_rel_error"]
                                  for r in holdout.iter_rows(named=True)} if holdout.height else {},
        "run_environment": session_environment_metrics(sidecar),
        "roofline": roof,
        "paper_gpu_ceiling": paper_gpu_ceiling(speedups, model_weights(paper_models())),
    }
    write_json(metrics, METRICS / "kernels.json")
    return metrics
