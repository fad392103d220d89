"""The paper's claims against this suite's outputs: a verdict table, torch-free and without HTML.

`analysis/data/paper_claims.json` is the single source of each claim: its text (the paper's figure),
the output it is measured on (`metric`), the comparator and its tolerances, and the pool of corpora
(`pool`; the paper's three corpora unless stated). `claims()` reads the stage outputs, measures each
claim over its pool and applies its comparator; the result is one frozen `Claim` per claim (claim,
paper figure, ours, verdict, reason, method), and `claims_frame` the same as a polars table.

Verdicts: `reproduced` (every test passes), `differs` (the failing test is the reason), `not
reproduced at this scale` (a scaled-down replica whose measured effect falls short of the paper's),
`not run` (a stage output is absent; never silently dropped), and `beyond the paper` only for a row
marked `extension` (a measurement the paper does not report).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable

import polars as pl

from analysis.errors import MissingOutputError, ParamsError, StaleInputError
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.latency.sources import with_kernel_source
from analysis.latency.model import PAPER_CLAIMS, paper_points
from analysis.layout import (
    METRICS,
    PAPER_CORPORA,
    PAPER_NAMES,
    PER_CORPUS,
    POOLED,
    POOLINGS,
    RATIO_OF_SUMS,
    TABLES,
    framing_filter,
    paper_view,
    star,
)
from analysis.layout import PAPER_POOL as PAPER_CORPORA_POOL  # a table's `pool` value; PAPER_POOL below is a claim's
from analysis.results.numbers import MISSING, fmt_ci, fmt_int, fmt_pct, fmt_range, fmt_x
from analysis.results.outputs import BOUNDS_COLUMNS, bounds_frame, optional_table, table

PAPER = PAPER_CLAIMS

REPRODUCED, DIFFERS, NOT_RUN = "reproduced", "differs", "not run"
NOT_AT_SCALE, BEYOND = "not reproduced at this scale", "beyond the paper"
NOT_APPLICABLE = "not applicable to this run"
UNDERDETERMINED = "underdetermined"  # the paper leaves out what the figure depends on; ours contains it (rule in the JSON)
STALE = "stale output"  # a stage output predates the columns the claim is judged on: rerun the stage it names
VERDICTS = (REPRODUCED, DIFFERS, UNDERDETERMINED, NOT_AT_SCALE, NOT_RUN, STALE, NOT_APPLICABLE, BEYOND)
PAPER_POOL = "paper_corpora"  # a claim's `pool` when it is judged over the paper's three corpora
FIT = FIT_SOURCE  # kernel_source of this run's fitted CPU profile (the only one when the column is absent)


@dataclass(frozen=True)
class Claim:
    claim: str
    paper: str
    ours: str
    verdict: str
    reason: str
    method: str

    @property
    def why(self) -> str:  # the earlier name of `reason`
        return self.reason


def paper_claims(path: Path = PAPER) -> dict:
    """paper_claims.json, every claim checked for a known comparator."""
    doc = json.loads(Path(path).read_text())
    for key, spec in doc.items():
        if key.startswith("_"):
            continue
        if spec.get("comparator") not in COMPARATORS:
            raise ParamsError(f"{path}: claim {key!r} has comparator {spec.get('comparator')!r}; "
                              f"known: {', '.join(COMPARATORS)}")
    return doc


DEVICES = Path(__file__).parents[1] / "data" / "devices.json"  # GPU datasheets, their one home


def paper_gpu(path: Path = PAPER, devices: Path = DEVICES) -> dict:
    """The paper's GPU: its label from paper_claims.json `_gpu_reference`, its datasheet figures
    (hbm_gbps, bf16_tflops, source) from devices.json, and the paper's top kernel ratio and its N."""
    paper = paper_claims(path)
    ref = paper["_gpu_reference"]
    sheets = json.loads(Path(devices).read_text())
    entry = sheets.get(ref.get("datasheet_entry"))
    if not isinstance(entry, dict):
        raise ParamsError(f"{path}: _gpu_reference.datasheet_entry {ref.get('datasheet_entry')!r} is not an entry of "
                          f"{devices}; known: {', '.join(k for k in sheets if not k.startswith('_'))}")
    (_, _), (top_n, top) = paper_points(paper["kernel_speedup"])
    return {"device": ref["device"], "hbm_gbps": entry["hbm_gbps"], "bf16_tflops": entry["bf16_tflops"],
            "source": entry["source"], "paper_top": top, "paper_top_n": top_n}


# ---------------------------------------------------------------- comparators (named in the JSON)
#
# Each comparator the JSON may name is a function (ours, paper, spec, **options) -> bool, its tolerance
# read from the claim's spec; `judge` dispatches on the claim's `comparator`. A claim whose comparator is
# not in the registry is a ParamsError when paper_claims.json is read (`paper_claims`).


def _ends(value) -> tuple[float, ...]:
    return tuple(float(v) for v in value) if isinstance(value, (tuple, list)) else (float(value),)


def within_factor(ours: float, paper: float, tol: float) -> bool:
    return paper / (1 + tol) <= ours <= paper * (1 + tol)


def within_pp(ours: float, paper: float, tol_pp: float) -> bool:
    return abs(ours - paper) <= tol_pp / 100


def inside_widened_ci(low: float, high: float, paper: float, tol: float) -> bool:
    return low / (1 + tol) <= paper <= high * (1 + tol)


def _paired(ours, paper) -> list[tuple[float, float]]:
    ours, paper = _ends(ours), _ends(paper)
    if len(paper) == 1 and len(ours) > 1:
        paper = paper * len(ours)
    if len(ours) != len(paper):
        raise ParamsError(f"comparator: {len(ours)} measured end(s) against {len(paper)} of the paper's")
    return list(zip(ours, paper))


def ends_within_factor(ours, paper, spec: dict) -> bool:
    """Each measured end within a factor (1 + rel_tolerance) of the paper's end."""
    return all(within_factor(o, p, spec["rel_tolerance"]) for o, p in _paired(ours, paper))


def ends_within_pp(ours, paper, spec: dict) -> bool:
    """Each measured end (a share) within tolerance_pp percentage points of the paper's."""
    return all(within_pp(o, p, spec["tolerance_pp"]) for o, p in _paired(ours, paper))


def each_within_pp(ours, paper, spec: dict) -> bool:
    """Every measured value (one per kind) within tolerance_pp points of the paper's single figure."""
    return all(within_pp(o, p, spec["tolerance_pp"]) for o, p in _paired(ours, paper))


def ci_holds_paper(ours, paper, spec: dict) -> bool:
    """The paper's figure inside our 95% CI (low, high) widened by a factor (1 + rel_tolerance)."""
    low, high = _ends(ours)
    return inside_widened_ci(low, high, float(paper), spec["rel_tolerance"])


def range_inside(ours, paper, spec: dict, tolerance: str = "rel_tolerance") -> bool:
    """Our range (low, high) inside the paper's widened by `tolerance`: a factor for rel_tolerance,
    percentage points for tolerance_pp."""
    (low, high), (p_low, p_high), tol = _ends(ours), _ends(paper), spec[tolerance]
    if tolerance.endswith("_pp"):
        return p_low - tol / 100 <= low and high <= p_high + tol / 100
    return p_low / (1 + tol) <= low and high <= p_high * (1 + tol)


def at_most(ours, paper, spec: dict) -> bool:
    """A count at most the stated limit (`paper`, e.g. max_failures)."""
    return float(ours) <= float(paper)


def lift_at_least(ours, paper, spec: dict) -> bool:
    """A measured lift at least the paper's less tolerance_pp points."""
    return float(ours) >= float(paper) - spec["tolerance_pp"] / 100


def no_verdict(ours, paper, spec: dict) -> bool:
    raise ParamsError("comparator 'none' belongs to an extension row, which gets no verdict against the paper")


COMPARATORS: dict[str, Callable[..., bool]] = {
    "ends_within_factor": ends_within_factor, "ends_within_pp": ends_within_pp, "inside_widened_ci": ci_holds_paper,
    "range_inside": range_inside, "at_most": at_most, "each_within_pp": each_within_pp,
    "lift_at_least": lift_at_least, "none": no_verdict,
}


def judge(spec: dict, ours, paper, **options) -> bool:
    """Apply the claim's own comparator (its `comparator` in paper_claims.json) with its tolerances."""
    name = spec.get("comparator")
    if name not in COMPARATORS:
        raise ParamsError(f"claim {spec.get('title', '?')!r} has comparator {name!r}; known: {', '.join(COMPARATORS)}")
    return COMPARATORS[name](ours, paper, spec, **options)


# ---------------------------------------------------------------- metric paths (named in the JSON)


@dataclass(frozen=True)
class MetricPath:
    """One `metric` entry of a claim: `tables/<name>.csv:<column>` or `metrics/<name>.json:<key>`."""

    root: str
    name: str
    kind: str
    field: str

    @property
    def text(self) -> str:
        return f"{self.root}/{self.name}.{self.kind}:{self.field}"


METRIC_ROOTS = ("tables", "metrics")


def metric_paths(spec: dict) -> list[MetricPath]:
    """The claim's `metric` list parsed; a malformed entry is a ParamsError naming it."""
    entries = spec.get("metric")
    entries = [entries] if isinstance(entries, str) else entries
    if not entries:
        raise ParamsError(f"claim {spec.get('title', '?')!r} names no metric")
    out = []
    for entry in entries:
        path, _, field = str(entry).partition(":")
        root, _, file = path.partition("/")
        name, _, kind = file.rpartition(".")
        if root not in METRIC_ROOTS or kind not in ("csv", "json") or not name or not field:
            raise ParamsError(f"claim {spec.get('title', '?')!r}: metric {entry!r} is not "
                              "'tables/<name>.csv:<column>' or 'metrics/<name>.json:<key>'")
        out.append(MetricPath(root, name, kind, field))
    return out


def _metric_file(mp: MetricPath, tables: Path, metrics_dir: Path) -> Path:
    return (Path(tables) if mp.root == "tables" else Path(metrics_dir)) / f"{mp.name}.{mp.kind}"


def read_metric(mp: MetricPath, tables: Path, metrics_dir: Path):
    """The table (checked to hold the column) or the JSON document (checked to hold the key) a metric
    path names; an absent file, column or key is a MissingOutputError naming the path."""
    path = _metric_file(mp, tables, metrics_dir)
    if not path.is_file():
        raise MissingOutputError(f"{path} not found (claim metric {mp.text}); run `dvc repro` first")
    if mp.kind == "csv":
        frame = pl.read_csv(path)
        if mp.field not in frame.columns:
            raise MissingOutputError(f"{path} has no column {mp.field!r} (claim metric {mp.text}): stale output, "
                                     "rerun the stage that writes it")
        return frame
    doc = json.loads(path.read_text())
    if not isinstance(doc, dict) or mp.field not in doc:
        raise MissingOutputError(f"{path} has no key {mp.field!r} (claim metric {mp.text}); rerun the stage that "
                                 "writes it")
    return doc


def metric_input(spec: dict, index: int, tables: Path, metrics_dir: Path):
    """The claim's `index`-th metric, read (a table or a metrics document)."""
    return read_metric(metric_paths(spec)[index], tables, metrics_dir)


def bounds_input(spec: dict, index: int, tables: Path, metrics_dir: Path) -> pl.DataFrame:
    """bounds.csv through the claim's metric path, checked for the kernel-source format."""
    frame = metric_input(spec, index, tables, metrics_dir)
    missing = [c for c in BOUNDS_COLUMNS if c not in frame.columns]
    if missing:
        raise MissingOutputError(f"{Path(tables) / 'bounds.csv'} has no {', '.join(missing)} column(s): stale output, "
                                 "rerun `copydecode bounds`")
    return frame


# ---------------------------------------------------------------- 1. kernel speedup


def kernel_rows(tables: Path = TABLES) -> pl.DataFrame:
    """kernel_speedup.csv with its kernel_source (`fit` for every row when the column is absent)."""
    kern = table("kernel_speedup", tables)
    return with_kernel_source(kern)


@dataclass(frozen=True)
class KernelRange:
    source: str
    setup: str
    gpu: bool
    strongest: tuple[float, float]
    strongest_loops: str
    eager: tuple[float, float] | None


def kernel_ranges(kern: pl.DataFrame, n_min: int, n_max: int) -> list[KernelRange]:
    """Per measured setup (a kernel source's raw measurement and model: this run's profile, or one
    model of a frozen GPU run whose AR loops are separate kernel sources): the speedup range over N in
    [n_min, n_max] against the strongest AR loop and against the eager loop (with the eager prefill),
    with the model, dtype and device it was measured on."""
    out = []
    grid = kern.filter(pl.col("n").is_between(n_min, n_max))
    if "source" not in grid.columns:
        grid = grid.with_columns(source=pl.col("kernel_source"))
    if "prefill" not in grid.columns:
        grid = grid.with_columns(prefill=pl.lit("eager"))
    for (source, model), rows in grid.group_by("source", "model", maintain_order=True):
        strongest = rows.filter(pl.col("is_strongest"))
        eager = rows.filter((pl.col("baseline") == "eager") & (pl.col("prefill") == "eager"))
        if strongest.height == 0:
            continue
        setups = sorted({f"{r['model']} {r['dtype']} {r['device']}" for r in rows.iter_rows(named=True)})
        names = rows["kernel_source"].unique(maintain_order=True).to_list()
        label = names[0] if len(names) == 1 else f"{source}/{model}"
        out.append(KernelRange(
            source=label, setup=", ".join(setups), gpu=any(d != "cpu" for d in rows["device"].to_list()),
            strongest=(strongest["speedup"].min(), strongest["speedup"].max()),
            strongest_loops=", ".join(sorted(set(strongest["baseline"].to_list()))),
            eager=(eager["speedup"].min(), eager["speedup"].max()) if eager.height else None))
    return out


KERNEL_CONTRACT = ("comparison", "judged", "ar_shift")  # kernel_speedup.csv columns claim 1 is judged on
KERNEL_METHOD = ("T_ar(N)/T_prefill(N), median of paired repeats, random weights; judged only where both sides are "
                 "built alike (comparison eager/eager: both host-bound; device/device: torch.profiler kernel time; "
                 "graph/graph: both CUDA-graph captured); graph/eager (a CUDA-graph decode loop against an eager "
                 "prefill) shown, never judged; fit = this run's CPU profile, h200 = the frozen H200 run "
                 "(reports/kernels/frozen/h200) [kernels fit]")


@dataclass(frozen=True)
class ComparisonRange:
    """One (kernel source, model) setup's speedup range over N for one comparison (how each side is built)."""

    source: str
    setup: str
    gpu: bool
    comparison: str
    judged: bool
    low: float
    high: float
    low_shift: bool  # the low end comes from a run whose AR step time shifts part-way
    high_shift: bool


def _setup_groups(kern: pl.DataFrame, n_min: int, n_max: int):
    grid = kern.filter(pl.col("n").is_between(n_min, n_max))
    if "source" not in grid.columns:
        grid = grid.with_columns(source=pl.col("kernel_source"))
    for (source, model), rows in grid.group_by("source", "model", maintain_order=True):
        setups = sorted({f"{r['model']} {r['dtype']} {r['device']}" for r in rows.iter_rows(named=True)})
        names = rows["kernel_source"].unique(maintain_order=True).to_list()
        label = names[0] if len(names) == 1 else f"{source}/{model}"
        yield label, ", ".join(setups), any(d != "cpu" for d in rows["device"].to_list()), rows


def comparison_ranges(kern: pl.DataFrame, n_min: int, n_max: int) -> list[ComparisonRange]:
    """Per setup and comparison (the kernel table's `comparison`, `judged`, `ar_shift` columns): the
    speedup range over N in [n_min, n_max], each end flagged when its row's AR run shifts part-way."""
    missing = [c for c in KERNEL_CONTRACT if c not in kern.columns]
    if missing:
        raise StaleInputError(f"kernel_speedup.csv has no {', '.join(missing)} column(s): stale output, rerun "
                              "`copydecode kernels fit` (claim 1 is judged only on comparisons built alike)")
    out = []
    for label, setup, gpu, rows in _setup_groups(kern, n_min, n_max):
        for (comparison, judged), group in rows.group_by("comparison", "judged", maintain_order=True):
            lo, hi = group.sort("speedup").row(0, named=True), group.sort("speedup").row(-1, named=True)
            out.append(ComparisonRange(label, setup, gpu, comparison, bool(judged), lo["speedup"], hi["speedup"],
                                       bool(lo["ar_shift"]), bool(hi["ar_shift"])))
    return out


AR_SHIFT_FLAG = " (AR step time shifts part-way)"


def comparison_text(r: ComparisonRange, notes: dict) -> str:
    ends = (f"{fmt_x(r.low)}{AR_SHIFT_FLAG if r.low_shift else ''}-{fmt_x(r.high)}{AR_SHIFT_FLAG if r.high_shift else ''}"
            if r.low != r.high or r.low_shift != r.high_shift else fmt_x(r.low) + (AR_SHIFT_FLAG if r.low_shift else ""))
    note = notes.get(r.comparison)
    return f"{r.comparison} {ends}" + (f" ({note}, not judged)" if note and not r.judged else
                                       " (not judged)" if not r.judged else "")


def _stale_kernel_ours(kern: pl.DataFrame, n_min: int, n_max: int) -> str:
    return "; ".join(
        f"{r.source} ({r.setup}): {fmt_range(*r.strongest, fmt_x)} vs the strongest AR loop ({r.strongest_loops})"
        + (f", {fmt_range(*r.eager, fmt_x)} vs eager" if r.eager else "") for r in kernel_ranges(kern, n_min, n_max))


def _kernel_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    (n_lo, paper_lo), (n_hi, paper_hi) = paper_points(spec)
    kern = metric_input(spec, 0, tables, metrics_dir)
    kern = kern if "kernel_source" in kern.columns else kern.with_columns(kernel_source=pl.lit(FIT))
    claim = f"1. {spec['title']}, N in [{spec['n_min']}, {spec['n_max']}]"
    try:
        ranges = comparison_ranges(kern, spec["n_min"], spec["n_max"])
    except StaleInputError as stale:  # today's committed table predates the comparison columns: shown, not judged
        return Claim(claim=claim, paper=spec["text"], ours=_stale_kernel_ours(kern, spec["n_min"], spec["n_max"]),
                     verdict=STALE, reason=str(stale), method=KERNEL_METHOD)
    judged_all = [r for r in ranges if r.judged]
    if not judged_all:
        raise MissingOutputError(f"kernel_speedup.csv has no judged rows for N in [{spec['n_min']}, {spec['n_max']}]")
    judged = [r for r in judged_all if r.gpu] or judged_all
    gpu = any(r.gpu for r in judged)
    off, flagged = [], []
    for r in judged:
        for end, ours, paper, shift in (("low", r.low, paper_lo, r.low_shift), ("high", r.high, paper_hi, r.high_shift)):
            if not judge(spec, ours, paper):
                off.append(f"{r.source} {r.comparison} {end} end {fmt_x(ours)} vs {fmt_x(paper)}"
                           + (AR_SHIFT_FLAG if shift else ""))
            if shift:
                flagged.append(f"{r.source} {r.comparison} {end} end {fmt_x(ours)}")
    tol = spec["rel_tolerance"]
    notes = spec.get("comparison_notes") or {}
    reason = ("; ".join(off) if off else f"both ends within a factor {1 + tol:g} of the paper's") + (
        f"; flagged: {', '.join(flagged)} comes from a run whose AR step time shifts part-way" if flagged else "") + (
        f" (judged on the GPU sources' comparisons built alike: "
        f"{', '.join(sorted({f'{r.source} {r.comparison}' for r in judged}))})" if gpu else
        f"; measured on {', '.join(sorted({r.setup for r in judged}))} against the paper's A100 in bf16: the hardware "
        "is not comparable, and no GPU kernel source is in this run")
    by_setup: dict[tuple[str, str], list[ComparisonRange]] = {}
    for r in ranges:
        by_setup.setdefault((r.source, r.setup), []).append(r)
    ours = "; ".join(f"{source} ({setup}): " + ", ".join(comparison_text(r, notes) for r in group)
                     for (source, setup), group in by_setup.items())
    return Claim(claim=claim, paper=spec["text"], ours=ours, verdict=DIFFERS if off else REPRODUCED, reason=reason,
                 method=KERNEL_METHOD)


# ---------------------------------------------------------------- 2. line-level copy ceiling


def _ceiling_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    cov = paper_view(metric_input(spec, 0, tables, metrics_dir)).filter(pl.col("level") == "line").sort("coverage")
    if cov.height == 0:
        raise MissingOutputError("coverage.csv has no line-level rows for the paper's corpora")
    low, high = cov["coverage"].min(), cov["coverage"].max()
    tol = spec["tolerance_pp"]
    ok = judge(spec, (low, high), (spec["low"], spec["high"]))
    ours_range = fmt_range(low, high, fmt_pct)
    reason = (f"our range {ours_range} is within {tol:g} pp of the paper's ends" if ok else
              f"our range {ours_range} is more than {tol:g} pp from {fmt_range(spec['low'], spec['high'], fmt_pct)}")
    return Claim(
        claim=f"2. {spec['title']}", paper=spec["text"],
        ours="; ".join(f"{star(r['corpus'])} {fmt_pct(r['coverage'])} {fmt_ci(r['ci_low'], r['ci_high'], pct=True)}"
                       for r in cov.iter_rows(named=True)),
        verdict=REPRODUCED if ok else DIFFERS, reason=reason,
        method="exact line LCS oracle over the paper's three corpora, Qwen2.5 tokens, 95% bootstrap CI [spans]")


# ---------------------------------------------------------------- 3. closed-form bound


def line_ideal(bounds: pl.DataFrame, kernel_source: str, baseline: str | None = None) -> pl.DataFrame:
    """Line-level, ideal-variant, body-framing rows of one kernel source (and baseline)."""
    rows = bounds.filter((pl.col("level") == "line") & (pl.col("variant") == "ideal") & framing_filter("body")
                         & (pl.col("kernel_source") == kernel_source))
    return rows if baseline is None else rows.filter(pl.col("baseline") == baseline)


def per_corpus(rows: pl.DataFrame) -> dict[str, dict]:
    return {r["corpus"]: r for r in rows.filter(pl.col("pooling") == PER_CORPUS).iter_rows(named=True)}


PAPER_POOL_VALUES = (PAPER_CORPORA_POOL, "paper corpora")  # a bounds table's `pool` for the paper's three corpora (482 cases)


def _paper_pool_expr(rows: pl.DataFrame) -> pl.Expr:
    return pl.col("pool").is_in(PAPER_POOL_VALUES) if "pool" in rows.columns else pl.lit(False)


def pooled_rows(rows: pl.DataFrame) -> dict[str, dict]:
    """Pooled rows over every corpus of the run, by pooling rule (a `pool` == paper row is not one)."""
    pooled = rows.filter((pl.col("corpus") == POOLED) & ~_paper_pool_expr(rows))
    return {r["pooling"]: r for r in pooled.iter_rows(named=True)}


def paper_pool(tables: Path, kernel_source: str, baseline: str | None = None,
               bounds: pl.DataFrame | None = None) -> dict[str, dict]:
    """Pooled line/ideal/body rows over the paper's own corpora only, by pooling rule: the bounds table's
    `pool` == paper rows when it has them, else bounds_paper_pool.csv; empty when neither holds any (this
    suite's pool holds only the paper's corpora)."""
    if bounds is not None and "pool" in bounds.columns:
        rows = line_ideal(bounds, kernel_source, baseline).filter((pl.col("corpus") == POOLED) & _paper_pool_expr(bounds))
        if rows.height:
            return {r["pooling"]: r for r in rows.iter_rows(named=True)}
    frame = optional_table("bounds_paper_pool", tables)
    if frame is None or frame.is_empty():
        return {}
    return {r["pooling"]: r for r in line_ideal(frame, kernel_source, baseline).iter_rows(named=True)}


def _cases(pooled: dict[str, dict]) -> str:
    counts = sorted({int(r["n_cases"]) for r in pooled.values()})
    return f" ({', '.join(fmt_int(n) for n in counts)} cases)" if counts else ""


def bound_text(row: dict) -> str:
    return f"{fmt_x(row['bound'])} {fmt_ci(row['ci_low'], row['ci_high'])}"


def pooled_text(pooled: dict[str, dict]) -> str:
    return " / ".join(f"{fmt_x(pooled[p]['bound'])} ({p.replace('_', ' ')})" for p in POOLINGS if p in pooled)


def generated_share(tables: Path, corpus: str, level: str = "line") -> float | None:
    """Share of a corpus's gold tokens that no copy produces (1 - coverage), body framing or its own."""
    cov = table("coverage", tables).filter(framing_filter("body") & (pl.col("corpus") != POOLED)
                                           & (pl.col("level") == level) & (pl.col("corpus") == corpus))
    return None if cov.height == 0 else 1.0 - float(cov["coverage"][0])


def _ceiling_reason(name: str, ours: dict, paper_value: float, tables: Path) -> str:
    """Why our bound is above the paper's, from the coverage table: with free copies a program still
    decodes every generated token, so bound <= 1 / (generated share) (the ideal variant's cap)."""
    share = generated_share(tables, name)
    text = f"{star(name)} {fmt_x(ours['bound'])} vs {fmt_x(paper_value)}"
    if share is None or share <= 0 or ours["bound"] <= paper_value:
        return text
    return (text + f": a bound cannot exceed 1 / (share of gold tokens generated); {fmt_x(paper_value)} needs at least "
            f"{fmt_pct(1 / paper_value)} generated, {star(name)} generates {fmt_pct(share)} (cap {fmt_x(1 / share)}), "
            "so its edits are smaller relative to the output than the paper corpus's")


def other_kernel_sources(bounds: pl.DataFrame) -> list[tuple[str, str]]:
    """(kernel_source, baseline) of every kernel other than the paper's, in table order."""
    pairs = bounds.filter(pl.col("kernel_source") != PAPER_SOURCE).select("kernel_source", "baseline").unique(maintain_order=True)
    return [tuple(p) for p in pairs.iter_rows()]


def source_label(source: str, baseline: str, rows: pl.DataFrame) -> str:
    """`fit (eager AR, qwen2.5-0.5b float32 cpu)` or a frozen source's own name."""
    setup = ""
    if rows.height and {"model", "dtype", "device"} <= set(rows.columns):
        r = rows.row(0, named=True)
        setup = f", {r['model']} {r['dtype']} {r['device']}"
    return f"{source} ({baseline} AR{setup})"


def paper_comparison(tables: Path = TABLES, paper_path: Path = PAPER) -> pl.DataFrame:
    """Claim 3 like with like, one row per corpus and pooling rule: the paper's bound, the paper's
    kernel composed with this suite's spans (95% CI), whether the paper's figure lies inside that CI
    widened by the claim's tolerance, and every other kernel source's bound beside it (a column each)."""
    c = paper_claims(paper_path)["bounds"]
    bounds = bounds_frame(tables)
    composed = line_ideal(bounds, PAPER_SOURCE)
    ours_names = {v: k for k, v in PAPER_NAMES.items()}
    per_paper = per_corpus(composed)
    paper_cases = sum(per_paper[n]["n_cases"] for n in ours_names if n in per_paper)
    others = [(s, b, line_ideal(bounds, s, b)) for s, b in other_kernel_sources(bounds)]
    rows = []
    for r in composed.sort(pl.col("corpus") == POOLED, "corpus", "pooling").iter_rows(named=True):
        key = ours_names.get(r["corpus"], POOLED if r["corpus"] == POOLED else None)
        comparable = key is not None and (key != POOLED or (r["pooling"] == c.get("pooling", RATIO_OF_SUMS)
                                                            and r["n_cases"] == paper_cases))
        row = {
            "corpus": r["corpus"] if r["corpus"] != POOLED else f"pooled ({r['pooling'].replace('_', ' ')})",
            "cases": r["n_cases"], "paper": fmt_x(c[key]) if comparable else MISSING,
            "paper kernel x our spans": bound_text(r),
            "paper inside CI": (("yes" if judge(c, (r["ci_low"], r["ci_high"]), c[key])
                                 else "no") if comparable else "not comparable"),
        }
        for source, baseline, other in others:
            match = other.filter((pl.col("corpus") == r["corpus"]) & (pl.col("pooling") == r["pooling"]))
            name = "fitted kernel" if source == FIT and baseline == c.get("fit_baseline", "eager") else f"{source} kernel"
            row[name] = bound_text(match.row(0, named=True)) if match.height else MISSING
        rows.append(row)
    return pl.DataFrame(rows)


def _bounds_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    """Like with like: the paper's kernel curve composed with this suite's spans against the paper's
    bounds (the verdict); every other kernel source is shown beside it, not judged."""
    c = spec
    bounds = bounds_input(spec, 0, tables, metrics_dir)
    composed = line_ideal(bounds, PAPER_SOURCE)
    if composed.height == 0:
        raise MissingOutputError("bounds.csv has no paper-kernel rows; add `paper` to kernel.sources")
    ours, pooled = per_corpus(composed), pooled_rows(composed)
    inside = lambda row, value: judge(c, (row["ci_low"], row["ci_high"]), value)  # noqa: E731
    compared = [(name, key) for key, name in PAPER_NAMES.items() if name in ours and key in c]
    agree = [star(name) for name, key in compared if inside(ours[name], c[key])]
    off = [_ceiling_reason(name, ours[name], c[key], tables) for name, key in compared if star(name) not in agree]
    pool_rule = c.get("pooling", RATIO_OF_SUMS)
    paper_cases = sum(ours[name]["n_cases"] for name, _ in compared)
    extra = sorted(set(ours) - {name for name, _ in compared})
    paper_pools = paper_pool(tables, PAPER_SOURCE, bounds=bounds)
    notes = []
    if POOLED in c and pool_rule in pooled:
        if pooled[pool_rule]["n_cases"] == paper_cases and not extra:
            if not inside(pooled[pool_rule], c[POOLED]):
                off.append(f"pooled {fmt_x(pooled[pool_rule]['bound'])} ({pool_rule.replace('_', ' ')}) vs {fmt_x(c[POOLED])}")
        else:
            own = paper_pools.get(pool_rule)
            if own is not None and own["n_cases"] == paper_cases:
                if not inside(own, c[POOLED]):
                    off.append(f"pooled over the paper's corpora {fmt_x(own['bound'])} "
                               f"({pool_rule.replace('_', ' ')}) vs {fmt_x(c[POOLED])}")
                else:
                    agree.append(f"pooled over the paper's corpora ({fmt_x(own['bound'])})")
            else:
                notes.append(f"pooled not compared: this suite's pool also holds {', '.join(extra)} "
                             f"({fmt_int(pooled[pool_rule]['n_cases'])} cases against the paper corpora's "
                             f"{fmt_int(paper_cases)})")
    beside = []
    for source, baseline in other_kernel_sources(bounds):
        rows = line_ideal(bounds, source, baseline)
        mine, mine_pooled = per_corpus(rows), pooled_rows(rows)
        mine_paper = paper_pool(tables, source, baseline, bounds)
        beside.append(f"{source_label(source, baseline, rows)}: "
                      + "; ".join(f"{star(n)} {fmt_x(mine[n]['bound'])}" for n, _ in compared if n in mine)
                      + (f"; pooled over the paper's corpora {pooled_text(mine_paper)}{_cases(mine_paper)}"
                         if mine_paper else "")
                      + (f"; pooled{' over every corpus' if mine_paper else ''} {pooled_text(mine_pooled)}"
                         f"{_cases(mine_pooled)}" if mine_pooled else ""))
    reason = "; ".join(([f"{', '.join(agree)}: the paper's bound inside our widened CI"] if agree else []) + off + notes)
    return Claim(
        claim=f"3. {c['title']}", paper=c["text"],
        ours=("paper kernel x this suite's spans: "
              + "; ".join(f"{star(n)} {bound_text(ours[n])}" for n, _ in compared)
              + (f"; pooled {pooled_text(pooled)}" if pooled else "")
              + (f"; pooled over the paper's corpora {pooled_text(paper_pools)}" if paper_pools else "")
              + "".join(f". Beside it, {b}" for b in beside)),
        verdict=REPRODUCED if compared and not off else DIFFERS, reason=reason or "nothing to compare",
        method="spans x the paper's kernel curve (judged); every other kernel source beside it, not judged [bounds]")


# ---------------------------------------------------------------- 4. token level


def _token_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    """Coverage from the spans; floors like with like (the paper's kernel), the fitted kernel's beside."""
    c = spec
    cov = paper_view(metric_input(spec, 0, tables, metrics_dir)).filter(pl.col("level") == "token")
    floor_rows = paper_view(bounds_input(spec, 1, tables, metrics_dir)).filter(
        (pl.col("level") == "token") & (pl.col("variant") == "overhead"))
    floors = floor_rows.filter(pl.col("kernel_source") == PAPER_SOURCE)
    fitted = floor_rows.filter((pl.col("kernel_source") == FIT) & (pl.col("baseline") == c.get("fit_baseline", "eager")))
    if floors.height == 0:
        raise MissingOutputError("bounds.csv has no paper-kernel rows; add `paper` to kernel.sources")
    if cov.height == 0:
        raise MissingOutputError("coverage.csv has no token-level rows for the paper's corpora")
    tol = c["rel_tolerance"]
    cov_lo, cov_hi, fl_lo, fl_hi = cov["coverage"].min(), cov["coverage"].max(), floors["bound"].min(), floors["bound"].max()
    cov_ok = judge(c, (cov_lo, cov_hi), (c["coverage_low"], c["coverage_high"]), tolerance="tolerance_pp")
    floor_ok = judge(c, (fl_lo, fl_hi), (c["floor_low"], c["floor_high"]), tolerance="rel_tolerance")
    reasons = []
    if not cov_ok:
        low, high = cov.sort("coverage").row(0, named=True), cov.sort("coverage").row(-1, named=True)
        reasons.append(f"coverage {fmt_range(cov_lo, cov_hi, fmt_pct)} ({star(low['corpus'])} to {star(high['corpus'])}) "
                       f"outside the paper's range widened by {c['tolerance_pp']:g} pp")
    if not floor_ok:
        low, high = floors.sort("bound").row(0, named=True), floors.sort("bound").row(-1, named=True)
        extrapolated = int(floors["extrapolated_spans"].sum())
        reasons.append(f"floors {fmt_range(fl_lo, fl_hi, fmt_x)} ({star(low['corpus'])} to {star(high['corpus'])}) "
                       f"outside {fmt_range(c['floor_low'], c['floor_high'], fmt_x)} widened by {100 * tol:.0f}%"
                       + (f"; {fmt_int(extrapolated)} copy spans lie outside the paper curve's N range and are "
                          "extrapolated" if extrapolated else ""))
    fit_text = (f"; this machine's fitted kernel ({fitted['baseline'][0]} AR): floors "
                f"{fmt_range(fitted['bound'].min(), fitted['bound'].max(), fmt_x)}") if fitted.height else ""
    return Claim(
        claim=f"4. {c['title']}", paper=c["text"],
        ours=(f"coverage {fmt_range(cov_lo, cov_hi, fmt_pct)}; floors with the paper kernel "
              f"{fmt_range(fl_lo, fl_hi, fmt_x)}{fit_text}"),
        verdict=REPRODUCED if cov_ok and floor_ok else DIFFERS,
        reason="; ".join(reasons) or "coverage and floors within the stated tolerances",
        method="suffix-automaton oracle; floor = bound with every directive token decoded, paper kernel [spans, bounds]")


# ---------------------------------------------------------------- 5. losslessness


def _lossless_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    rt = metric_input(spec, 0, tables, metrics_dir)
    ok = judge(spec, rt["failed"], spec["max_failures"])
    return Claim(
        claim=f"5. {spec['title']}", paper=spec["text"],
        ours=f"{fmt_int(rt['passed'])}/{fmt_int(rt['programs'])} programs (line and token level, every framing)",
        verdict=REPRODUCED if ok else DIFFERS,
        reason="no program failed" if ok else f"{rt['failed']} programs did not round-trip",
        method="resolve(oracle) == target, byte for byte [roundtrip]")


# ---------------------------------------------------------------- 6. perturbation

# perturbation table per definition (the perturb stage writes one per definition)
PERTURBATION_TABLES = {"strict": "perturbation", "clip": "perturbation_clip", "one_span": "perturbation_one_span"}


def paper_pool_em(per_corpus_rows: pl.DataFrame, level: str = "line") -> pl.DataFrame:
    """EM per (kind, rate) pooled over the paper's three corpora (body framing), case-weighted, with
    the pooled no-copy share and case count (analysis.perturb.paper_pool_rows, the one pooling rule)."""
    from analysis.perturb import paper_pool_rows

    pooled = paper_pool_rows(per_corpus_rows.filter(framing_filter("body") & (pl.col("corpus") != POOLED)))
    return pooled.filter(pl.col("level") == level).sort("kind", "rate").select(
        "kind", "rate", "em", "no_copy", "n_cases", pl.col("corpora").cast(pl.Int64))


def paper_pool_crossings(tables: Path, target: float) -> pl.DataFrame:
    """Per perturbation definition present and kind: where EM pooled over the paper's corpora first
    falls to `target` (linear interpolation on the rate grid, analysis.perturb.crossing_rate)."""
    from analysis.perturb import crossing_rate

    out = []
    for definition, name in PERTURBATION_TABLES.items():
        frame = optional_table(name, tables)
        if frame is None:
            continue
        pooled = paper_pool_em(frame)
        for (kind,), rows in pooled.group_by("kind", maintain_order=True):
            out.append({"definition": definition, "kind": kind, "n_cases": int(rows["n_cases"].max()),
                        "crossing_rate": crossing_rate(rows["rate"].to_list(), rows["em"].to_list(), target)})
    return pl.DataFrame(out, schema={"definition": pl.String, "kind": pl.String, "n_cases": pl.Int64,
                                     "crossing_rate": pl.Float64})


def crossing_parts(crossings: pl.DataFrame) -> list[str]:
    """Per definition: the rates at which pooled EM crosses the target (or 'never')."""
    parts = []
    for (definition,), group in crossings.group_by("definition", maintain_order=True):
        rates = group["crossing_rate"].drop_nulls()
        never = group.height - rates.len()
        text = f"{definition} at rate {rates.min():.2f}-{rates.max():.2f}" if rates.len() else f"{definition} never"
        parts.append(text + (f" ({never} kinds never)" if never and rates.len() else ""))
    return parts


def _crossing_text(crossings: pl.DataFrame, em_pct: float) -> str:
    parts = crossing_parts(crossings)
    return ("the paper's noise rate and definition are not stated (underdetermined)"
            + (f"; EM over the paper's corpora crosses {em_pct:.2f}% for " + ", ".join(parts) if parts else ""))


def is_underdetermined(spec: dict, crossings: pl.DataFrame) -> bool:
    """The claim's `underdetermined` rule (paper_claims.json): the paper does not state what its figure
    depends on (`paper_states_rate` false), and some measured definition's EM reaches the paper's figure
    within the rate grid, so the figure lies inside the family this suite measures."""
    return (not spec.get("paper_states_rate", True) and crossings.height > 0
            and crossings["crossing_rate"].drop_nulls().len() > 0)


PERTURB_METHOD = ("line-level oracle programs, every copy span perturbed, mean over seeds, case-weighted pool of "
                  "HEvalFix-Py, HEvalFix-JS (body) and ProbeEdit-S [perturb]")


def _perturb_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    pooled = paper_pool_em(metric_input(spec, 0, tables, metrics_dir)).filter(pl.col("rate") == 1.0)
    if pooled.height == 0 or pooled["corpora"].min() == 0:
        raise MissingOutputError("perturbation.csv has no line-level rows at rate 1 for the paper's corpora")
    tol = spec["tolerance_pp"]
    off = [r for r in pooled.iter_rows(named=True) if not judge(spec, r["em"], spec["em_pct"] / 100)]
    crossings = paper_pool_crossings(tables, spec["em_pct"] / 100)
    cases = int(pooled["n_cases"].max())
    ours = (f"over the paper's three corpora ({fmt_int(cases)} cases): "
            + "; ".join(f"{r['kind']} {fmt_pct(r['em'], 2)}" for r in pooled.iter_rows(named=True)))
    reason = f"within {tol:g} pp for every kind"
    by_construction = bool(off) and all(abs(r["em"] - r["no_copy"]) < 0.005 for r in off)
    if off and is_underdetermined(spec, crossings):
        family = ", ".join(crossing_parts(crossings))
        return Claim(
            claim=f"6. {spec['title']}", paper=spec["text"],
            ours=f"at rate 1, {ours}; the measured family containing {spec['em_pct']:.2f}%: EM over the paper's "
                 f"corpora crosses it for {family}",
            verdict=UNDERDETERMINED,
            reason=("the paper states neither the noise rate nor the perturbation definition"
                    + (f"; at rate 1 strict EM equals the share of programs with no copy span "
                       f"({fmt_pct(off[0]['no_copy'], 2)}) by construction, whatever the mechanism" if by_construction
                       else f"; at rate 1 {len(off)} of {pooled.height} kinds are more than {tol:g} pp from it")
                    + f"; {spec['em_pct']:.2f}% lies inside the measured family ({family})"),
            method=PERTURB_METHOD)
    if off:
        reason = f"{len(off)} of {pooled.height} kinds more than {tol:g} pp from {spec['em_pct']:.2f}%"
        if by_construction:
            reason += (f": our EM equals the share of programs with no copy span ({fmt_pct(off[0]['no_copy'], 2)}), "
                       "which no perturbation touches")
    reason += "; " + _crossing_text(crossings, spec["em_pct"])
    return Claim(claim=f"6. {spec['title']}", paper=spec["text"], ours=ours,
                 verdict=DIFFERS if off else REPRODUCED, reason=reason, method=PERTURB_METHOD)


# ---------------------------------------------------------------- 7. fine-tuning pilot


def _ems(node) -> list[float]:
    """Every EM in a pilot metrics node: {'em': x}, or {seed: {'em': x}, ...}; [] when absent."""
    if not isinstance(node, dict):
        return []
    if isinstance(node.get("em"), (int, float)):
        return [float(node["em"])]
    return [float(v["em"]) for v in node.values() if isinstance(v, dict) and isinstance(v.get("em"), (int, float))]


def _first(m: dict, *paths: tuple[str, ...]):
    for path in paths:
        node = m
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


@dataclass(frozen=True)
class PilotEM:
    """The pilot's exact-match figures as recorded (lists over seeds; empty when not recorded)."""

    heldout_before: list[float]
    heldout_after: list[float]
    humaneval_before: list[float]
    humaneval_after: list[float]


def pilot_em(m: dict) -> PilotEM:
    """Read defensively: older pilot.json files lack the per-seed 'before' and the HEvalFix-Py 'before'."""
    return PilotEM(
        heldout_before=_ems(_first(m, ("heldout", "before"), ("before_per_seed",), ("before",))),
        heldout_after=_ems(_first(m, ("heldout", "after"), ("after_program",))),
        humaneval_before=_ems(_first(m, ("humaneval", "before"), ("humaneval_before",))),
        humaneval_after=_ems(_first(m, ("humaneval", "after"), ("humaneval_after",), ("humaneval",))))


def _em_text(values: list[float]) -> str:
    if not values:
        return "not recorded"
    return fmt_pct(values[0]) if min(values) == max(values) else f"{fmt_range(min(values), max(values), fmt_pct)}"


def _pilot_runs(m: dict) -> list[tuple[str, dict]]:
    """The default pilot run and every frozen preset run kept in its metrics (label, metrics)."""
    runs = [("default", m)]
    for name, frozen in sorted((m.get("frozen") or {}).items()):
        if isinstance(frozen, dict) and isinstance(frozen.get("metrics"), dict):
            commit = (frozen.get("run") or {}).get("commit", "?")
            runs.append((f"{name}, frozen run of {commit}", frozen["metrics"]))
    return runs


def _counted_change(m: dict, split: str) -> str | None:
    """Each decoded seed's 'k / n -> k / n (after x%, 95% CI [..]; McNemar exact p = .., not significant)'
    (analysis.pilot.report), when the run recorded its counts; None otherwise (older metrics)."""
    from analysis.pilot.report import em_change_text

    after = m.get(f"{split}_em_after")
    if not isinstance(after, dict) or not m.get(f"{split}_cases") or m.get(f"{split}_em_before") is None:
        return None
    parts = [(seed, em_change_text(m, split, seed)) for seed, k in sorted(after.items()) if k is not None]
    if not parts:
        return None
    return "; ".join(text if len(parts) == 1 else f"seed {seed} {text}" for seed, text in parts)


def _run_text(label: str, m: dict) -> str:
    em = pilot_em(m)
    seeds = len(em.heldout_after)
    he_counted, held_counted = _counted_change(m, "humaneval"), _counted_change(m, "heldout")
    he = (f"HEvalFix-Py EM {he_counted}; " if he_counted else
          f"HEvalFix-Py EM {_em_text(em.humaneval_before)} -> {_em_text(em.humaneval_after)}; "
          if em.humaneval_before or em.humaneval_after else "")
    held = (held_counted if held_counted else f"{_em_text(em.heldout_before)} -> {_em_text(em.heldout_after)}"
            + (f" ({seeds} seeds)" if seeds > 1 else ""))
    from analysis.pilot.data import run_task
    from analysis.pilot.report import HELDOUT_NAME

    return f"{label} ({m.get('steps', MISSING)} steps): {he}{HELDOUT_NAME[run_task(m)]} EM {held}"


def pilot_scale(m: dict, label: str) -> str:
    """'<model>, <steps> steps (<label>), task <task> on <n> training sequences': what a pilot run trained,
    read from its metrics (the task of a run written before pilot.task is pilotdata.LEGACY_TASK)."""
    from analysis.pilot.data import run_task

    kept = (m.get("train_sequences") or {}).get("program") if isinstance(m.get("train_sequences"), dict) else None
    size = kept.get("kept") if isinstance(kept, dict) else None
    n_train = (m.get("data") or {}).get("n_train") if isinstance(m.get("data"), dict) else None
    data = (f"{size} training sequences" if isinstance(size, int) else
            f"{n_train} training cases" if isinstance(n_train, int) else "training data size not recorded")
    return (f"{m.get('model', 'unknown model')}, {m.get('steps', MISSING)} steps ({label}), "
            f"task {run_task(m)} on {data}")


def _finetune_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    """Claim 7 from the pilot's metrics: the default run and the frozen preset runs it carries, each
    labelled. The verdict's HEvalFix-Py lift is that of the longest run that decoded HEvalFix-Py before and
    after ("not reproduced at this scale" unless it meets the paper's lift)."""
    from analysis.pilot.data import run_task

    m = metric_input(spec, 0, tables, metrics_dir)
    runs = _pilot_runs(m)
    ours = "; ".join(_run_text(label, r) for label, r in runs)
    measured_runs = [(label, r) for label, r in runs
                     if pilot_em(r).humaneval_before and pilot_em(r).humaneval_after]
    label, judged = (max(measured_runs, key=lambda lr: (run_task(lr[1]) == "bugfix", lr[1].get("steps") or 0))
                     if measured_runs else ("default", m))
    em = pilot_em(judged)
    missing = [what for what, values in (("HEvalFix-Py EM before fine-tuning", em.humaneval_before),
                                         ("HEvalFix-Py EM after fine-tuning", em.humaneval_after)) if not values]
    paper_lift = spec["em_after_low"] - spec["em_before"]
    lift = (sum(em.humaneval_after) / len(em.humaneval_after) - sum(em.humaneval_before) / len(em.humaneval_before)
            if not missing else None)
    scale = f"{pilot_scale(judged, label)}, against the paper's {spec.get('model', 'model')}"
    method = "; ".join(f"{lbl}: {r.get('method', MISSING)}" for lbl, r in runs) + " [pilot]"
    if lift is not None and judge(spec, lift, paper_lift):
        return Claim(claim=f"7. {spec['title']}", paper=spec["text"], ours=ours, verdict=REPRODUCED,
                     reason=f"HEvalFix-Py lift {fmt_pct(lift)} reaches the paper's {fmt_pct(paper_lift)} ({scale})",
                     method=method)
    measured = (f"measured HEvalFix-Py lift {fmt_pct(lift)} against the paper's {fmt_pct(paper_lift)}" if lift is not None
                else "no HEvalFix-Py lift can be measured: " + " and ".join(missing) + " not recorded")
    return Claim(claim=f"7. {spec['title']}", paper=spec["text"], ours=ours, verdict=NOT_AT_SCALE,
                 reason=f"{measured}; {scale}; held-out EM "
                        + (_counted_change(judged, "heldout")
                           or f"{_em_text(em.heldout_before)} -> {_em_text(em.heldout_after)}"),
                 method=method)


# ---------------------------------------------------------------- extension: measured end to end


def e2e_noise(metrics_dir: Path) -> str:
    """'; default run marked NOISY: reasons' when the e2e stage's own environment record says so, else ''."""
    import json

    from analysis.results.e2e import noise_note

    path = Path(metrics_dir) / "e2e.json"
    note = noise_note(json.loads(path.read_text())) if path.is_file() else ""
    return note.replace("; marked", "; default run marked", 1)


def _e2e_claim(spec: dict, tables: Path, metrics_dir: Path, frozen: Path | None = None) -> Claim:
    """Pooled over every measured case (ratio of summed times, with the case count; analysis.results.e2e),
    never the best case; the frozen e2e-wide run beside it when committed (`frozen`: default
    reports/e2e/frozen beside `tables`), else "not yet run"."""
    from analysis.results.e2e import pooled_headline
    from analysis.layout import E2E_FROZEN, REPORTS

    e2e = metric_input(spec, 0, tables, metrics_dir)
    if e2e.filter(pl.col("method") != "ar").height == 0:
        raise MissingOutputError("e2e_pooled.csv has no method other than AR")
    ours = pooled_headline(e2e, Path(tables).parent / E2E_FROZEN.relative_to(REPORTS) if frozen is None else frozen)
    return Claim(
        claim=spec["title"], paper=spec["text"], ours=ours + e2e_noise(metrics_dir) + "; see the e2e report", verdict=BEYOND,
        reason="the paper gives no measured end-to-end figure; each figure is the ratio of summed times over the "
               "cases named, with a case-bootstrap CI (per corpus in the e2e report), never a best case; Copy-as-Decode "
               "leads with its directive tokens decoded, the ideal variant is its upper bound",
        method="decode phase of teacher-forced oracle programs and gold-acceptance drafters on a real KV cache, from a "
               "cached prompt (its prefill reported beside), seeded sample stratified by output length [e2e]")


# ---------------------------------------------------------------- extension: the cost-optimal oracle


def optimal_rows(tables: Path = TABLES) -> pl.DataFrame:
    """optimal.csv over the paper's three corpora (per corpus, body framing and the single-framing ones)."""
    return paper_view(table("optimal", tables)).filter(pl.col("pooling") == PER_CORPUS)


def _optimal_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    metric_input(spec, 0, tables, metrics_dir)
    rows = optimal_rows(tables)
    if rows.height == 0:
        raise MissingOutputError("optimal.csv has no rows for the paper's corpora")
    parts = []
    for (source, baseline, level), group in rows.sort("kernel_source", "level").group_by(
            "kernel_source", "baseline", "level", maintain_order=True):
        context = group["context"].drop_nulls().unique().to_list() if "context" in group.columns else []
        kernel = "paper kernel" if source == PAPER_SOURCE else f"{source} kernel ({baseline} AR)"
        parts.append(f"{kernel}, {level} level{f', c={context[0]}' if len(context) == 1 else ''}: "
                     f"{fmt_range(group['covmax_bound'].min(), group['covmax_bound'].max(), fmt_x)} coverage-max -> "
                     f"{fmt_range(group['optimal_bound'].min(), group['optimal_bound'].max(), fmt_x)} cost-optimal")
    token = rows.filter((pl.col("kernel_source") == PAPER_SOURCE) & (pl.col("level") == "token"))
    beside = spec.get("beside_claim") or {}
    floors = (beside["floor_low"], beside["floor_high"]) if "floor_low" in beside else None
    reason = "the paper does not state an optimal oracle; bounds with directive tokens decoded, per corpus"
    if token.height and floors:
        inside = token.filter(pl.col("optimal_bound").is_between(floors[0], floors[1]))
        reason += (f"; with the paper kernel, {inside.height} of {token.height} corpora's token-level cost-optimal "
                   f"floors lie in the paper's {fmt_range(*floors, fmt_x)}")
    return Claim(claim=spec["title"], paper=spec["text"], ours="; ".join(parts), verdict=BEYOND, reason=reason,
                 method="dynamic-programming oracle minimising the modelled cost, fixed context [optimal]")


RULES: dict[str, Callable[[dict, Path, Path], Claim]] = {
    "kernel_speedup": _kernel_claim, "copy_ceiling": _ceiling_claim, "bounds": _bounds_claim,
    "token_level": _token_claim, "losslessness": _lossless_claim, "perturbation": _perturb_claim,
    "finetune": _finetune_claim, "optimal": _optimal_claim, "end_to_end": _e2e_claim,
}


def claims(tables: Path = TABLES, metrics_dir: Path = METRICS, paper_path: Path = PAPER) -> list[Claim]:
    """Each claim of paper_claims.json (in its order, extensions last) with ours and a verdict. A claim
    whose stage output is absent is 'not run', never silently dropped."""
    paper = paper_claims(paper_path)
    keys = [k for k in paper if not k.startswith("_")]
    unknown = [k for k in keys if k not in RULES]
    if unknown:
        raise ParamsError(f"{paper_path}: no rule for claim(s) {', '.join(unknown)}; known: {', '.join(RULES)}")
    keys.sort(key=lambda k: bool(paper[k].get("extension")))
    corpora = run_corpora(Path(tables))
    out = []
    for key in keys:
        spec = paper[key]
        if spec.get("beside") in paper:  # an extension set beside a claim reads that claim's figures
            spec = {**spec, "beside_claim": paper[spec["beside"]]}
        label = f"{spec['id']}. {spec['title']}" if spec.get("id") else spec.get("title", key)
        if needs_paper_corpora(spec) and corpora is not None and not corpora & set(PAPER_CORPORA):
            out.append(Claim(claim=label, paper=spec.get("text", MISSING), ours=MISSING, verdict=NOT_APPLICABLE,
                             reason=f"this run holds none of the paper's corpora ({', '.join(PAPER_CORPORA)}); "
                                    f"its corpora: {', '.join(sorted(corpora))}", method=MISSING))
            continue
        try:
            for mp in metric_paths(spec):  # every output the claim is measured on, present before its rule runs
                read_metric(mp, Path(tables), Path(metrics_dir))
            out.append(RULES[key](spec, Path(tables), Path(metrics_dir)))
        except MissingOutputError as missing:
            out.append(Claim(claim=label, paper=spec.get("text", MISSING), ours=MISSING, verdict=NOT_RUN,
                             reason=str(missing), method=MISSING))
    return out


def needs_paper_corpora(spec: dict) -> bool:
    """A claim judged over the paper's corpora, or one whose figure counts their programs (claim 5's
    482/482, `needs_paper_corpora` in paper_claims.json): not applicable to a run without them (N19)."""
    return spec.get("pool") == PAPER_POOL or bool(spec.get("needs_paper_corpora"))


def run_corpora(tables: Path) -> set[str] | None:
    """The corpora of this run (from the coverage table), or None when the table is absent."""
    try:
        return set(table("coverage", tables)["corpus"].to_list()) - {POOLED}
    except ParamsError:
        return None


def claims_frame(items: list[Claim] | None = None) -> pl.DataFrame:
    """The verdict table: claim, paper, ours, verdict, reason, method (one row per claim)."""
    items = claims() if items is None else items
    names = [f.name for f in fields(Claim)]
    return pl.DataFrame([{n: getattr(c, n) for n in names} for c in items], schema={n: pl.String for n in names})


def counts(items: list[Claim]) -> dict[str, int]:
    """How many claims got each verdict (extensions, `beyond the paper`, not counted)."""
    return {v: sum(c.verdict == v for c in items) for v in VERDICTS if v != BEYOND}


def rules_frame(path: Path = PAPER) -> pl.DataFrame:
    """Each claim's verdict rule, comparator, pool and thresholds, as stated in paper_claims.json."""
    rows = []
    for key, claim in paper_claims(path).items():
        if key.startswith("_"):
            continue
        limits = {k: v for k, v in claim.items() if k in ("tolerance_pp", "rel_tolerance", "max_failures")}
        rows.append({"claim": key.replace("_", " "), "rule": claim.get("rule", MISSING),
                     "pool": claim.get("pool", MISSING),
                     "thresholds": ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in limits.items()) or MISSING})
    return pl.DataFrame(rows)
