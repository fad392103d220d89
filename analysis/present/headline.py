"""Headline metrics for `dvc metrics show`: a few dozen scalars in a handful of small files.

`dvc metrics show` prints one row per metrics file and one column per key (the union over files),
so the files here share their keys: each file is one measure (a row) and its keys are the corpora
(short stable names, `CORPUS_KEYS`) plus `pooled`; the kernel ratio rows use `n008`/`n512` instead
(zero-padded: numeric order). The table stays a grid of numbers (no column of dashes per file) and its
width grows with the number of corpora, not with the number of kernel sources, models or experiments (those
are rows).

Rows (file stem under HEADLINE_DIR, `metrics/` at the repository root so that each row's path is short
and `dvc metrics show` fits 120 columns on the paper's corpora, 8 more per further corpus -> what it holds). Each name ends in its unit: `_x` a ratio
(a speedup or a bound), `_pct` a share in percent (x100, as the reports print it), `_n` a count; numbers in
names and columns are zero-padded to the widest of the run (`c0256` beside `c2048`, `n008` beside `n512`), so
that DVC's text sort is numeric order:
  cov_line_pct / cov_token_pct           copy coverage of gold tokens (headline framing), per corpus; pooled =
                                         the paper's three corpora (summed copied / summed gold tokens);
                                         cov_<level>_all_pct: the pool of every corpus of the run
  bound_<source>_ideal_x / _dir_x        closed-form bound, line level, ideal / with directive
                                         tokens (variant `overhead`), per corpus; pooled = the paper's three
                                         corpora, ratio of sums (the pool of every corpus: bounds.csv, pool=all)
  kernel_<source>_c<context>_x           copy-by-prefill vs N decode steps at N in `kernel_ns`
  em_line_pct / em_token_pct             exact match at perturbation rate `perturb_rate` (strict, `both`);
                                         pooled = the paper's three corpora (482 cases); em_<level>_all_pct: every
                                         corpus
  e2e_<model>_linedec_x / _tokdec_x / _line_x / _token_x / _pld_x / _suffix_x, e2e_<model>_cases_n
                                         measured end-to-end speedup vs AR (e2e_pooled.csv), ratio of summed
                                         times per corpus, over the HEvalFix cases (`he`) and every case
                                         (never a best case): directives decoded, the ideal upper bounds, PLD
                                         (standard policy, best k), suffix decoding; and the case counts (the
                                         first of the model's rows, apart from the ratios)
  e2ew_<model>_...                       the same rows from the frozen `e2e-wide` preset run, when committed
  rivals_best_ratio_x / _all_x           at batch 1 under the judged kernel source (params rivals.judged_source):
                                         Copy-as-Decode's best deployable variant over the best rival (rival time
                                         over Copy-as-Decode time; below 1 the rival is faster), per corpus; pooled =
                                         the paper's three corpora; _all: every corpus (reports/claims.json's decision)
  sv_<source>_c<C>[r]_x                  batched serving (the serving stage's claims table, its smallest token budget,
                                         its first Copy-as-Decode method): output tokens/s over AR (r: over the best
                                         rival at that load), closed loop at concurrency C, in the `pooled` column
  pilot_before_pct / pilot_after_pct     pilot exact match (program mode; after = mean over seeds), per corpus split;
  pilot_held_before_pct / _after_pct     the same on the pilot's held-out split, in the `pooled` column
  roundtrip_fail_n                       oracle programs that do not resolve to their target (pooled)
  noisy_kernel / noisy_e2e               1 when this run's kernel profile / e2e run was marked NOISY, else 0
                                         (reports/metrics/kernels.json, e2e.json), in the `pooled` column;
  noisy_e2ew                             the same for the frozen `e2e-wide` run whose e2ew_ rows are shown
  machine / machine_cores_n              the CPU line this run measured on (`cpu_family`: EPYC, Xeon, ...; a
                                         string) and its logical cores, in the `pooled` column, so that
                                         `dvc exp show` and `dvc metrics diff` say why timed figures moved
<source> is the kernel source's short key (`source_key`): `h200/qwen2.5-1.5b/static_compiled` ->
`h200-q1.5b-sc`, `h200/qwen2.5-7b/eager` -> `h200-q7b` (model and AR-loop names in MODEL_KEYS and
LOOP_KEYS, the default eager loop left out, anything else slugged).

One pool rule: a `pooled` figure of a cov, bound or em row pools the paper's three corpora (the pool
set beside the paper's figures; 482 cases in this repository); the `_all` rows pool every corpus. The e2e
rows' `pooled` is every measured case of the e2e sample (no paper corpus pool: the sample is small).

Every figure is read from another stage's committed output (reports/tables, reports/metrics). An
output that is absent leaves its rows out, and `build_headline` says which (`missing`).

`claims_summary` is the other headline file, reports/metrics/headline.json (written by the reports
stage before its index): the claim verdict counts and about ten flat figures. This module is the one
producer of headline figures; both files are built here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analysis.claims.engine import claims
from analysis.claims.verdict import (
    DIFFERS,
    NOT_AT_SCALE,
    NOT_COMPARABLE,
    NOT_RUN,
    REPRODUCED,
    STALE,
    UNDERDETERMINED,
    Claim,
    counts,
)
from analysis.errors import ParamsError
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.layout import E2E_FROZEN, E2E_WIDE, HEADLINE_METRICS, METRICS, TABLES
from analysis.pooling import (
    ALL_POOL,
    PAPER_CORPORA,
    PAPER_POOL,
    PER_CORPUS,
    POOL_LABELS,
    POOLED,
    RATIO_OF_SUMS,
    paper_pool,
    pool_rows,
)
from analysis.results.bounds import line_ideal, paper_pool_rows, pooled_rows
from analysis.results.outputs import bounds_frame, metrics, optional_table, table
from analysis.latency.model import paper_speedup
from analysis.pipeline.io import output_set, remove_output, write_json
from analysis.results.e2e import HEVALFIX_POOL, best_standard_pld, read_frozen, respelled
from analysis.rivals.families.ar import AR
from analysis.rivals.methods import parse_method

HEADLINE_DIR = HEADLINE_METRICS
# Short keys of the models and AR loops that name kernel sources (a row's path stays short).
MODEL_KEYS = {"qwen2.5-0.5b": "q0.5b", "qwen2.5-1.5b": "q1.5b", "qwen2.5-7b": "q7b", "smollm2-135m": "s135m"}
# The AR loops: eager (the HF loop, the default) is left out of the key, so the others stand out.
LOOP_KEYS = {"eager": "", "static": "st", "static_compiled": "sc"}
# The paper's corpora (and this suite's) by short key; any other corpus gets `slug(name)`.
CORPUS_KEYS = {
    "HEvalFix-Py": "hepy",
    "HEvalFix-JS": "hejs",
    "CommitEdits-click": "click",
    "CommitEdits-express": "express",
    "ProbeEdit-S": "probe",
    "CanItEdit": "cie",   # the field's edit benchmarks: short keys, each adds 8 characters to the grid
    "EditEval": "ee",
    "HEvalFix": "he",  # the e2e pool of both HEvalFix corpora
    POOLED: POOLED,
}
HELDOUT = "heldout"  # the pilot's held-out split (analysis.pilot.data): its own rows, no column
DIRECTIVES_VARIANT = "overhead"  # bounds.csv's variant that charges the directive tokens
# Units in the row names, the last part of each: a ratio (a speedup, a bound) `_x`; a share in percent `_pct`
# (the value x100, as the reports print it); a count `_n`, kept out of every ratio row (seconds would be `_s`: no
# row holds seconds). A flag (noisy_*, 0 or 1) and the machine's name carry none.
RATIO, PERCENT, COUNT = "_x", "_pct", "_n"


@dataclass(frozen=True)
class HeadlineSettings:
    """params.yaml `headline` (checked by `analysis.stages.headline.settings`): which slice of each
    table is the headline figure."""

    framing: str = "body"          # multi-framing corpora (HEvalFix) at this framing; single-framing corpora join
    kernel_ns: tuple[int, ...] = (8, 512)
    perturb_rate: float = 1.0
    decimals: int = 2              # ratios at this many decimals, percents at one fewer



@dataclass
class Headline:
    rows: dict[str, dict[str, float | int | str]] = field(default_factory=dict)  # file stem -> {key: value}
    missing: list[str] = field(default_factory=list)                          # inputs that were absent


def slug(text: str) -> str:
    """A file-name and key-safe form: `h200/qwen2.5-7b/eager` -> `h200-qwen2.5-7b-eager`."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(text)).strip("-").lower() or "x"


def corpus_key(name: str) -> str:
    return CORPUS_KEYS.get(name, slug(name))


def source_key(source: str) -> str:
    """A kernel source's short key: each `/` part through MODEL_KEYS / LOOP_KEYS ("devtime" shortened to
    "dt": `h200-devtime/qwen2.5-1.5b` -> `h200dt-q1.5b`), then slugged."""
    raw = str(source).replace("-devtime", "dt").split("/")
    # a model named already by its source (`llama-3.2-1b-cuda/llama-3.2-1b/eager`) is not repeated
    parts = [MODEL_KEYS.get(part, LOOP_KEYS.get(part, part)) for i, part in enumerate(raw)
             if not any(part in earlier for earlier in raw[:i])]
    return slug("-".join(part for part in parts if part))


def _num(value: Any, decimals: int) -> float | int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    value = float(value)
    return None if value != value else round(value, decimals)


def _pct(share: Any, decimals: int) -> float | None:
    """A share (0-1) as the percent the reports print, one decimal fewer than a ratio (0.969 -> 96.9 at 2)."""
    number = _num(share, 12)
    return None if number is None else round(100 * number, max(decimals - 1, 0))


def _per_corpus(frame: pl.DataFrame, value: str, decimals: int, percent: bool = False) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for row in frame.sort("corpus").iter_rows(named=True):
        number = _pct(row[value], decimals) if percent else _num(row[value], decimals)
        if number is not None:
            out[corpus_key(row["corpus"])] = number
    return out


def _read_csv(tables: Path, name: str, missing: list[str]) -> pl.DataFrame | None:
    found = optional_table(name, tables, infer_all_rows=True)
    if found is None:
        missing.append(str(Path(tables) / f"{name}.csv"))
    return found


def coverage_rows(cov: pl.DataFrame, s: HeadlineSettings) -> dict[str, dict]:
    """Copy coverage per corpus; `pooled` over the paper's three corpora (summed copied over summed gold
    tokens: the gold-token-weighted mean of the corpora's coverage); `cov_<level>_all` the pool of every corpus."""
    part = pool_rows(cov, s.framing)
    out: dict[str, dict] = {}
    for level in sorted(part["level"].unique().to_list()):
        rows = part.filter(pl.col("level") == level)
        values = _per_corpus(rows.filter(pl.col("corpus") != POOLED), "coverage", s.decimals, percent=True)
        everything = rows.filter(pl.col("corpus") == POOLED)
        if everything.height:
            out[f"cov_{level}{POOL_ALL_SUFFIX}{PERCENT}"] = {POOLED: _pct(everything["coverage"][0], s.decimals)}
        paper = paper_pool(rows, "gold_tokens", ["coverage"]) if "gold_tokens" in rows.columns else pl.DataFrame()
        if paper.height:
            values[POOLED] = _pct(paper["coverage"][0], s.decimals)
        out[f"cov_{level}{PERCENT}"] = values
    return out


def bound_rows(bounds: pl.DataFrame, s: HeadlineSettings, paper: pl.DataFrame | None = None) -> dict[str, dict]:
    """Line level, per kernel source (every source the table holds), ideal and with directives, per
    corpus and `pooled` over the paper's three corpora (ratio of sums: bounds_paper_pool.csv, `paper`;
    when the run holds only the paper's corpora, bounds.csv's pool is that pool). The pool of every
    corpus stays in bounds.csv (`pool` = all). A source with several baselines keeps its strongest per
    corpus (the highest bound is against the slowest loop, so the lowest is the honest one): min over
    baselines."""
    part = pool_rows(bounds.filter(pl.col("level") == "line"), s.framing)
    if "pooling" in part.columns:
        part = part.filter(pl.col("pooling").is_in([PER_CORPUS, RATIO_OF_SUMS]))
    if not _only_paper(part):
        pooled_paper = (pl.DataFrame() if paper is None or paper.is_empty() else
                        pool_rows(paper.filter((pl.col("level") == "line") & (pl.col("pooling") == RATIO_OF_SUMS)),
                                        s.framing))
        part = pl.concat([part.filter(pl.col("corpus") != POOLED), *([pooled_paper] if pooled_paper.height else [])],
                         how="diagonal_relaxed")
    out: dict[str, dict] = {}
    for source in sorted(part["kernel_source"].unique().to_list()):
        for variant, suffix in (("ideal", "ideal"), (DIRECTIVES_VARIANT, "dir")):
            rows = (part.filter((pl.col("kernel_source") == source) & (pl.col("variant") == variant))
                    .group_by("corpus").agg(pl.col("bound").min()))
            if rows.height:
                out[f"bound_{source_key(source)}_{suffix}{RATIO}"] = _per_corpus(rows, "bound", s.decimals)
    return out


def padded(prefix: str, value: int, values) -> str:
    """`prefix` and `value` zero-padded to the widest of `values` (`c0256` beside `c2048`), so that `dvc metrics
    show`, which sorts rows and columns as text, lists them in numeric order."""
    return f"{prefix}{value:0{len(str(max(values)))}d}"


def n_key(n: int, ns) -> str:
    """A kernel row's column for copy length N, zero-padded to the widest N (`n008`, `n512`)."""
    return padded("n", n, ns)


def kernel_rows(speedup: pl.DataFrame | None, sources: list[str], s: HeadlineSettings) -> dict[str, dict]:
    """Measured ratios (reports/tables/kernel_speedup.csv, per kernel source and context) of the judged
    comparisons only, both sides built alike (eager/eager, device/device; the strongest judged AR loop where a
    source has several), and the paper's curve when `paper` is one of the bound's kernel sources. A
    graph-captured loop against an eager prefill is not judged and gets no headline row."""
    out: dict[str, dict] = {}
    if speedup is not None and speedup.height:
        frame = speedup
        if "judged" in frame.columns:
            frame = frame.filter(pl.col("judged").cast(pl.Boolean))
            if "t_ar" in frame.columns:  # the strongest judged loop per point
                frame = frame.sort("t_ar").unique(["kernel_source", "model", "context", "n"], keep="first",
                                                  maintain_order=True).sort("kernel_source", "context", "n")
        elif "is_strongest" in frame.columns:  # a table from before the comparison columns
            frame = frame.filter(pl.col("is_strongest"))
        multi_model = frame.group_by("kernel_source").agg(pl.col("model").n_unique().alias("k")).filter(pl.col("k") > 1)
        several = set(multi_model["kernel_source"].to_list())
        contexts = [int(c) for c in frame["context"].unique().to_list()]
        for (source, model, context), group in frame.group_by(["kernel_source", "model", "context"], maintain_order=True):
            name = (f"kernel_{source_key(source)}" + (f"_{source_key(model)}" if source in several else "")
                    + f"_{padded('c', int(context), contexts)}{RATIO}")
            by_n = {int(r["n"]): r["speedup"] for r in group.iter_rows(named=True)}
            row = {n_key(n, s.kernel_ns): _num(by_n[n], s.decimals) for n in s.kernel_ns if n in by_n}
            if row:
                out[name] = row
    if PAPER_SOURCE in sources:
        out[f"kernel_paper{RATIO}"] = {n_key(n, s.kernel_ns): _num(float(paper_speedup(n)), s.decimals)
                                       for n in s.kernel_ns}
    return dict(sorted(out.items()))


# em rows over the paper's three corpora are `em_<level>` (column `pooled`); the pool of every corpus is its own
# row `em_<level>_all` (column `pooled`), so `dvc metrics show` gains no column and stays within 120 characters
POOL_ALL_SUFFIX = "_all"


def _paper_pool_em(part: pl.DataFrame) -> float | None:
    """EM pooled over the paper's corpora the slice holds (analysis.pooling.paper_pool: case-weighted)."""
    pooled = paper_pool(part, "n_cases", ["em"])
    return float(pooled["em"][0]) if pooled.height else None


def em_rows(perturb: pl.DataFrame, s: HeadlineSettings) -> dict[str, dict]:
    """EM at `perturb_rate` per corpus; `pooled` over the paper's three corpora (482 cases, the pool set
    beside the paper's 15.48%); `em_<level>_all` holds the pool of every corpus of the run."""
    part = pool_rows(perturb.filter((pl.col("kind") == "both") & ((pl.col("rate") - s.perturb_rate).abs() < 1e-9)),
                           s.framing)
    out = {}
    for level in sorted(part["level"].unique().to_list()):
        rows = part.filter(pl.col("level") == level)
        values = _per_corpus(rows.filter(pl.col("corpus") != POOLED), "em", s.decimals, percent=True)
        everything = rows.filter(pl.col("corpus") == POOLED)
        if everything.height and everything["em"][0] is not None:
            out[f"em_{level}{POOL_ALL_SUFFIX}{PERCENT}"] = {POOLED: _pct(everything["em"][0], s.decimals)}
        paper = _paper_pool_em(rows.filter(pl.col("corpus") != POOLED))
        if paper is not None:
            values[POOLED] = _pct(paper, s.decimals)
        out[f"em_{level}{PERCENT}"] = {k: v for k, v in values.items() if v is not None}
    return out


E2E_ROW_METHODS = (("linedec", "copy-line-decoded"), ("tokdec", "copy-token-decoded"), ("line", "copy-line-ideal"),
                   ("token", "copy-token-ideal"))  # row suffix -> method; `pld` and `suffix` are chosen per model


def e2e_rows(pooled: pl.DataFrame, s: HeadlineSettings, prefix: str = "e2e_",
             pools: tuple[str, ...] | None = None) -> dict[str, dict]:
    """Measured end to end against the AR loop of the same model, from e2e_pooled.csv (analysis.results.e2e):
    per corpus, the HEvalFix pool and `pooled` over every case, the ratio of summed times; `_linedec` /
    `_tokdec` Copy-as-Decode with directives decoded, `_line` / `_token` the ideal upper bounds, `_pld`
    prompt lookup at its standard policy and best k over every case, `_suffix` suffix decoding, `_n` the
    case counts. `pools` keeps only those pools (the frozen run's HEvalFix pool and every case: its corpora are
    on the e2e page, and the grid stays a few dozen figures)."""
    out: dict[str, dict] = {}
    pooled = respelled(pooled)
    if pools is not None:
        pooled = pooled.filter(pl.col("pool").is_in(list(pools)))
    for model in sorted(pooled["model"].unique().to_list()):
        part = pooled.filter(pl.col("model") == model)
        everything = part.filter(pl.col("pool") == POOLED)
        suffixes = [m for m in everything["method"].to_list() if parse_method(m).family == "suffix"]
        chosen = [*E2E_ROW_METHODS, *((("pld", p),) if (p := best_standard_pld(everything)) else ()),
                  *((("suffix", suffixes[0]),) if suffixes else ())]
        for suffix, method in chosen:
            rows = part.filter(pl.col("method") == method).rename({"pool": "corpus"})
            if rows.height:
                out[f"{prefix}{slug(model)}_{suffix}{RATIO}"] = _per_corpus(rows, "speedup_pooled", s.decimals)
        ar = part.filter(pl.col("method") == AR).rename({"pool": "corpus"})
        if ar.height:  # `_cases_n` sorts first among the model's rows: the counts head the ratios, never among them
            out[f"{prefix}{slug(model)}_cases{COUNT}"] = _per_corpus(ar, "cases", s.decimals)
    return out


def e2e_frozen_rows(frozen: Path, s: HeadlineSettings) -> dict[str, dict]:
    """The frozen `e2e-wide` preset run's rows (`e2ew_<model>_...`), when it is committed in this code's format, and
    its noise flag (`noisy_e2ew`, from the run's own environment record), as `noisy_e2e` flags this run's."""
    run = read_frozen(frozen, E2E_WIDE)
    if run is None or run.stale:
        return {}
    rows = e2e_rows(run.pooled, s, prefix="e2ew_", pools=(HEVALFIX_POOL, POOLED))
    env = run.metrics.get("environment") if isinstance(run.metrics, dict) else None
    if isinstance(env, dict) and env.get("noisy") is not None:
        rows["noisy_e2ew"] = {POOLED: int(bool(env["noisy"]))}
    return rows


def serving_rows(claim: pl.DataFrame, s: HeadlineSettings) -> dict[str, dict]:
    """Batched serving at each source's headline budget (the gains table's `headline` row): per source and headline
    concurrency C, the headline Copy-as-Decode method's gain over AR (`sv_<source>_c<C>`) and Copy-as-Decode's best
    variant there over the best rival there (`..._c<C>r`: the claims' decision value), in the `pooled` column (one
    figure a row keeps `dvc metrics show` as narrow as the corpus grid)."""
    if "headline" not in claim.columns:
        return {}
    marked = claim.filter(pl.col("headline")).select("kernel_source", "max_num_batched_tokens")
    rows = claim.join(marked, on=["kernel_source", "max_num_batched_tokens"], how="semi")
    out = {}
    loads = [int(k[len("vs_ar_c"):]) for k in rows.columns if k.startswith("vs_ar_c") and k[len("vs_ar_c"):].isdigit()]
    for source, part in rows.group_by("kernel_source", maintain_order=True):
        stem = f"sv_{source_key(source[0])}"
        for c in loads:
            load = padded("c", c, loads)
            over_ar = part.filter(pl.col("headline"))[f"vs_ar_c{c}"].drop_nulls()
            if over_ar.len():
                out[f"{stem}_{load}{RATIO}"] = {POOLED: _num(over_ar[0], s.decimals)}
            over_rival = part[f"vs_best_rival_c{c}"].drop_nulls() if f"vs_best_rival_c{c}" in part.columns else None
            if over_rival is not None and over_rival.len():
                out[f"{stem}_{load}r{RATIO}"] = {POOLED: _num(over_rival.max(), s.decimals)}
    return out


def rivals_rows(fast: pl.DataFrame, judged: str, s: HeadlineSettings) -> dict[str, dict]:
    """At batch 1 under the judged source: Copy-as-Decode's best deployable variant over the best rival (the claims'
    decision value) per corpus, `pooled` over the paper's three corpora (`rivals_best_ratio_x`, like the cov, bound
    and em rows), and over every corpus of the run (`rivals_best_ratio_all_x`)."""
    rows = fast.filter((pl.col("kernel_source") == judged) & pl.col("copy_over_rival").is_not_null())
    values = _per_corpus(rows.filter(pl.col("corpus") != POOLED), "copy_over_rival", s.decimals)
    out: dict[str, dict] = {}
    for pool, target in ((PAPER_POOL, None), (ALL_POOL, f"rivals_best_ratio{POOL_ALL_SUFFIX}{RATIO}")):
        pooled = rows.filter((pl.col("corpus") == POOLED) & (pl.col("pool") == pool))["copy_over_rival"]
        if pooled.len():
            if target is None:
                values[POOLED] = _num(pooled[0], s.decimals)
            else:
                out[target] = {POOLED: _num(pooled[0], s.decimals)}
    if values:
        out[f"rivals_best_ratio{RATIO}"] = values
    return out


def pilot_rows(pilot: pl.DataFrame, s: HeadlineSettings) -> dict[str, dict]:
    """Exact match of the program-writing pilot per evaluation split, before and after fine-tuning: the corpora's
    splits in their columns (`pilot_<phase>_pct`); the pilot's own held-out split, which is no corpus, as its own
    row over all of its cases, in the `pooled` column (`pilot_held_<phase>_pct`: a `held` column would widen the
    grid for two figures)."""
    part = pilot.filter(pl.col("mode") == "program") if "mode" in pilot.columns else pilot
    out: dict[str, dict] = {}
    for phase in ("before", "after"):
        rows = part.filter(pl.col("phase") == phase).group_by("split").agg(pl.col("em").mean())
        for r in rows.sort("split").iter_rows(named=True):
            if r["split"] == HELDOUT:
                out[f"pilot_held_{phase}{PERCENT}"] = {POOLED: _pct(r["em"], s.decimals)}
            else:
                out.setdefault(f"pilot_{phase}{PERCENT}", {})[corpus_key(r["split"])] = _pct(r["em"], s.decimals)
    return out


def _read_json(path: Path, missing: list[str]) -> dict | None:
    if not path.is_file():
        missing.append(str(path))
        return None
    return json.loads(path.read_text())


def run_rows(metrics_dir: Path, missing: list[str]) -> dict[str, dict]:
    """This run's noise flags (1 = marked NOISY) and machine, from the kernel fit's and e2e's metrics."""
    out: dict[str, dict] = {}
    kernels = _read_json(Path(metrics_dir) / "kernels.json", missing)
    e2e = _read_json(Path(metrics_dir) / "e2e.json", missing)
    kernel_env = (kernels or {}).get("run_environment") or {}
    e2e_env = (e2e or {}).get("environment") or {}
    for name, env in (("noisy_kernel", kernel_env), ("noisy_e2e", e2e_env)):
        if env.get("noisy") is not None:
            out[name] = {POOLED: int(bool(env["noisy"]))}
    machine = kernel_env.get("machine") or {}
    model = machine.get("cpu_model") or e2e_env.get("cpu_model")
    if model:
        out["machine"] = {POOLED: cpu_family(str(model))}
    cores = machine.get("logical_cores")
    if isinstance(cores, int) and not isinstance(cores, bool):
        out[f"machine_cores{COUNT}"] = {POOLED: cores}
    return out


# words of a CPU model name that are not its product line
_NOT_FAMILY = {"amd", "intel", "intel(r)", "genuine", "genuineintel", "authenticamd", "apple", "arm", "qualcomm",
               "(r)", "(tm)", "cpu", "processor", "core(tm)"}


def cpu_family(model: str) -> str:
    """The product line of a CPU model name, short enough for a `dvc metrics show` column:
    `AMD EPYC 7763 64-Core Processor` -> `EPYC`, `Intel(R) Xeon(R) Platinum 8480+` -> `Xeon`,
    `Apple M2 Pro` -> `M2`; a name with no such word is kept whole. The full name is in
    reports/metrics/kernels.json (run_environment.machine.cpu_model)."""
    for word in model.split():
        clean = re.sub(r"\((r|tm)\)", "", word, flags=re.IGNORECASE)
        if clean and word.lower() not in _NOT_FAMILY and clean.lower() not in _NOT_FAMILY:
            return clean
    return model


def build_headline(s: HeadlineSettings, kernel_sources: list[str], tables: Path = TABLES,
                   metrics_dir: Path = METRICS, e2e_frozen: Path = E2E_FROZEN) -> Headline:
    head = Headline()
    readers = (
        ("coverage", lambda f: coverage_rows(f, s)),
        ("bounds", lambda f: bound_rows(f, s, optional_table("bounds_paper_pool", tables, infer_all_rows=True))),
        ("perturbation", lambda f: em_rows(f, s)),
        ("e2e_pooled", lambda f: e2e_rows(f, s)),
        ("pilot_em", lambda f: pilot_rows(f, s)),
        ("serving_claim", lambda f: serving_rows(f, s)),
    )
    for name, build in readers:
        frame = _read_csv(tables, name, head.missing)
        if frame is not None and frame.height:
            head.rows.update(build(frame))
    head.rows.update(kernel_rows(_read_csv(tables, "kernel_speedup", head.missing), kernel_sources, s))
    fast, facts = _read_csv(tables, "rivals_fastest", head.missing), _read_json(Path(metrics_dir) / "rivals.json",
                                                                                head.missing)
    if fast is not None and fast.height and facts:
        head.rows.update(rivals_rows(fast, facts["judged_source"], s))
    head.rows.update(e2e_frozen_rows(e2e_frozen, s))  # absent until an e2e-wide run is committed: no row, no miss
    roundtrip = Path(metrics_dir) / "roundtrip.json"
    if roundtrip.is_file():
        head.rows[f"roundtrip_fail{COUNT}"] = {POOLED: int(json.loads(roundtrip.read_text())["failed"])}
    else:
        head.missing.append(str(roundtrip))
    head.rows.update(run_rows(metrics_dir, head.missing))
    head.rows = {k: v for k, v in sorted(head.rows.items()) if v}
    return head


def write_headline(head: Headline, out_dir: Path = HEADLINE_DIR) -> list[Path]:
    """One JSON file per row; files of rows no longer produced are removed, so a stale figure from
    an earlier run (another kernel source, a dropped corpus) never shows in `dvc metrics show`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with output_set("headline", outputs=(out_dir.as_posix(),)):  # every row file and removal as one set
        for stem, values in head.rows.items():
            path = out_dir / f"{stem}.json"
            write_json(values, path)
            written.append(path)
        for stale in out_dir.glob("*.json"):
            if stale not in written and stale.is_file() and not stale.is_symlink():
                remove_output(stale)
    return written


# ---------------------------------------------------------------- reports/metrics/headline.json


def _round(value: Any, digits: int = 4) -> Any:
    return round(float(value), digits) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def claims_summary(tables: Path = TABLES, metrics_dir: Path = METRICS, items: list[Claim] | None = None) -> dict:
    """reports/metrics/headline.json: about ten flat figures, so that `dvc metrics show` prints them as
    one short table row; each is taken from another stage's output (the claims: `items`, as written to
    reports/claims.json), and a figure whose output is absent is left out. Coverage and bounds are body
    framing, line level, ideal variant, ratio of sums, pooled over the paper's three corpora (`pool`)."""
    items = claims(tables, metrics_dir) if items is None else items
    tally = counts(items)
    out: dict[str, Any] = {"reproduced": tally[REPRODUCED], "differ": tally[DIFFERS],
                           "not_comparable": tally[NOT_COMPARABLE], "underdetermined": tally[UNDERDETERMINED],
                           "not_reproduced_at_scale": tally[NOT_AT_SCALE], "stale": tally[STALE],
                           "not_run": tally[NOT_RUN]}
    try:
        kern = metrics("kernels", metrics_dir)
        env = kern.get("run_environment")
        out["kernel_max"] = _round(kern["speedup_range_strongest"][1], 2)
        out["noisy"] = env.get("noisy") if isinstance(env, dict) else "not recorded"
    except ParamsError:
        pass
    try:
        cov = coverage_rows(table("coverage", tables), HeadlineSettings(decimals=6)).get(f"cov_line{PERCENT}", {})
        if POOLED in cov:
            out["cov_line_pooled"] = round(cov[POOLED] / 100, 4)  # a share, as this file's other readers take it
    except ParamsError:
        pass
    try:
        b = bounds_frame(tables)
        for source, key, baseline in ((PAPER_SOURCE, "bound_paper_pooled", None), (FIT_SOURCE, "bound_fit_pooled", "eager")):
            rows = line_ideal(b, source, baseline)
            pooled = paper_pool_rows(tables, source, baseline, b) or (pooled_rows(rows) if _only_paper(rows) else {})
            if RATIO_OF_SUMS in pooled:
                out[key] = _round(pooled[RATIO_OF_SUMS]["bound"], 2)
    except ParamsError:
        pass
    try:
        out["roundtrip_failed"] = metrics("roundtrip", metrics_dir)["failed"]
    except ParamsError:
        pass
    return out


def _only_paper(rows: pl.DataFrame) -> bool:
    """Every per-corpus row is one of the paper's corpora (then the pool of every corpus is the paper's)."""
    return bool(rows.filter(pl.col("corpus") != POOLED)["corpus"].is_in(list(PAPER_CORPORA)).all())
