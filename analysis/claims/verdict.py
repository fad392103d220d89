"""What a verdict is: the Claim and Scope records, the verdict values, the comparators a claim names in
paper_claims.json, the metric paths it is measured on, and the tally.

A claim is judged per scope (a corpus, a pool, a kernel family: whatever the paper states a figure for). A scope's
verdict is `reproduced` or `differs` when it is judged, `not comparable` when what this suite measured is not built
like the paper's figure (another device, a stand-in corpus); only judged scopes decide a claim (`claim_verdict`).

Verdict values: `reproduced` (every judged test passes: agreement with the withdrawn preprint's figure), `differs`
(a judged test fails; the reason names it), `not comparable` (nothing could be judged like with like; the reason
says why and shows the measured family), `underdetermined` (the paper leaves out what its figure depends on and the
figure lies inside the family this suite measures), `not reproduced at this scale` (a scaled-down replica whose
effect falls short), `stale output` (an output predates the columns a claim is judged on), `not run` (an output is
absent; never dropped), `not applicable to this run` (no paper corpus) and `beyond the paper` (an extension row,
whose decision scopes carry analysis.claims.decision's words)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import polars as pl

from analysis.errors import MissingOutputError, ParamsError
from analysis.latency.model import PAPER_CLAIMS, paper_points
from analysis.latency.roofline import DEVICES, datasheet_entry, read_devices
from analysis.results.outputs import BOUNDS_COLUMNS

PAPER = PAPER_CLAIMS

REPRODUCED, DIFFERS, NOT_COMPARABLE, NOT_RUN = "reproduced", "differs", "not comparable", "not run"
NOT_AT_SCALE, BEYOND = "not reproduced at this scale", "beyond the paper"
NOT_APPLICABLE = "not applicable to this run"
UNDERDETERMINED = "underdetermined"
STALE = "stale output"
VERDICTS = (REPRODUCED, DIFFERS, NOT_COMPARABLE, UNDERDETERMINED, NOT_AT_SCALE, NOT_RUN, STALE, NOT_APPLICABLE, BEYOND)
JUDGED = (REPRODUCED, DIFFERS)  # the verdicts of a scope judged like with like


@dataclass(frozen=True)
class Scope:
    """One part of a claim the paper states a figure for: what we measured for it and its verdict."""

    scope: str                                # "HEvalFix-Py", "pooled over the paper's three corpora", "h200 device/device"
    paper: str                                # the paper's figure as text (MISSING when it states none)
    ours: str                                 # our figure as text, with its CI
    verdict: str
    reason: str
    value: float | tuple[float, ...] | None = None   # ours, machine-readable
    paper_value: float | tuple[float, ...] | None = None
    ci: tuple[float, float] | None = None
    cases: int | None = None
    decision: str | None = None      # a decision scope's (analysis.claims.decision): its word, basis and facets
    basis: str | None = None
    detail: dict | None = None
    ci_kind: str | None = None       # what `ci` is: a bootstrap interval, an exact binomial one, a range of points

    @property
    def judged(self) -> bool:
        return self.verdict in JUDGED


@dataclass(frozen=True)
class Claim:
    claim: str
    paper: str
    ours: str
    verdict: str
    reason: str
    method: str
    scopes: tuple[Scope, ...] = ()
    key: str = ""                 # its entry in paper_claims.json (set by the engine)
    rule: str = ""                # the rule text stated there
    inputs: tuple[str, ...] = ()  # the stage outputs it read
    section: str = ""             # the report page and section that explains it: `page#anchor`


TEXT_FIELDS = ("claim", "paper", "ours", "verdict", "reason", "method")  # the verdict table's columns


def claim_verdict(scopes: list[Scope] | tuple[Scope, ...]) -> str:
    """The claim's verdict from its scopes: `differs` when a judged scope differs, `reproduced` when
    judged scopes exist and all pass, else `not comparable` (no scope could be judged like with like)."""
    judged = [s for s in scopes if s.judged]
    if any(s.verdict == DIFFERS for s in judged):
        return DIFFERS
    return REPRODUCED if judged else NOT_COMPARABLE


def tally(scopes: list[Scope] | tuple[Scope, ...]) -> str:
    """'2 of 2 judged scopes reproduced; 2 not comparable (ProbeEdit-S*, pooled ...)': counts judged scopes only."""
    judged = [s for s in scopes if s.judged]
    passed = sum(s.verdict == REPRODUCED for s in judged)
    other = [s.scope for s in scopes if s.verdict == NOT_COMPARABLE]
    text = f"{passed} of {len(judged)} judged reproduced" if judged else "nothing judged"
    return text + (f"; not comparable: {', '.join(other)}" if other else "")


def counts(items: list[Claim]) -> dict[str, int]:
    """How many claims got each verdict (extensions, `beyond the paper`, not counted)."""
    return {v: sum(c.verdict == v for c in items) for v in VERDICTS if v != BEYOND}


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


def paper_gpu(path: Path = PAPER, devices: Path = DEVICES) -> dict:
    """The paper's GPU: its label from paper_claims.json `_gpu_reference`, its datasheet figures
    (hbm_gbps, bf16_tflops, source, match) from devices.json, and the paper's top kernel ratio and its N."""
    paper = paper_claims(path)
    ref = paper["_gpu_reference"]
    sheets = read_devices(devices)
    entry = sheets.get(ref.get("datasheet_entry"))
    if not isinstance(entry, dict):
        raise ParamsError(f"{path}: _gpu_reference.datasheet_entry {ref.get('datasheet_entry')!r} is not an entry of "
                          f"{devices}; known: {', '.join(k for k in sheets if not k.startswith('_'))}")
    (_, _), (top_n, top) = paper_points(paper["kernel_speedup"])
    return {"device": ref["device"], "hbm_gbps": entry["hbm_gbps"], "bf16_tflops": entry["bf16_tflops"],
            "source": entry["source"], "match": entry["match"], "paper_top": top, "paper_top_n": top_n}


def datasheet(device_name: str, devices: Path = DEVICES) -> dict | None:
    """The devices.json entry whose `match` is in a recorded device name, or None (analysis.latency.roofline reads it)."""
    return datasheet_entry(device_name, read_devices(devices))


# ---------------------------------------------------------------- comparators (named in the JSON)
# Each is a function (ours, paper, spec, **options) -> bool, its tolerance read from the claim's spec.


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

    @property
    def file(self) -> str:
        return f"{self.root}/{self.name}.{self.kind}"


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


def read_metric(mp: MetricPath, tables: Path, metrics_dir: Path):
    """The table (checked to hold the column) or the JSON document (checked to hold the key) a metric
    path names; an absent file, column or key is a MissingOutputError naming the path."""
    path = (Path(tables) if mp.root == "tables" else Path(metrics_dir)) / f"{mp.name}.{mp.kind}"
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
