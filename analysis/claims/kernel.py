"""Claim 1: the kernel speedup T_ar(N)/T_prefill(N), 6.8x-303x over N in [8, 512].

The paper states one range over both its models (Qwen2.5-1.5B/7B) on an A100. It is judged per measured
family: one raw source and one comparison (how the two sides are built: eager/eager, device/device,
graph/graph), its range the minimum and maximum over every model of the family, as the paper states it.
A family measured on another device than the paper's (an H200, this machine's CPU) is `not comparable`:
the reason gives the two devices' datasheet ratios and what the family's range would read, and the
range is shown. graph/eager (a CUDA-graph decode loop against an eager prefill) is never judged.

A range end whose cell had a repeat that slowed part-way (kernel_speedup.csv `ar_shift`) carries that
flag, with the median over the repeats that did not slow beside it (`speedup_unshifted`) when the table
has it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import (
    DIFFERS,
    NOT_COMPARABLE,
    REPRODUCED,
    STALE,
    Claim,
    Scope,
    claim_verdict,
    datasheet,
    judge,
    metric_input,
    paper_gpu,
    tally,
)
from analysis.errors import MissingOutputError
from analysis.latency.model import paper_points
from analysis.results.numbers import MISSING, fmt_num, fmt_range, fmt_x

KERNEL_CONTRACT = ("comparison", "judged", "ar_shift")  # kernel_speedup.csv columns claim 1 is judged on (and `source`)
KERNEL_METHOD = ("T_ar(N)/T_prefill(N), median of paired repeats, random weights; one range per measured family (raw "
                 "source x comparison) over every model, as the paper states it; judged only where both sides are built "
                 "alike (eager/eager, device/device, graph/graph) on the paper's device (device ratios from the datasheets in "
                 "analysis/data/devices.json); graph/eager shown, never judged [kernels fit]")
SHIFT_FLAG = "a repeat of this cell slowed part-way"
HOST_BOUND = ("both sides host-bound: an eager prefill costs about one eager decode step, so the ratio is about N "
              "and restates the grid more than the kernels")


@dataclass(frozen=True)
class End:
    """One end of a family's range: the value and the cell it comes from."""

    speedup: float
    model: str
    context: int
    n: int
    shifted: bool
    unshifted: float | None
    spread: tuple[float, float]   # the cell's interquartile range over timing repeats (the value where not recorded)

    def text(self) -> str:
        if not self.shifted:
            return fmt_x(self.speedup)
        beside = f"; {fmt_x(self.unshifted)} without it" if self.unshifted is not None else ""
        return f"{fmt_x(self.speedup)} ({SHIFT_FLAG}{beside})"


@dataclass(frozen=True)
class Family:
    """One raw source and comparison: every model it measured, its union range over N in the paper's grid."""

    source: str
    comparison: str
    judged: bool
    models: tuple[str, ...]
    setup: str
    device_name: str
    cpu: bool
    low: End
    high: End
    per_model: tuple[tuple[str, float, float], ...]

    @property
    def name(self) -> str:
        return f"{self.source} {self.comparison}"


SPREAD = "interquartile range over timing repeats, from the low end's lower quartile to the high end's upper quartile"


def _end(row: dict) -> End:
    unshifted = row.get("speedup_unshifted")
    value = float(row["speedup"])
    spread = tuple(float(row[k]) if row.get(k) is not None else value for k in ("speedup_q25", "speedup_q75"))
    return End(value, row["model"], int(row["context"]), int(row["n"]), bool(row["ar_shift"]),
               None if unshifted is None else float(unshifted), spread)


def device_names(doc: dict | None) -> dict[str, str]:
    """kernel_source -> the device name kernels.json recorded for it ('' when not recorded)."""
    sources = (doc or {}).get("kernel_sources") or {}
    return {name: str(entry.get("device_name") or "") for name, entry in sources.items() if isinstance(entry, dict)}


def families(kern: pl.DataFrame, n_min: int, n_max: int, names: dict[str, str]) -> list[Family]:
    """Per raw source and comparison (rows with N in [n_min, n_max]): the union range over its models."""
    missing = [c for c in (*KERNEL_CONTRACT, "source") if c not in kern.columns]
    if missing:
        raise MissingOutputError(f"kernel_speedup.csv has no {', '.join(missing)} column(s): stale output, rerun "
                                 "`copydecode kernels fit` (claim 1 is judged only on comparisons built alike)")
    grid = kern.filter(pl.col("n").is_between(n_min, n_max))
    out = []
    for (source, comparison, judged), rows in grid.group_by("source", "comparison", "judged", maintain_order=True):
        ordered = rows.sort("speedup")
        models = tuple(rows["model"].unique(maintain_order=True).to_list())
        setup = ", ".join(sorted({f"{r['model']} {r['dtype']} {r['device']}" for r in rows.iter_rows(named=True)}))
        devices = sorted({names.get(k, "") for k in rows["kernel_source"].unique().to_list()} - {""})
        cpu = set(rows["device"].to_list()) == {"cpu"}
        per_model = tuple((m, float(g["speedup"].min()), float(g["speedup"].max()))
                          for (m,), g in rows.group_by("model", maintain_order=True))
        out.append(Family(source, comparison, bool(judged), models, setup,
                          ", ".join(devices) or ("this machine's CPU" if cpu else "device not recorded"), cpu,
                          _end(ordered.row(0, named=True)), _end(ordered.row(-1, named=True)), per_model))
    return out


def device_ratio(device_name: str, paper: dict) -> str:
    """'NVIDIA H200 is not the paper's A100 80GB SXM (3.2x its bf16 FLOP/s, 2.4x its bandwidth, datasheets)'."""
    sheet = datasheet(device_name)
    if sheet is None:
        return f"{device_name} is not the paper's {paper['device']}"
    return (f"{device_name} is not the paper's {paper['device']} ({fmt_num(sheet['bf16_tflops'] / paper['bf16_tflops'], 2)}x "
            f"its bf16 FLOP/s, {fmt_num(sheet['hbm_gbps'] / paper['hbm_gbps'], 2)}x its bandwidth)")


def _would(family: Family, spec: dict, ends: tuple[float, float]) -> str:
    tol = spec["rel_tolerance"]
    if judge(spec, (family.low.speedup, family.high.speedup), ends):
        return f"both ends within a factor {1 + tol:g} of the paper's (consistent)"
    off = [f"{what} end {end.text()} vs {fmt_x(paper)}" for what, end, paper in
           (("low", family.low, ends[0]), ("high", family.high, ends[1]))
           if not judge(spec, end.speedup, paper)]
    return "; ".join(off)


def family_scope(family: Family, spec: dict, paper: dict, ends: tuple[float, float]) -> Scope:
    """A family's scope: judged on the paper's device and a comparison built alike, else not comparable."""
    models = ", ".join(f"{m} {fmt_range(lo, hi, fmt_x)}" for m, lo, hi in family.per_model)
    ours = f"{family.low.text()}-{family.high.text()} ({models if len(family.per_model) > 1 else family.setup})"
    same_device = (datasheet(family.device_name) or {}).get("match") == paper["match"]
    would = _would(family, spec, ends)
    if not family.judged:
        note = (spec.get("comparison_notes") or {}).get(family.comparison, "sides not built alike")
        verdict, reason = NOT_COMPARABLE, f"{family.comparison}: {note}; shown, never judged"
    elif not same_device:
        verdict = NOT_COMPARABLE
        reason = (f"{device_ratio(family.device_name, paper)}; read against the paper's range: {would}"
                  + (f"; {HOST_BOUND}" if family.comparison == "eager/eager" and not family.cpu else ""))
    else:
        passed = judge(spec, (family.low.speedup, family.high.speedup), ends)
        verdict, reason = (REPRODUCED if passed else DIFFERS), would
    return Scope(scope=family.name, paper=fmt_range(*ends, fmt_x), ours=ours, verdict=verdict, reason=reason,
                 value=(family.low.speedup, family.high.speedup), paper_value=ends,
                 ci=(min(family.low.spread), max(family.high.spread)), ci_kind=SPREAD)


def ceiling_sentence(doc: dict | None, paper: dict) -> str:
    """The paper's top ratio against its GPU's roofline ceiling (kernels.json `paper_gpu_ceiling`, computed
    by `kernels fit` from the datasheet and the models' configs), or that it is not recorded."""
    block = (doc or {}).get("paper_gpu_ceiling") or {}
    values = [c["ceiling"] for c in block.get("ceilings", []) if isinstance(c, dict)]
    if not values:
        return "the paper GPU's roofline ceiling is not recorded (rerun `copydecode kernels fit`)"
    relation = "above" if paper["paper_top"] > max(values) else "within"
    return (f"the paper's {fmt_x(paper['paper_top'])} at N={paper['paper_top_n']} is {relation} the {paper['device']} "
            f"roofline ceiling of {fmt_range(min(values), max(values), fmt_x)} for these models (N={block.get('n')}, "
            f"contexts {', '.join(str(c) for c in sorted({c['context'] for c in block['ceilings']}))}; computed by "
            "`kernels fit`), which floor-bound kernels cannot exceed")


@register("kernel_speedup")
def kernel_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    (_, paper_lo), (_, paper_hi) = paper_points(spec)
    kern = metric_input(spec, 0, tables, metrics_dir)
    doc = metric_input(spec, 1, tables, metrics_dir)
    title = f"1. {spec['title']}, N in [{spec['n_min']}, {spec['n_max']}]"
    try:
        found = families(kern, spec["n_min"], spec["n_max"], device_names(doc))
    except MissingOutputError as stale:  # a table from before the comparison columns: shown, not judged
        return Claim(claim=title, paper=spec["text"], ours=MISSING, verdict=STALE, reason=str(stale),
                     method=KERNEL_METHOD)
    if not found:
        raise MissingOutputError(f"kernel_speedup.csv has no rows for N in [{spec['n_min']}, {spec['n_max']}]")
    paper = paper_gpu()
    scopes = tuple(family_scope(f, spec, paper, (paper_lo, paper_hi)) for f in found)
    verdict = claim_verdict(scopes)
    reasons = [f"{s.scope}: {s.reason}" for s in scopes if s.verdict != REPRODUCED or verdict == REPRODUCED]
    reason = f"{tally(scopes)}. " + "; ".join(reasons) + f". Beside it: {ceiling_sentence(doc, paper)}"
    return Claim(claim=title, paper=spec["text"], ours="; ".join(f"{s.scope} {s.ours}" for s in scopes),
                 verdict=verdict, reason=reason, method=KERNEL_METHOD, scopes=scopes)

