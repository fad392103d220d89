"""`copydecode compare A B`: the headline figures of two runs, paired on their shared cases.

A run is a folder holding the pipeline's per-case outputs (`data/bounds/case_costs.parquet`,
`data/perturb/results.parquet`, `data/pilot/records.parquet`, `data/e2e/measurements.parquet`; any
may be absent), or a git revision
or `dvc exp` name, whose dvc-tracked outputs are read through `dvc.api.open` without a checkout.

Each figure is recomputed on the rows the two runs share (paired on their key columns: case, corpus,
framing, level, and the kernel source or seed where the table has one) and reported as A, B and
B - A with a 95% (params `compare.ci`) paired percentile bootstrap CI: every resample draws the same
units in both runs, seeded per figure (`compare.seed`), so the CI of a figure does not depend on
which other figures are compared. Ratios (coverage, bound) are ratios of sums, as in the stages.
Exact-match figures also get the exact McNemar test on the discordant pairs. A difference is
significant when its CI excludes 0 and, for exact match, McNemar's p < `compare.alpha`.

Figures (`figure`, per corpus and `pooled`, at the headline framing `headline.framing` plus the
single-framing corpora, as in analysis.present.headline):
  cov_<level>                    copied / gold tokens (case_costs)
  bound_<source>_<ideal|dir>     regen / program time, line level (case_costs); <source> as in the
                                 headline rows (analysis.present.headline.source_key), plus -<AR loop> where a
                                 source has several
  em_<level>                     exact match under span noise at `headline.perturb_rate` (kind both)
  pilot_<mode>_<phase>           pilot exact match per split (records)
  e2e_<model>_<line|token>       measured speedup over AR: sum of AR seconds / sum of method seconds,
                                 each case at its median over repeats (as the e2e stage)
Rows only one run has are not compared; the report names how many and the first few.
"""

from __future__ import annotations

import html
import math
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl
from scipy.stats import binomtest

from analysis.errors import CopyDecodeError, ParamsError
from analysis.layout import CASE_COSTS, E2E_MEASUREMENTS, PERTURB_RESULTS, PILOT_RECORDS
from analysis.pooling import POOLED, pool_rows

# per-case table -> (path under a run, key columns a row is paired on)
PER_CASE: dict[str, tuple[Path, tuple[str, ...]]] = {
    "case_costs": (CASE_COSTS, ("case_id", "corpus", "framing", "level", "kernel_source", "baseline")),
    "perturb": (PERTURB_RESULTS, ("case_id", "corpus", "framing", "level", "kind", "rate", "seed")),
    "pilot": (PILOT_RECORDS, ("phase", "seed", "split", "mode", "case_id", "kind", "position")),
    "e2e": (E2E_MEASUREMENTS, ("model", "corpus", "case_id", "method")),  # after per_case_e2e
}
E2E_METHODS = {"cad_line": "line", "cad_token": "token"}  # measured methods -> headline row suffix
AR_METHOD = "ar"
NAMED_IDS = 5  # unpaired case ids named in the report


class CompareError(CopyDecodeError):
    """Two runs that cannot be compared (a missing run, no shared cases, duplicate keys)."""


@dataclass(frozen=True)
class CompareSettings:
    """params.yaml `compare` plus the headline slice (`headline.framing`, `headline.perturb_rate`)."""

    resamples: int
    seed: int
    ci: float
    alpha: float
    framing: str          # headline.framing: multi-framing corpora at this framing (single-framing ones join)
    perturb_rate: float   # headline.perturb_rate: exact match under span noise at this rate

    def validate(self) -> "CompareSettings":
        if self.resamples < 1:
            raise ParamsError(f"params: 'compare.resamples' must be >= 1, got {self.resamples}")
        for name, value in (("compare.ci", self.ci), ("compare.alpha", self.alpha)):
            if not 0 < value < 1:
                raise ParamsError(f"params: {name!r} must be between 0 and 1, got {value}")
        return self


@dataclass(frozen=True)
class Run:
    label: str
    tables: dict[str, pl.DataFrame]  # PER_CASE name -> rows (absent tables left out)


@dataclass(frozen=True)
class Difference:
    figure: str
    corpus: str
    n: int                  # paired units
    a: float
    b: float
    diff: float             # b - a
    ci_low: float
    ci_high: float
    p_value: float | None   # exact McNemar (exact-match figures), else None
    significant: bool


@dataclass
class Comparison:
    a: str
    b: str
    settings: CompareSettings
    rows: list[Difference] = field(default_factory=list)
    unpaired: dict[str, tuple[int, int, list[str], list[str]]] = field(default_factory=dict)  # table -> only A/B
    missing: list[str] = field(default_factory=list)  # tables one run lacks

    def frame(self) -> pl.DataFrame:
        schema = {"figure": pl.String, "corpus": pl.String, "n": pl.Int64, "a": pl.Float64, "b": pl.Float64,
                  "diff": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "p_value": pl.Float64,
                  "significant": pl.Boolean}
        return pl.DataFrame([vars(r) for r in self.rows], schema=schema)


# ---------------------------------------------------------------- reading runs

def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def resolve_revision(spec: str, repo: Path = Path(".")) -> str | None:
    """A commit for a git revision or a `dvc exp` name (refs/exps/**/<name>), else None."""
    commit = _git(["rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"], repo)
    if commit:
        return commit
    refs = _git(["for-each-ref", "--format=%(refname) %(objectname)", "refs/exps"], repo) or ""
    for line in refs.splitlines():
        ref, _, sha = line.partition(" ")
        if ref.rsplit("/", 1)[-1] == spec:
            return sha
    return None


def per_case_e2e(measurements: pl.DataFrame) -> pl.DataFrame:
    """e2e measurements -> one row per (model, corpus, case, method): the median seconds over repeats
    beside the same case's AR median (`ar_seconds`), the basis of the stage's speedup_total."""
    needed = {"model", "corpus", "case_id", "method", "seconds"}
    if not needed <= set(measurements.columns):
        raise CompareError(f"e2e measurements lack columns {sorted(needed - set(measurements.columns))}")
    keys = ["model", "corpus", "case_id"]
    timed = measurements.group_by(*keys, "method").agg(pl.col("seconds").median())
    ar = timed.filter(pl.col("method") == AR_METHOD).select(*keys, pl.col("seconds").alias("ar_seconds"))
    return timed.join(ar, on=keys).filter(pl.col("method") != AR_METHOD)


PREPARE: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {"e2e": per_case_e2e}


def _read_folder(root: Path, path: Path) -> pl.DataFrame | None:
    full = root / path
    if not full.is_file():
        return None
    try:
        return pl.read_parquet(full)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the named error
        raise CompareError(f"{full}: not a readable parquet file ({type(exc).__name__}: {exc})") from exc


def _read_revision(rev: str, path: Path, repo: Path) -> pl.DataFrame | None:
    import io

    import dvc.api

    try:
        with dvc.api.open(str(path), repo=str(repo), rev=rev, mode="rb") as handle:
            return pl.read_parquet(io.BytesIO(handle.read()))
    except Exception:  # noqa: BLE001 - an output that revision did not produce (or not in the cache) is absent
        return None


def load_run(spec: str, repo: Path = Path(".")) -> Run:
    """A run folder, or a git revision / dvc experiment of the repository at `repo`."""
    folder = Path(spec)
    if folder.is_dir():
        tables = {name: _read_folder(folder, path) for name, (path, _) in PER_CASE.items()}
        where = f"folder {folder}"
    else:
        commit = resolve_revision(spec, repo)
        if commit is None:
            raise CompareError(f"{spec!r} is neither a run folder nor a git revision or dvc experiment of {repo.resolve()}")
        tables = {name: _read_revision(commit, path, repo) for name, (path, _) in PER_CASE.items()}
        where = f"revision {spec} ({commit[:10]})"
    tables = {k: PREPARE[k](v) if k in PREPARE else v for k, v in tables.items() if v is not None}
    if not tables:
        names = ", ".join(str(path) for path, _ in PER_CASE.values())
        hint = ("run the pipeline there first" if folder.is_dir() else
                "they are not in this repository's dvc cache: `dvc pull` them, or save a run with `dvc exp save` "
                "(which caches its outputs) before comparing")
        raise CompareError(f"{where}: none of the per-case outputs ({names}); {hint}")
    return Run(spec, tables)


# ---------------------------------------------------------------- statistics

def _rng(seed: int, figure: str, corpus: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(f"{figure}/{corpus}".encode())])


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1), np.nan)


def paired_bootstrap(a_num, a_den, b_num, b_den, resamples: int, rng: np.random.Generator,
                     level: float, chunk: int = 250) -> tuple[float, float]:
    """Percentile CI of ratio_b - ratio_a (ratios of sums), resampling the paired units together.
    Resamples whose ratio is undefined (a zero denominator) are dropped; all undefined -> NaN."""
    arrays = [np.asarray(x, dtype=float) for x in (a_num, a_den, b_num, b_den)]
    n = arrays[0].size
    diffs = []
    for start in range(0, resamples, chunk):
        idx = rng.integers(0, n, size=(min(chunk, resamples - start), n))
        sums = [x[idx].sum(axis=1) for x in arrays]
        diffs.append(_ratio(sums[2], sums[3]) - _ratio(sums[0], sums[1]))
    values = np.concatenate(diffs)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact McNemar p-value of paired booleans (binomial test on the discordant pairs)."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_b, only_a + only_b, 0.5).pvalue)


# ---------------------------------------------------------------- pairing

def _check_unique(frame: pl.DataFrame, keys: list[str], run: str, table: str) -> None:
    dup = frame.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise CompareError(f"{run}: {table} has {dup.height} duplicate rows on {keys}, e.g. {dup.row(0, named=True)}")


def pair_tables(a: pl.DataFrame, b: pl.DataFrame, keys: tuple[str, ...], labels: tuple[str, str],
                table: str) -> tuple[pl.DataFrame, tuple[int, int, list[str], list[str]]]:
    """Rows of both runs joined on `keys` (columns suffixed _a/_b), and the case ids only one run has."""
    keys = [k for k in keys if k in a.columns and k in b.columns]
    if "case_id" not in keys:
        raise CompareError(f"{table}: no case_id column in both runs ({labels[0]}, {labels[1]})")
    for frame, label in ((a, labels[0]), (b, labels[1])):
        _check_unique(frame, keys, label, table)
    values = [c for c in a.columns if c not in keys and c in b.columns]
    joined = a.select(*keys, *values).join(b.select(*keys, *values), on=keys, how="inner", suffix="_b")
    joined = joined.rename({c: f"{c}_a" for c in values})
    ids_a, ids_b = set(a["case_id"].cast(pl.String)), set(b["case_id"].cast(pl.String))
    only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
    if joined.height == 0:
        raise CompareError(f"{table}: {labels[0]} and {labels[1]} share no rows; case ids only in "
                           f"{labels[0]}: {only_a[:NAMED_IDS]}, only in {labels[1]}: {only_b[:NAMED_IDS]}")
    return joined, (len(only_a), len(only_b), only_a[:NAMED_IDS], only_b[:NAMED_IDS])


def _groups(frame: pl.DataFrame, by: str = "corpus") -> list[tuple[str, pl.DataFrame]]:
    """(corpus, rows) per corpus, then (pooled, all rows) when there are several corpora."""
    out = [(str(name), rows) for (name,), rows in frame.group_by(by)]
    out.sort(key=lambda item: item[0])
    if len(out) > 1:
        out.append((POOLED, frame))
    return out


def _ratio_rows(figure: str, frame: pl.DataFrame, num: str, den: str, s: CompareSettings,
                by: str = "corpus") -> list[Difference]:
    rows = []
    for corpus, part in _groups(frame, by):
        cols = [part[f"{c}_{r}"].cast(pl.Float64).to_numpy() for r in ("a", "b") for c in (num, den)]
        a, b = float(_ratio(cols[0].sum(), cols[1].sum())), float(_ratio(cols[2].sum(), cols[3].sum()))
        low, high = paired_bootstrap(*cols, s.resamples, _rng(s.seed, figure, corpus), s.ci)
        significant = bool(np.isfinite(low) and (low > 0 or high < 0))
        rows.append(Difference(figure, corpus, part.height, a, b, b - a, low, high, None, significant))
    return rows


def _match_rows(figure: str, frame: pl.DataFrame, s: CompareSettings, by: str = "corpus") -> list[Difference]:
    rows = []
    for corpus, part in _groups(frame, by):
        a, b = part["match_a"].to_numpy().astype(bool), part["match_b"].to_numpy().astype(bool)
        ones = np.ones(a.size)
        low, high = paired_bootstrap(a, ones, b, ones, s.resamples, _rng(s.seed, figure, corpus), s.ci)
        p = mcnemar_exact(a, b)
        significant = bool(p < s.alpha and np.isfinite(low) and (low > 0 or high < 0))
        rows.append(Difference(figure, corpus, part.height, float(a.mean()), float(b.mean()),
                               float(b.mean() - a.mean()), low, high, p, significant))
    return rows


def case_cost_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    part = pool_rows(joined, s.framing)
    rows: list[Difference] = []
    if "kernel_source" in part.columns and part.height:  # coverage does not depend on the kernel: one source's rows
        first = sorted(part["kernel_source"].unique().to_list())[0]
        cov = part.filter((pl.col("kernel_source") == first) & (pl.col("baseline") == part.filter(
            pl.col("kernel_source") == first)["baseline"].min()))
    else:
        cov = part
    for (level,), rows_level in sorted(cov.group_by("level"), key=lambda g: g[0]):
        rows += _ratio_rows(f"cov_{level}", rows_level, "copied_tokens", "gold_tokens", s)
    line = part.filter(pl.col("level") == "line")
    if "kernel_source" in line.columns:
        from analysis.present.headline import LOOP_KEYS, source_key

        loops = line.group_by("kernel_source").agg(pl.col("baseline").n_unique().alias("k"))
        several = set(loops.filter(pl.col("k") > 1)["kernel_source"].to_list())
        for (source, baseline), group in sorted(line.group_by("kernel_source", "baseline"), key=lambda g: g[0]):
            # named as `dvc metrics show` names the row (the AR loop only where a source has several)
            name = source_key(source) + (f"-{LOOP_KEYS.get(baseline) or baseline}" if source in several else "")
            for den, suffix in (("program_ideal", "ideal"), ("program_overhead", "dir")):
                rows += _ratio_rows(f"bound_{name}_{suffix}", group, "regen", den, s)
    return rows


def em_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    part = pool_rows(joined.filter((pl.col("kind") == "both") & ((pl.col("rate") - s.perturb_rate).abs() < 1e-9)),
                           s.framing).with_columns(match_a=pl.col("outcome_a") == "match",
                                                   match_b=pl.col("outcome_b") == "match")
    rows: list[Difference] = []
    for (level,), group in sorted(part.group_by("level"), key=lambda g: g[0]):
        rows += _match_rows(f"em_{level}", group, s)
    return rows


def pilot_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    part = joined.with_columns(match_a=pl.col("exact_match_a").fill_null(False),
                               match_b=pl.col("exact_match_b").fill_null(False))
    rows: list[Difference] = []
    for (mode, phase), group in sorted(part.group_by("mode", "phase"), key=lambda g: (str(g[0][0]), str(g[0][1]))):
        rows += _match_rows(f"pilot_{mode}_{phase}", group, s, by="split")
    return rows


def e2e_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    from analysis.present.headline import slug

    rows: list[Difference] = []
    for (model, method), group in sorted(joined.group_by("model", "method"), key=lambda g: (str(g[0][0]), str(g[0][1]))):
        if method in E2E_METHODS:
            rows += _ratio_rows(f"e2e_{slug(model)}_{E2E_METHODS[method]}", group, "ar_seconds", "seconds", s)
    return rows


FIGURES: dict[str, Callable[[pl.DataFrame, CompareSettings], list[Difference]]] = {
    "case_costs": case_cost_rows,
    "perturb": em_rows,
    "pilot": pilot_rows,
    "e2e": e2e_rows,
}


def compare_runs(a: Run, b: Run, s: CompareSettings) -> Comparison:
    s = s.validate()
    out = Comparison(a.label, b.label, s)
    for table, figures in FIGURES.items():
        if table not in a.tables or table not in b.tables:
            if table in a.tables or table in b.tables:
                out.missing.append(f"{table} ({'only ' + (a.label if table in a.tables else b.label)})")
            continue
        joined, unpaired = pair_tables(a.tables[table], b.tables[table], PER_CASE[table][1], (a.label, b.label), table)
        out.unpaired[table] = unpaired
        out.rows += figures(joined, s)
    if not out.rows:
        raise CompareError(f"{a.label} and {b.label} have no per-case table in common "
                           f"(A: {sorted(a.tables)}, B: {sorted(b.tables)})")
    return out


# ---------------------------------------------------------------- rendering

def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}"


def _cells(r: Difference) -> list[str]:
    return [r.figure, r.corpus, str(r.n), _fmt(r.a), _fmt(r.b), _fmt(r.diff), f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]",
            _fmt(r.p_value, 3), "yes" if r.significant else "no"]


HEADER = ["figure", "corpus", "n", "A", "B", "B - A", "CI", "McNemar p", "significant"]


def _named(ids: list[str], count: int) -> str:
    return f" ({', '.join(ids)}{', ...' if count > len(ids) else ''})" if ids else ""


def _notes(c: Comparison) -> list[str]:
    notes = []
    for table, (n_a, n_b, ids_a, ids_b) in c.unpaired.items():
        if n_a or n_b:
            notes.append(f"{table}: {n_a} case ids only in A{_named(ids_a, n_a)}, {n_b} only in B{_named(ids_b, n_b)}; "
                         "not compared")
    notes += [f"{m}: not compared" for m in c.missing]
    return notes


def _intro(c: Comparison) -> str:
    s = c.settings
    return (f"A = {c.a}, B = {c.b}. Paired on shared cases; {s.ci:.0%} paired percentile bootstrap CI of B - A "
            f"({s.resamples} resamples, seed {s.seed}); exact-match figures also get exact McNemar "
            f"(significant: CI excludes 0 and p < {s.alpha}).")


def to_markdown(c: Comparison) -> str:
    sig = sum(r.significant for r in c.rows)
    lines = [f"# Comparison: {c.a} vs {c.b}", "", _intro(c), "",
             f"{sig} of {len(c.rows)} figures differ significantly.", ""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(r)) + " |" for r in c.rows]
    notes = _notes(c)
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def to_html(c: Comparison) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
    body = "\n".join(
        f"<tr class=\"{'sig' if r.significant else ''}\">" + "".join(f"<td>{esc(cell)}</td>" for cell in _cells(r)) + "</tr>"
        for r in c.rows)
    notes = "".join(f"<li>{esc(n)}</li>" for n in _notes(c))
    sig = sum(r.significant for r in c.rows)
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>"
            f"{esc(f'Comparison: {c.a} vs {c.b}')}</title>\n<style>body{{font-family:sans-serif}}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
            "td:first-child,td:nth-child(2){text-align:left}tr.sig{background:#fff3c4}</style></head><body>\n"
            f"<h1>{esc(f'Comparison: {c.a} vs {c.b}')}</h1>\n<p>{esc(_intro(c))}</p>\n"
            f"<p>{sig} of {len(c.rows)} figures differ significantly (highlighted).</p>\n"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>\n"
            + (f"<ul>{notes}</ul>\n" if notes else "") + "</body></html>\n")


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "run"


@dataclass(frozen=True)
class CompareCommand:
    """`copydecode compare A B [--repo R] [--out STEM]` with its statistics settings."""

    a: str
    b: str
    repo: Path       # the repository that revisions and experiments belong to
    out: Path        # STEM: writes STEM.md and STEM.html
    stats: CompareSettings


def compare_settings(params: dict) -> CompareSettings:
    """CompareSettings from params `compare` (resamples, seed, ci, alpha) and the headline slice."""
    from analysis.pipeline.params import get, interval_level, known_keys, number, positive_int

    known_keys(params, "compare", [f for f in ("resamples", "seed", "ci", "alpha")])
    return CompareSettings(
        resamples=positive_int(params, "compare.resamples"),
        seed=get(params, "compare.seed", int),
        ci=interval_level(params, "compare.ci"),
        alpha=interval_level(params, "compare.alpha"),
        framing=get(params, "headline.framing", str),
        perturb_rate=number(params, "headline.perturb_rate", lo=0.0, hi=1.0),
    ).validate()


def settings(params: dict, a: str | None = None, b: str | None = None, repo: str | None = None,
             compare_out: str | None = None) -> CompareCommand:
    """The command's settings: the two runs (required), the repository and the output stem (default
    runs/compare/<A>-vs-<B>), and params `compare`."""
    if not a or not b:
        raise CompareError("compare needs two runs: copydecode compare A B")
    out = Path(compare_out) if compare_out else Path("runs/compare") / f"{_slug(a)}-vs-{_slug(b)}"
    return CompareCommand(a, b, Path(repo or "."), out, compare_settings(params))


def run(s: CompareCommand) -> dict:
    """Compare s.a with s.b, write <stem>.md and <stem>.html, print the markdown."""
    from analysis.pipeline.io import write_text

    comparison = compare_runs(load_run(s.a, s.repo), load_run(s.b, s.repo), s.stats)
    markdown = to_markdown(comparison)
    md_path, html_path = Path(f"{s.out}.md"), Path(f"{s.out}.html")
    write_text(markdown, md_path)
    write_text(to_html(comparison), html_path)
    print(markdown)
    return {"figures": len(comparison.rows), "significant": sum(r.significant for r in comparison.rows),
            "markdown": str(md_path), "html": str(html_path)}
