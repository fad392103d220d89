"""Kernel sources: the one vocabulary of the latency layer for what a bound, the optimal oracle, the
headline and the claims are composed with, and what each source measured.

Names (this module formats and parses them; `fit` and `paper` are spelled once, in analysis.latency.names):

* `fit`: this run's own profile (kernels.fit.raw entries without another source);
* `paper`: the abstract's kernel curve (6.8x at N=8, 303x at N=512), not a measurement;
* `<source>/<model>/<AR loop>[/<kind>_prefill]`: a measured raw timing file fitted by `kernels fit`
  (e.g. `h200/qwen2.5-1.5b/static_compiled`);
* `<source>/<model>`: a device-time probe (kernel.device_time, e.g. `h200-devtime/qwen2.5-1.5b`):
  device-side kernel time of one decode step and of prefills (torch.profiler), launch-free.

Selection and loading: `kernel_settings` reads the one `kernel:` params group; `select_kernels` turns
names into `Kernel`s from the fitted latency model document (`load_fitted_models`). A new GPU source is
a params entry (kernels.fit.raw or kernel.device_time plus its names in kernel.sources), not code.

Device-time probe files (kernel.device_time) are read by analysis.latency.device_time.

Comparisons: each kernel ratio row says how its two sides were built (`comparison`: eager/eager,
device/device, graph/graph, graph/eager, eager/graph) and whether a claim may be judged on it (`judged`:
both sides built alike); `ar_shift` marks a cell with a repeat whose AR run slowed part-way,
`shifted_repeats` names those repeats and `speedup_unshifted` is the median without them.

Below: what each source measured, read for the kernel report and the claims (pure, torch-free)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.names import AR_LOOPS, FIT_SOURCE, PAPER_SOURCE
from analysis.latency.model import (
    FORMS,
    LOGLOG,
    LatencyModel,
    ModelKey,
    from_document,
    paper_model,
    select_model,
)
from analysis.layout import LATENCY_MODEL
from analysis.pipeline.params import choice, choices, get

REPORT_NS = (8, 64, 512)
SHIFT_RATIO = 1.5  # a run whose later steps take this many times its first steps' time "slowed part-way"

# ---------------------------------------------------------------- names

GRAPH_LOOPS = ("static_compiled",)                  # AR loops replayed as a captured graph (CUDA graphs on a GPU)
GRAPH_PREFILLS = ("compiled",)                      # prefill kinds run through torch.compile (static shapes)
DEVICE_TIME = "device_time"                         # the loop, prefill kind and form of a device-time source
PAPER_BASELINE = "paper (A100, bf16)"
DEVICE_TIME_BUILT = ("device time: T_ar(N) = N x the probe's one-step kernel time; T_prefill log-log interpolated "
                     "through the probe's prefill kernel times (one context: others are held at it and marked)")
SOURCE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")  # a raw file's or probe's source (e.g. h200, h200-devtime)
_MODEL = r"[A-Za-z0-9._-]+"
MEASURED_NAME = re.compile(rf"^(?P<source>[a-z0-9][a-z0-9._-]*)/(?P<model>{_MODEL})/(?P<loop>[a-z_]+)"
                           r"(?:/(?P<prefill>[a-z]+)_prefill)?$")
DEVICE_TIME_NAME = re.compile(rf"^(?P<source>[a-z0-9][a-z0-9._-]*)/(?P<model>{_MODEL})$")


@dataclass(frozen=True)
class SourceName:
    """A parsed kernel-source name."""

    kind: str               # fit | paper | measured | device_time
    source: str             # fit | paper | the raw file's or probe's source
    model: str | None = None
    loop: str | None = None
    prefill: str = "eager"

    def __str__(self) -> str:
        return format_name(self.source, self.model, self.loop, self.prefill) if self.kind == "measured" else (
            f"{self.source}/{self.model}" if self.kind == DEVICE_TIME else self.source)


def format_name(source: str, model: str | None, loop: str | None, prefill: str = "eager") -> str:
    """The kernel-source name of a fitted model's key fields (`fit` for this run's profile)."""
    if source == FIT_SOURCE:
        return FIT_SOURCE
    if loop == DEVICE_TIME:
        return f"{source}/{model}"
    return f"{source}/{model}/{loop}" + ("" if prefill == "eager" else f"/{prefill}_prefill")


def key_name(key: ModelKey) -> str:
    """The kernel-source name a fitted model stands for."""
    return format_name(key.source, key.model, key.baseline, key.prefill)


def parse_name(name: str) -> SourceName:
    """`fit`, `paper`, `<source>/<model>/<AR loop>[/<kind>_prefill]` or `<source>/<model>`; anything else
    is a ParamsError naming the forms."""
    if name == FIT_SOURCE:
        return SourceName(FIT_SOURCE, FIT_SOURCE)
    if name == PAPER_SOURCE:
        return SourceName(PAPER_SOURCE, PAPER_SOURCE)
    if isinstance(name, str):
        m = MEASURED_NAME.match(name)
        if m:
            return SourceName("measured", m["source"], m["model"], m["loop"], m["prefill"] or "eager")
        m = DEVICE_TIME_NAME.match(name)
        if m:
            return SourceName(DEVICE_TIME, m["source"], m["model"], DEVICE_TIME, DEVICE_TIME)
    raise ParamsError(f"unknown kernel source {name!r}; use {FIT_SOURCE}, {PAPER_SOURCE}, a measured source "
                      f"<source>/<model>/<AR loop> (e.g. h200/qwen2.5-1.5b/eager) or a device-time source "
                      f"<source>/<model> (e.g. h200-devtime/qwen2.5-1.5b)")


def is_fit(name: str) -> bool:
    return name == FIT_SOURCE


def is_paper(name: str) -> bool:
    return name == PAPER_SOURCE


def names_from_params(params: dict, dotted: str) -> tuple[str, ...]:
    """A non-empty list of distinct kernel-source names at `dotted`; whether a measured source exists is
    checked against the latency model when the stage runs."""
    values = get(params, dotted, list)
    if not values:
        raise ParamsError(f"params: {dotted!r} must not be empty; e.g. [{FIT_SOURCE}, {PAPER_SOURCE}]")
    bad = []
    for v in values:
        try:
            parse_name(v)
        except ParamsError:
            bad.append(v)
    if bad:
        raise ParamsError(f"params: {dotted!r} has unknown kernel sources {bad}; use {FIT_SOURCE}, {PAPER_SOURCE}, "
                          f"a measured source <source>/<model>/<AR loop> (e.g. h200/qwen2.5-1.5b/eager) or a "
                          f"device-time source <source>/<model> (e.g. h200-devtime/qwen2.5-1.5b)")
    if len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} lists a kernel source twice: {values}")
    return tuple(values)


# ---------------------------------------------------------------- sources from params: raw timing files, paired estimates

@dataclass(frozen=True)
class RawSource:
    """One raw timing file and the kernel source it is fitted as (`fit`: this run's profile)."""

    source: str
    path: Path


def raw_sources(params: dict) -> tuple[RawSource, ...]:
    """kernels.fit.raw: one path (this run's profile, source `fit`) or a list of paths and
    {source, path} entries (frozen measurements, e.g. the H200 files under reports/kernels/frozen/)."""
    value = get(params, "kernels.fit.raw", (str, list))
    entries = [value] if isinstance(value, str) else value
    if not entries:
        raise ParamsError("params: 'kernels.fit.raw' must name at least one raw timing file")
    out = []
    for i, entry in enumerate(entries):
        where = f"kernels.fit.raw[{i}]"
        if isinstance(entry, str):
            entry = {"source": FIT_SOURCE, "path": entry}
        if not isinstance(entry, dict) or set(entry) != {"source", "path"}:
            raise ParamsError(f"params: '{where}' must be a path or a mapping with exactly 'source' and 'path', got {entry!r}")
        source, path = entry["source"], entry["path"]
        if not isinstance(source, str) or not SOURCE_NAME.match(source) or source == PAPER_SOURCE:
            raise ParamsError(f"params: '{where}.source' must be a lower-case name (letters, digits, '.', '_', '-'), "
                              f"not {PAPER_SOURCE!r}; got {source!r}")
        if not isinstance(path, str) or not path.strip():
            raise ParamsError(f"params: '{where}.path' must be a non-empty path, got {path!r}")
        out.append(RawSource(source, Path(path)))
    paths = [r.path for r in out]
    twice = sorted({str(p) for p in paths if paths.count(p) > 1})
    if twice:
        raise ParamsError(f"params: 'kernels.fit.raw' lists {twice} more than once")
    return tuple(out)


@dataclass(frozen=True)
class Estimate:
    """A kernel source paired from two measured ones: one's decode loop, the other's prefill (an estimate)."""

    name: str
    decode: str
    prefill: str


def estimates_from_params(params: dict, dotted: str, sources: tuple[str, ...]) -> tuple[Estimate, ...]:
    """The paired estimates at `dotted` (e.g. rivals.estimates): each {name, decode, prefill}, both sides kernel-source
    names of one model, the name new (not one of `sources`); every fault named here, before a stage prices a case."""
    out = []
    for i, entry in enumerate(get(params, dotted, list)):
        if not isinstance(entry, dict) or set(entry) != {"name", "decode", "prefill"}:
            raise ParamsError(f"params: '{dotted}[{i}]' must have exactly name, decode and prefill, got {entry!r}")
        if not all(isinstance(v, str) and v for v in entry.values()):
            raise ParamsError(f"params: '{dotted}[{i}]' values must be non-empty names, got {entry!r}")
        if entry["name"] in sources:
            raise ParamsError(f"params: '{dotted}[{i}]' name {entry['name']!r} is also a kernel source")
        sides = {}
        for side in ("decode", "prefill"):
            try:
                sides[side] = parse_name(entry[side])
            except ParamsError as exc:
                raise ParamsError(f"params: '{dotted}[{i}].{side}': {exc}") from None
        if None not in (sides["decode"].model, sides["prefill"].model) and sides["decode"].model != sides["prefill"].model:
            raise ParamsError(f"params: '{dotted}[{i}]' pairs two models ({sides['decode'].model}, "
                              f"{sides['prefill'].model}); an estimate is one model's decode loop with its own prefill")
        out.append(Estimate(entry["name"], entry["decode"], entry["prefill"]))
    if len({e.name for e in out}) != len(out):
        raise ParamsError(f"params: '{dotted}' names two estimates alike")
    return tuple(out)


# ---------------------------------------------------------------- the `kernel:` params group

@dataclass(frozen=True)
class KernelSettings:
    """params `kernel`: which kernel sources the bounds, optimal oracle and headline are composed with,
    and which fitted model `fit` stands for."""

    sources: tuple[str, ...]
    model: str
    dtype: str
    device: str
    baselines: tuple[str, ...]
    latency_form: str


def kernel_settings(params: dict) -> KernelSettings:
    p = params
    return KernelSettings(
        sources=names_from_params(p, "kernel.sources"),
        model=get(p, "kernel.model", str), dtype=get(p, "kernel.dtype", str), device=get(p, "kernel.device", str),
        baselines=choices(p, "kernel.baselines", AR_LOOPS),
        latency_form=choice(p, "kernel.latency_form", FORMS),
    )


# ---------------------------------------------------------------- loading and selection

def load_fitted_models(path: Path = LATENCY_MODEL) -> list[LatencyModel]:
    """Every model of the fit stage's latency model document."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path} not found; run `copydecode kernels fit` (or `dvc repro`) first")
    try:
        return from_document(json.loads(path.read_text()))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ParamsError) as exc:  # `{}`: no schema
        raise ParamsError(f"{path} is not a latency model file ({exc}); rerun `copydecode kernels fit`") from None


def measured_names(models) -> list[str]:
    """The names of every measured kernel source other than this run's fit, in document order."""
    return list(dict.fromkeys(key_name(m.key) for m in models if m.key.source != FIT_SOURCE))


def select_measured(models, name: str, form: str) -> LatencyModel:
    """The model a measured kernel-source name stands for: in `form`, or its one model when it is a
    device-time source (built one way, see device_time_models)."""
    parsed = parse_name(name)
    wanted = DEVICE_TIME if parsed.kind == DEVICE_TIME else form
    matches = [m for m in models if m.key.source != FIT_SOURCE and key_name(m.key) == name and m.form == wanted]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ParamsError(f"kernel source {name!r} is not in the fitted latency model (form {wanted}); measured sources: "
                          f"{', '.join(measured_names(models)) or 'none besides fit'} (add its raw file to "
                          f"kernels.fit.raw, or its probe to kernel.device_time)")
    raise ParamsError(f"kernel source {name!r} matches {len(matches)} fitted models (several dtypes or devices under "
                      f"one source name); give each raw file its own source in kernels.fit.raw")


@dataclass(frozen=True)
class Kernel:
    """One kernel source a bound is composed with, and what to label its rows with."""

    source: str        # the kernel-source name
    baseline: str      # the AR loop (or the paper's label)
    model: LatencyModel
    model_name: str
    dtype: str
    device: str
    built_note: str | None = None   # how a paired estimate was built (paired_kernel)

    @property
    def measured(self) -> bool:
        return self.source != PAPER_SOURCE

    @property
    def built(self) -> str:
        """How the latency model behind this kernel was built (the bounds tables' `kernel_model`)."""
        if self.built_note:
            return self.built_note
        if self.source == PAPER_SOURCE:
            return "paper: the abstract's two points joined in log-log, unit decode step"
        if self.model.form == DEVICE_TIME:
            return DEVICE_TIME_BUILT
        return f"{self.model.form} fit of the profiled T_ar and T_prefill"


def select_kernels(sources, model: str, dtype: str, device: str, baselines, latency_form: str,
                   path: Path = LATENCY_MODEL) -> list[Kernel]:
    """Each kernel source in order; `fit` once per AR baseline of this run's profile."""
    chosen = []
    fitted = load_fitted_models(path) if any(k != PAPER_SOURCE for k in sources) else []
    for name in sources:
        if name == FIT_SOURCE:
            chosen += [Kernel(FIT_SOURCE, b, select_model(fitted, model, dtype, device, b, latency_form), model, dtype,
                              device) for b in baselines]
        elif name == PAPER_SOURCE:
            chosen.append(Kernel(PAPER_SOURCE, PAPER_BASELINE, paper_model(), PAPER_SOURCE, "bfloat16",
                                 "A100 80GB (paper)"))
        else:
            m = select_measured(fitted, name, latency_form)
            chosen.append(Kernel(name, m.key.baseline, m, m.key.model, m.key.dtype, m.key.device))
    return chosen


@dataclass(frozen=True)
class PairedModel(LatencyModel):
    """A latency model whose decode side (T_ar, t_step, the step split) is one source's and whose T_prefill is
    another's, each checked against its own profiled range: an estimate, not a measurement."""

    prefill_model: LatencyModel | None = None

    def t_prefill(self, n, c, extrapolate: bool = False, past_n: str = LOGLOG):
        return self.prefill_model.t_prefill(n, c, extrapolate, past_n)

    def repeat_models(self) -> list[LatencyModel]:
        return []


def paired_kernel(name: str, decode: Kernel, prefill: Kernel) -> Kernel:
    """The kernel `name`: `decode`'s AR loop with `prefill`'s prefill (e.g. the H200 CUDA-graph decode loop with
    the device-time prefill, the serving-grade pairing until a graph/graph run exists). Labelled an estimate."""
    if decode.model_name != prefill.model_name:
        raise ParamsError(f"kernel estimate {name!r} pairs two models ({decode.model_name}, {prefill.model_name})")
    fields = {f: getattr(decode.model, f) for f in ("key", "form", "ar", "prefill", "ns", "contexts")}
    model = PairedModel(**fields, prefill_model=prefill.model,
                        diagnostics={"notes": [f"estimate: decode loop of {decode.source}, prefill of {prefill.source}"]})
    return replace(decode, source=name, model=model,
                   built_note=f"estimate: the decode loop of {decode.source} with the prefill of {prefill.source} "
                              "(each priced in its own profiled range; not measured together)")


def kernels_for(s: KernelSettings, sources=None, baselines=None) -> list[Kernel]:
    """The kernels of the `kernel:` group (or of `sources`/`baselines` in its place)."""
    return select_kernels(s.sources if sources is None else sources, s.model, s.dtype, s.device,
                          s.baselines if baselines is None else baselines, s.latency_form)


def needs_fit_document(sources) -> bool:
    return any(not is_paper(s) for s in sources)


# ---------------------------------------------------------------- how each ratio's two sides were built

COMPARISONS = {
    "eager/eager": "eager decode loop vs eager prefill (both host-dispatched)",
    "device/device": "device (kernel) time vs device time (launch-free)",
    "graph/graph": "CUDA-graph decode loop vs compiled prefill",
    "graph/eager": "CUDA-graph decode loop vs eager prefill (prefill not graph-captured)",
    "eager/graph": "eager decode loop vs compiled prefill (decode loop not graph-captured)",
}
JUDGED = ("eager/eager", "device/device", "graph/graph")  # both sides built alike: a claim may be judged on these


def _side(column: str, graph: tuple[str, ...]) -> pl.Expr:
    return (pl.when(pl.col(column) == DEVICE_TIME).then(pl.lit("device"))
            .when(pl.col(column).is_in(list(graph))).then(pl.lit("graph")).otherwise(pl.lit("eager")))


def with_comparison(speedups: pl.DataFrame) -> pl.DataFrame:
    """kernel_speedup rows with `comparison` (decode loop / prefill as built), `comparison_label` and
    `judged` (true for eager/eager, device/device and graph/graph only)."""
    comparison = pl.concat_str(_side("baseline", GRAPH_LOOPS), pl.lit("/"), _side("prefill", GRAPH_PREFILLS))
    return speedups.with_columns(comparison=comparison).with_columns(
        comparison_label=pl.col("comparison").replace_strict(COMPARISONS, default=None),
        judged=pl.col("comparison").is_in(list(JUDGED)))


def with_ar_shift(speedups: pl.DataFrame, shifts: pl.DataFrame, early_until: int) -> pl.DataFrame:
    """kernel_speedup rows with `ar_shift`: a repeat of this cell slowed part-way (a repeat of its source,
    model, loop and context whose late steps took SHIFT_RATIO times its first `early_until` steps' time),
    at an N past those first steps (T_ar(N) is read off the run's prefix); which repeats, and the median
    without them, are `with_unshifted`'s."""
    keys = ["source", "model", "baseline", "context"]
    if shifts.is_empty() or not all(k in shifts.columns for k in keys):
        return speedups.with_columns(ar_shift=pl.lit(False))
    shifted = (shifts.group_by(keys).agg(any_shift=(pl.col("late_over_early") > SHIFT_RATIO).any())
               .with_columns(pl.col("context").cast(pl.Int64)))
    return (speedups.with_row_index("_row").with_columns(pl.col("context").cast(pl.Int64))
            .join(shifted, on=keys, how="left")
            .with_columns(ar_shift=pl.col("any_shift").fill_null(False) & (pl.col("n") > early_until))
            .sort("_row").drop("any_shift", "_row"))


def with_unshifted(speedups: pl.DataFrame, unshifted: pl.DataFrame) -> pl.DataFrame:
    """kernel_speedup rows with `shifted_repeats` and `speedup_unshifted` (analysis.latency.tables.
    unshifted_speedups, per source): the median without the repeats that slowed part-way, beside the
    median of every repeat (`speedup`); rows without paired repeats (device time) get '' and null."""
    keys = ["source", "model", "weights", "dtype", "device", "context", "n", "baseline", "prefill"]
    if unshifted.is_empty():
        return speedups.with_columns(shifted_repeats=pl.lit(""), speedup_unshifted=pl.lit(None, dtype=pl.Float64))
    joined = speedups.with_row_index("_row").join(unshifted.with_columns(pl.col("context").cast(speedups.schema["context"])),
                                                  on=keys, how="left")
    return joined.with_columns(pl.col("shifted_repeats").fill_null("")).sort("_row").drop("_row")


# ---------------------------------------------------------------- what each source measured (kernel report)

def source_summary(speedups: pl.DataFrame, ns=REPORT_NS) -> pl.DataFrame:
    """One row per (kernel source, prefill kind, context): what it is, how its two sides were built
    (comparison, judged), the median paired ratio at each N of `ns`, and `ar_shift_at`: the N of `ns`
    whose ratio rests on an AR run that slowed part-way (empty: none)."""
    keys = ["kernel_source", "model", "dtype", "device", "baseline", "prefill", "comparison", "judged", "context"]
    keys = [k for k in keys if k in speedups.columns]
    chosen = speedups.filter(pl.col("n").is_in(list(ns)))
    wide = chosen.pivot(on="n", index=keys, values="speedup", aggregate_function="first").rename(
        {str(n): f"speedup_n{n}" for n in ns if str(n) in chosen["n"].cast(pl.String).to_list()})
    shifted = (pl.col("n").filter(pl.col("ar_shift")).sort().cast(pl.String).str.join(", ") if "ar_shift" in chosen.columns
               else pl.lit(""))
    extra = chosen.group_by(keys).agg(repeats=pl.col("repeats").min(), ar_shift_at=shifted)
    return wide.join(extra, on=keys, how="left").sort(keys)


def measured_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of every measured source other than this run's fit (by `kernel_source`, else `source`),
    columns that only this run's fit fills dropped."""
    column = "kernel_source" if "kernel_source" in frame.columns else "source"
    if column not in frame.columns:
        return frame.clear()
    rows = frame.filter(pl.col(column) != FIT_SOURCE)
    return rows.select([c for c in rows.columns if rows[c].null_count() < rows.height or rows.height == 0])


def roofline_summary(roofline: pl.DataFrame, ns=REPORT_NS) -> pl.DataFrame:
    """The roofline table at the report's N: measured ratio, the ceiling when both kernels run at
    their physical floors, and the share of each floor the measurement reached."""
    if roofline.is_empty():
        return roofline
    return roofline.filter(pl.col("n").is_in(list(ns))).select(
        "kernel_source", "roof", "context", "n", "speedup", "ceiling", "ar_step_ms", "step_floor_ms",
        "ar_share_of_floor", "prefill_ms", "prefill_floor_ms", "prefill_share_of_floor",
    ).sort("kernel_source", "context", "n")


@dataclass(frozen=True)
class StepShift:
    """How many AR runs of one loop slowed part-way, and by how much (from kernel_ar_steps)."""

    source: str
    baseline: str
    runs: int
    shifted: int
    ratio_min: float | None
    ratio_max: float | None
    early_until: int
    late_from: int

    def sentence(self) -> str:
        if not self.shifted:
            return (f"{self.source} {self.baseline}: none of {self.runs} AR runs slowed part-way (ms per step after "
                    f"step {self.late_from} within {SHIFT_RATIO}x of steps 1-{self.early_until}).")
        return (f"{self.source} {self.baseline}: {self.shifted} of {self.runs} AR runs took {self.ratio_min:.1f}x-"
                f"{self.ratio_max:.1f}x longer per step after step {self.late_from} than over steps 1-{self.early_until}.")


def step_shifts(steps: pl.DataFrame, early_until: int, late_from: int) -> list[StepShift]:
    """Per (source, AR loop): runs whose later steps took SHIFT_RATIO times their first steps' time."""
    out = []
    for (source, baseline), group in steps.group_by(["source", "baseline"], maintain_order=True):
        shifted = group.filter(pl.col("late_over_early") > SHIFT_RATIO)["late_over_early"]
        out.append(StepShift(source, baseline, group.height, shifted.len(),
                             float(shifted.min()) if shifted.len() else None,
                             float(shifted.max()) if shifted.len() else None, early_until, late_from))
    return out


def this_run(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of this run's own profile (`source` fit); columns that only other sources fill are dropped."""
    rows = frame.filter(pl.col("source") == FIT_SOURCE)
    return rows.select([c for c in rows.columns if rows[c].null_count() < rows.height or rows.height == 0])


def shifted_runs(steps: pl.DataFrame) -> list[str]:
    """'model c=context repeat r (x.xx)' for each AR run that slowed part-way, in table order."""
    rows = steps.filter(pl.col("late_over_early") > SHIFT_RATIO)
    return [f"{r['model']} {r['baseline']} c={r['context']} repeat {r['repeat']} ({r['late_over_early']:.1f}x)"
            for r in rows.iter_rows(named=True)]
