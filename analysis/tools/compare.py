"""`copydecode compare A B`: the headline figures of two runs, paired on one value per case.

A run is a folder (a checkout or a `--out` run root) or a git revision or `dvc exp` name. A folder's
per-case tables are read as analysis.results.percase reads them: data/ (its own run), else the
committed copies under reports/percase/. A revision's are its committed copies (`git show`, so a fresh
clone compares `HEAD~1 HEAD` with no `dvc repro` and no DVC remote), else its dvc-tracked data/
outputs from this repository's dvc cache (`dvc.api.open`, no checkout).

Pairing: each table is first reduced to one value per case (unit), then the two runs are joined on
every key column of that unit; a key column that either run lacks, a key of another type, or a
missing value column is a named error, never a silently looser pairing.
  case_costs  one row per (case, corpus, framing, level, kernel source, AR loop) as written
  perturb     per (case, corpus, framing, level, kind, rate): the share of perturbation seeds that
              matched (seeds are replicates of one case, not cases)
  pilot       per (phase, split, mode, case, kind, position): the share of adapter seeds that matched
  e2e         per (model, corpus, case, method): the median seconds over repeats, beside the case's AR
  rivals      per (kernel source, corpus, case, method): the method's priced seconds (the rivals stage)
Each figure (per corpus and pooled, at the headline framing `headline.framing` plus the
single-framing corpora, as in analysis.present.headline) is A, B, B - A, the relative change and a
95% (params `compare.ci`) paired percentile bootstrap CI of B - A that resamples cases, seeded per
figure (`compare.seed`). Ratios (coverage, bound, e2e speedup) are ratios of sums, as in the stages.
Exact-match figures also get the exact sign test on the per-case differences (which is McNemar's
exact test when each case has one seed); they are significant when the CI excludes 0 and p <
`compare.alpha`.

Names, units and pools are `dvc metrics show`'s (analysis.present.headline): a name ends in its unit, `pooled`
pools the paper's three corpora where the run has them, `_all` every corpus; docs/compare.md lists every figure.

Cost: the bootstrap draws resamples x units per figure. The command states the work before it starts
and warns when it is large (`--resamples` lowers it for one run); memory is bounded by drawing the
resamples in chunks of at most CHUNK_CELLS indices.
"""

from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl

from analysis.errors import CopyDecodeError, ParamsError
from analysis.pipeline.oneoff import EFFECTIVE_PARAMS
from analysis.pipeline.repo import git
from analysis.pooling import POOLED, pool_rows
from analysis.results.percase import BY_NAME, committed_at, committed_bytes, where
from analysis.stats import nonzero_ratio, paired_bootstrap, sign_test
from analysis.tools.compare_page import to_html, to_json, to_markdown
from analysis.tools.compare_serving import SERVING_CLAIM, read_csv as serving_csv, serving_differences
from analysis.tools.comparison import CompareSettings, Comparison, Difference, Run
from analysis.pipeline.io import write_json, write_text
from analysis.pipeline.params import get, interval_level, known_keys, number, parse_params_text, positive_int
from analysis.present.headline import (COUNT, E2E_ROW_METHODS, LOOP_KEYS, PERCENT, POOL_ALL_SUFFIX, RATIO, slug,
                                       source_key)
from analysis.pooling import paper_cases
from analysis.rivals.families.ar import AR
from analysis.rivals.methods import canonical, parse_method

# measured methods -> the headline row suffix (analysis.present.headline.E2E_ROW_METHODS)
E2E_METHODS = {method: suffix for suffix, method in E2E_ROW_METHODS}
NAMED_IDS = 5  # unpaired case ids named in the report
LARGE_WORK = 1.5e9  # resample x unit draws (about half a minute) above which the command warns before it starts
DRAWS_PER_SECOND = 5e7  # draws a second on one core of the development machine (2 busy cores), for the estimate


class CompareError(CopyDecodeError):
    """Two runs that cannot be compared (a missing run, no shared cases, malformed tables)."""


@dataclass(frozen=True)
class TableSpec:
    """How one per-case table is reduced to one row per unit before pairing."""

    name: str                     # analysis.results.percase table name
    raw: tuple[str, ...]          # columns the raw table must have
    keys: tuple[str, ...]         # the unit: columns of the reduced table the runs are paired on
    reduce: Callable[[pl.DataFrame], pl.DataFrame]


def per_case_e2e(measurements: pl.DataFrame) -> pl.DataFrame:
    """e2e measurements -> one row per (model, corpus, case, method): the median seconds over repeats
    beside the same case's AR median (`ar_seconds`), the basis of the stage's speedup_total. A run measured
    with the old e2e names (`cad_line`) is read in today's spelling, so it pairs with a newer run."""
    keys = ["model", "corpus", "case_id"]
    timed = canonical(measurements).group_by(*keys, "method").agg(pl.col("seconds").median())
    ar = timed.filter(pl.col("method") == AR).select(*keys, pl.col("seconds").alias("ar_seconds"))
    return timed.join(ar, on=keys).filter(pl.col("method") != AR)


def per_case_perturb(results: pl.DataFrame) -> pl.DataFrame:
    """Perturbation results -> the share of seeds that matched, per (case, corpus, framing, level, kind, rate)."""
    return results.group_by("case_id", "corpus", "framing", "level", "kind", "rate").agg(
        match=(pl.col("outcome") == "match").cast(pl.Float64).mean(), seeds=pl.len())


def per_case_pilot(records: pl.DataFrame) -> pl.DataFrame:
    """Pilot records -> the share of adapter seeds whose decode matched, per (phase, split, mode, case, kind, position).
    The base model's rows carry no seed (null): they are one value already."""
    return records.group_by("phase", "split", "mode", "case_id", "kind", "position").agg(
        match=pl.col("exact_match").fill_null(False).cast(pl.Float64).mean(), seeds=pl.len())


SPECS: dict[str, TableSpec] = {
    "case_costs": TableSpec("case_costs", ("case_id", "corpus", "framing", "level", "kernel_source", "baseline",
                                           "gold_tokens", "copied_tokens", "regen", "program_ideal", "program_overhead"),
                            ("case_id", "corpus", "framing", "level", "kernel_source", "baseline"), lambda f: f),
    "perturb": TableSpec("perturb", ("case_id", "corpus", "framing", "level", "kind", "rate", "seed", "outcome"),
                         ("case_id", "corpus", "framing", "level", "kind", "rate"), per_case_perturb),
    "pilot": TableSpec("pilot", ("phase", "seed", "split", "mode", "case_id", "kind", "position", "exact_match"),
                       ("phase", "split", "mode", "case_id", "kind", "position"), per_case_pilot),
    "e2e": TableSpec("e2e", ("model", "corpus", "case_id", "method", "seconds"),
                     ("model", "corpus", "case_id", "method"), per_case_e2e),
    "rivals": TableSpec("rivals", ("kernel_source", "corpus", "case_id", "method", "seconds"),
                        ("kernel_source", "corpus", "case_id", "method"),
                        lambda f: f.select("kernel_source", "corpus", "case_id", "method", "seconds")),
}


# ---------------------------------------------------------------- reading runs

def _git(args: list[str], cwd: Path) -> str | None:
    """`git ARGS`'s output in `cwd` (analysis.pipeline.repo), None when it fails."""
    done = git(cwd, *args)
    return done.text if done.ok else None


def resolve_revision(spec: str, repo: Path = Path(".")) -> str | None:
    """A commit for a git revision or a `dvc exp` name (refs/exps/**/<name>), else None."""
    if spec.startswith("-"):
        return None
    commit = _git(["rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"], repo)
    if commit:
        return commit
    refs = _git(["for-each-ref", "--format=%(refname) %(objectname)", "refs/exps"], repo) or ""
    for line in refs.splitlines():
        ref, _, sha = line.partition(" ")
        if ref.rsplit("/", 1)[-1] == spec:
            return sha
    return None


# Another run's files are data: a per-case table past this is not one this suite wrote (2,000,000 cases are far
# below it), and a params file past MAX_PARAMS_BYTES is not a params file
MAX_TABLE_BYTES = 1 << 30
MAX_PARAMS_BYTES = 4 << 20


def _too_large(size: int, limit: int, what: str) -> CompareError:
    return CompareError(f"{what}: {size:,} bytes, above the {limit:,} such a file may hold; not read")


def _parquet(data: bytes | Path, what: str) -> pl.DataFrame:
    import io

    try:
        return pl.read_parquet(data if isinstance(data, Path) else io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the named error
        raise CompareError(f"{what}: not a readable parquet file ({type(exc).__name__}: {exc})") from exc


def _read_folder(folder: Path, name: str) -> tuple[pl.DataFrame, str] | None:
    path = where(name, folder)
    if path is None:
        return None
    size = path.stat().st_size
    if size > MAX_TABLE_BYTES:  # checked before reading: polars reads the footer, not the whole file
        raise _too_large(size, MAX_TABLE_BYTES, str(path))
    return _parquet(path, str(path)), str(path.relative_to(folder))


def _read_dvc_cache(rev: str, path: Path, repo: Path) -> bytes | None:
    import dvc.api

    try:
        with dvc.api.open(str(path), repo=str(repo), rev=rev, mode="rb") as handle:
            data = handle.read(MAX_TABLE_BYTES + 1)
    except Exception:  # noqa: BLE001 - an output that revision did not produce (or not in the cache) is absent
        return None
    if len(data) > MAX_TABLE_BYTES:
        raise _too_large(len(data), MAX_TABLE_BYTES, f"{rev[:10]}:{path} (dvc cache)")
    return data


def _read_revision(commit: str, name: str, repo: Path) -> tuple[pl.DataFrame, str] | None:
    committed = committed_at(name, commit, repo)
    if committed is not None:
        return committed, f"{BY_NAME[name].committed} (committed)"
    data = _read_dvc_cache(commit, BY_NAME[name].source, repo)
    if data is None:
        return None
    return _parquet(data, f"{commit[:10]}:{BY_NAME[name].source}"), f"{BY_NAME[name].source} (dvc cache)"


def _params_text(text: str | bytes | None, what: str) -> dict | None:
    """A run's params, read as params files are (no anchors or aliases, no key twice, bounded depth): another
    run's params.yaml is data (nested aliases once expanded a small file past 4 GB). None when there is none;
    a file that is not a params file is a named error."""
    if text is None:
        return None
    if len(text) > MAX_PARAMS_BYTES:
        raise _too_large(len(text), MAX_PARAMS_BYTES, what)
    try:
        loaded = parse_params_text(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError as exc:
        raise CompareError(f"{what}: not UTF-8 text (byte {exc.start})") from None
    except ParamsError as exc:
        raise CompareError(f"{what}: {exc}") from None
    return loaded if isinstance(loaded, dict) else None


def _folder_params(folder: Path) -> tuple[dict | None, str]:
    """A run folder's params: the effective params its last run recorded (a `--out` run: params with --set
    applied), else a params.yaml there (a checkout), else not recorded."""
    for name in (EFFECTIVE_PARAMS, Path("params.yaml")):
        path = folder / name
        if path.is_file() and not path.is_symlink():
            if path.stat().st_size > MAX_PARAMS_BYTES:  # refused before it is read
                raise _too_large(path.stat().st_size, MAX_PARAMS_BYTES, str(path))
            params = _params_text(path.read_text(encoding="utf-8", errors="replace"), str(path))
            if params is not None:
                return params, str(path)
    return None, f"not recorded (no {EFFECTIVE_PARAMS} or params.yaml in the folder)"


def load_run(spec: str, repo: Path = Path(".")) -> Run:
    """A run folder, or a git revision / dvc experiment of the repository at `repo`."""
    folder = Path(spec)
    if folder.is_dir():
        found = {name: _read_folder(folder, name) for name in SPECS}
        where_text = f"folder {folder}"
        params, params_from = _folder_params(folder)
        index = folder / "reports/index.html"
        index = index if index.is_file() else None
        claim = folder / SERVING_CLAIM
        serving = serving_csv(claim.read_bytes()) if claim.is_file() and not claim.is_symlink() else None
    else:
        commit = resolve_revision(spec, repo)
        if commit is None:
            raise CompareError(f"{spec!r} is neither a run folder nor a git revision or dvc experiment of {repo.resolve()}")
        found = {name: _read_revision(commit, name, repo) for name in SPECS}
        where_text = f"revision {spec} ({commit[:10]})"
        params = _params_text(committed_bytes(Path("params.yaml"), commit, repo), f"{commit[:10]}:params.yaml")
        params_from = f"params.yaml at {commit[:10]}" if params is not None else "not recorded (no params.yaml there)"
        index = None
        data = committed_bytes(SERVING_CLAIM, commit, repo)
        serving = serving_csv(data) if data is not None else None
    tables = {k: v[0] for k, v in found.items() if v is not None}
    sources = {k: v[1] for k, v in found.items() if v is not None}
    if not tables:
        names = ", ".join(f"{BY_NAME[n].source} or {BY_NAME[n].committed}" for n in SPECS)
        hint = ("run the pipeline there first" if folder.is_dir() else
                "that revision has no committed per-case tables (reports/percase/, written by `copydecode percase`) "
                "and its data/ outputs are not in this repository's dvc cache: save runs with `dvc exp save` "
                "(which caches their outputs) before comparing")
        raise CompareError(f"{where_text}: none of the per-case tables ({names}); {hint}")
    return Run(spec, tables, where_text, sources, params, params_from, index, serving)


# ---------------------------------------------------------------- checking and pairing

def check_table(frame: pl.DataFrame, spec: TableSpec, run: str) -> pl.DataFrame:
    """The raw table reduced to one row per unit; a missing column is a named error."""
    missing = [c for c in spec.raw if c not in frame.columns]
    if missing:
        raise CompareError(f"{run}: the {spec.name} table lacks column(s) {missing} (it has {frame.columns}); "
                           f"rerun `copydecode {BY_NAME[spec.name].stage}` there")
    return spec.reduce(frame)


def _check_unique(frame: pl.DataFrame, keys: list[str], run: str, table: str) -> None:
    dup = frame.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise CompareError(f"{run}: {table} has {dup.height} duplicate rows on {keys}, e.g. {dup.row(0, named=True)}")


def pair_tables(a: pl.DataFrame, b: pl.DataFrame, keys: tuple[str, ...], labels: tuple[str, str],
                table: str) -> tuple[pl.DataFrame, tuple[int, int, list[str], list[str]]]:
    """Rows of both runs joined on every one of `keys` (columns suffixed _a/_b), and the case ids only one run
    has. A key column either run lacks, or whose type differs between the runs, is a named error."""
    for key in keys:
        absent = [label for frame, label in ((a, labels[0]), (b, labels[1])) if key not in frame.columns]
        if absent:
            raise CompareError(f"{table}: {', '.join(absent)} lacks the key column {key!r}; the runs cannot be paired "
                               "on their cases without it")
        if a[key].dtype != b[key].dtype:
            raise CompareError(f"{table}: the key column {key!r} is {a[key].dtype} in {labels[0]} but {b[key].dtype} "
                               f"in {labels[1]}; the two tables come from different writers")
    keys = list(keys)
    for frame, label in ((a, labels[0]), (b, labels[1])):
        _check_unique(frame, keys, label, table)
    values = [c for c in a.columns if c not in keys and c in b.columns]
    joined = a.select(*keys, *values).join(b.select(*keys, *values), on=keys, how="inner", suffix="_b",
                                           nulls_equal=True)
    # sorted: group_by and join orders vary, and the bootstrap's draws index rows (same runs, same CI)
    joined = joined.rename({c: f"{c}_a" for c in values}).sort(keys, nulls_last=True)
    ids_a, ids_b = set(a["case_id"].cast(pl.String)), set(b["case_id"].cast(pl.String))
    only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
    if joined.height == 0:
        raise CompareError(f"{table}: {labels[0]} and {labels[1]} share no rows; case ids only in "
                           f"{labels[0]}: {only_a[:NAMED_IDS]}, only in {labels[1]}: {only_b[:NAMED_IDS]}")
    return joined, (len(only_a), len(only_b), only_a[:NAMED_IDS], only_b[:NAMED_IDS])


PAPER, EVERY = "paper", "every"  # a figure's pooled row: the paper's corpora (with an `_all` figure), or every case


def _groups(frame: pl.DataFrame, by: str = "corpus", pool: str = PAPER) -> list[tuple[str, str, pl.DataFrame]]:
    """(name suffix, corpus, rows): per corpus, then `dvc metrics show`'s pools: with `pool` PAPER, `pooled` over the
    paper's corpora the run holds and an `_all` figure's `pooled` over every corpus; with EVERY, `pooled` over all
    rows (the e2e sample, the pilot's splits). A pool is given when there are several corpora."""
    out = [("", str(name), rows) for (name,), rows in frame.group_by(by)]
    out.sort(key=lambda item: item[1])
    if len(out) < 2:
        return out
    if pool == EVERY:
        return out + [("", POOLED, frame)]
    paper = paper_cases(frame) if by == "corpus" else frame.clear()
    return out + ([("", POOLED, paper)] if paper.height else []) + [(POOL_ALL_SUFFIX, POOLED, frame)]


def _named(figure: str, suffix: str) -> str:
    """`cov_line` + `_all` + `_pct`: the pool before the unit, as the metrics rows spell it."""
    for unit in (PERCENT, RATIO, COUNT):
        if figure.endswith(unit):
            return figure[: -len(unit)] + suffix + unit
    return figure + suffix


def _rng(seed: int, figure: str, corpus: str) -> np.random.Generator:
    """The bootstrap's generator of one figure and corpus: the same draws whatever else is compared."""
    return np.random.default_rng([seed, zlib.crc32(f"{figure}/{corpus}".encode())])


def _ratio_rows(figure: str, frame: pl.DataFrame, num: str, den: str, s: CompareSettings,
                by: str = "corpus", pool: str = PAPER, scale: float = 1.0) -> list[Difference]:
    """A ratio of sums per corpus and pool; `scale` 100 for a share shown in percent (`_pct`)."""
    rows = []
    for suffix, corpus, part in _groups(frame, by, pool):
        name = _named(figure, suffix)
        cols = [part[f"{c}_{r}"].cast(pl.Float64).to_numpy() for r in ("a", "b") for c in (num, den)]
        a, b = float(nonzero_ratio(cols[0].sum(), cols[1].sum())), float(nonzero_ratio(cols[2].sum(), cols[3].sum()))
        low, high = paired_bootstrap(*cols, s.resamples, _rng(s.seed, name, corpus), s.ci)
        significant = bool(np.isfinite(low) and (low > 0 or high < 0))
        rows.append(Difference(name, corpus, part.height, scale * a, scale * b, scale * (b - a), scale * low,
                               scale * high, None, significant))
    return rows


def _match_rows(figure: str, frame: pl.DataFrame, s: CompareSettings, by: str = "corpus",
                pool: str = PAPER) -> list[Difference]:
    """Exact match per corpus and pool, in percent (`_pct`), with the sign test."""
    rows = []
    for suffix, corpus, part in _groups(frame, by, pool):
        name = _named(figure, suffix)
        a, b = part["match_a"].cast(pl.Float64).to_numpy(), part["match_b"].cast(pl.Float64).to_numpy()
        ones = np.ones(a.size)
        low, high = paired_bootstrap(a, ones, b, ones, s.resamples, _rng(s.seed, name, corpus), s.ci)
        p = sign_test(a, b)
        significant = bool(p < s.alpha and np.isfinite(low) and (low > 0 or high < 0))
        rows.append(Difference(name, corpus, part.height, 100 * float(a.mean()), 100 * float(b.mean()),
                               100 * float(b.mean() - a.mean()), 100 * low, 100 * high, p, significant))
    return rows


def case_cost_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    part = pool_rows(joined, s.framing)
    rows: list[Difference] = []
    if part.height:  # coverage does not depend on the kernel: one source's rows
        first = sorted(part["kernel_source"].unique().to_list())[0]
        cov = part.filter((pl.col("kernel_source") == first) & (pl.col("baseline") == part.filter(
            pl.col("kernel_source") == first)["baseline"].min()))
        for (level,), rows_level in sorted(cov.group_by("level"), key=lambda g: g[0]):
            rows += _ratio_rows(f"cov_{level}{PERCENT}", rows_level, "copied_tokens", "gold_tokens", s, scale=100)
    line = part.filter(pl.col("level") == "line")
    loops = line.group_by("kernel_source").agg(pl.col("baseline").n_unique().alias("k"))
    several = set(loops.filter(pl.col("k") > 1)["kernel_source"].to_list())
    for (source, baseline), group in sorted(line.group_by("kernel_source", "baseline"), key=lambda g: g[0]):
        # the source named as in the headline rows (source_key; the AR loop only where a source has several)
        name = source_key(source) + (f"-{LOOP_KEYS.get(baseline) or baseline}" if source in several else "")
        for den, suffix in (("program_ideal", "ideal"), ("program_overhead", "dir")):
            rows += _ratio_rows(f"bound_{name}_{suffix}{RATIO}", group, "regen", den, s)
    return rows


def em_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    part = pool_rows(joined.filter((pl.col("kind") == "both") & ((pl.col("rate") - s.perturb_rate).abs() < 1e-9)),
                           s.framing)
    rows: list[Difference] = []
    for (level,), group in sorted(part.group_by("level"), key=lambda g: g[0]):
        rows += _match_rows(f"em_{level}{PERCENT}", group, s)
    return rows


def pilot_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    rows: list[Difference] = []
    for (mode, phase), group in sorted(joined.group_by("mode", "phase"), key=lambda g: (str(g[0][0]), str(g[0][1]))):
        rows += _match_rows(f"pilot_{mode}_{phase}{PERCENT}", group, s, by="split", pool=EVERY)
    return rows


def e2e_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    rows: list[Difference] = []
    for (model, method), group in sorted(joined.group_by("model", "method"), key=lambda g: (str(g[0][0]), str(g[0][1]))):
        if method in E2E_METHODS:
            rows += _ratio_rows(f"e2e_{slug(model)}_{E2E_METHODS[method]}{RATIO}", group, "ar_seconds", "seconds", s,
                                pool=EVERY)
    return rows


def rivals_rows(joined: pl.DataFrame, s: CompareSettings) -> list[Difference]:
    """Per kernel source: Copy-as-Decode's best deployable variant over the best rival, both chosen over every case
    of run A (summed seconds), paired per case: summed rival seconds over summed Copy-as-Decode seconds."""
    rows: list[Difference] = []
    for (source,), group in sorted(joined.group_by("kernel_source"), key=lambda g: str(g[0][0])):
        pair = best_pair(group)
        if pair is None:
            continue
        wide = (group.filter(pl.col("method").is_in(pair)).pivot(on="method", index=["case_id", "corpus"],
                                                                 values=["seconds_a", "seconds_b"]).drop_nulls())
        copy, rival = pair
        per_case = wide.select("case_id", "corpus", rival_a=f"seconds_a_{rival}", copy_a=f"seconds_a_{copy}",
                               rival_b=f"seconds_b_{rival}", copy_b=f"seconds_b_{copy}")
        rows += _ratio_rows(f"rivals_{source_key(source)}_best_ratio{RATIO}", per_case, "rival", "copy", s)
    return rows


def best_pair(group: pl.DataFrame) -> tuple[str, str] | None:
    """(Copy-as-Decode's fastest deployable method, the fastest rival) by summed seconds of run A."""
    totals = group.group_by("method").agg(pl.col("seconds_a").sum()).sort("seconds_a")
    roles = {m: parse_method(m).role for m in totals["method"].to_list()}
    copy = [m for m in totals["method"].to_list() if roles[m] == "copy"]
    rival = [m for m in totals["method"].to_list() if roles[m] == "rival"]
    return (copy[0], rival[0]) if copy and rival else None


FIGURES: dict[str, Callable[[pl.DataFrame, CompareSettings], list[Difference]]] = {
    "case_costs": case_cost_rows,
    "perturb": em_rows,
    "pilot": pilot_rows,
    "e2e": e2e_rows,
    "rivals": rivals_rows,
}


def _seed_note(table: str, joined: pl.DataFrame) -> str | None:
    if "seeds_a" not in joined.columns:
        return None
    a, b = joined["seeds_a"].max(), joined["seeds_b"].max()
    return None if a == b else f"{table}: A averages {a} seed(s) per case, B {b}; each case's value is its seed mean"


def _units(table: str, joined: pl.DataFrame, s: CompareSettings) -> int:
    """Paired units the figures of `table` bootstrap, each counted once per figure, per corpus and pooled."""
    if table == "case_costs":
        part = pool_rows(joined, s.framing)
        sources = max(1, part.select("kernel_source", "baseline").n_unique())
        return 2 * (part.height // sources + 2 * part.filter(pl.col("level") == "line").height)
    if table == "perturb":
        at = joined.filter((pl.col("kind") == "both") & ((pl.col("rate") - s.perturb_rate).abs() < 1e-9))
        return 2 * pool_rows(at, s.framing).height
    return 2 * joined.height


def work(paired: dict[str, pl.DataFrame], s: CompareSettings) -> int:
    """Bootstrap draws the comparison will make (resamples x paired units, summed over figures), stated
    before it starts."""
    return sum(_units(table, joined, s) for table, joined in paired.items()) * s.resamples


def compare_runs(a: Run, b: Run, s: CompareSettings, warn: Callable[[str], None] | None = None) -> Comparison:
    s = s.validate()
    out = Comparison(a, b, s)
    paired: dict[str, pl.DataFrame] = {}
    for table, spec in SPECS.items():
        if table not in a.tables or table not in b.tables:
            if table in a.tables or table in b.tables:
                out.missing.append(f"{table} ({'only ' + (a.label if table in a.tables else b.label)})")
            continue
        reduced = [check_table(run.tables[table], spec, run.label) for run in (a, b)]
        joined, unpaired = pair_tables(reduced[0], reduced[1], spec.keys, (a.label, b.label), table)
        out.unpaired[table] = unpaired
        paired[table] = joined
        note = _seed_note(table, joined)
        if note:
            out.notes.append(note)
    if not paired:
        raise CompareError(f"{a.label} and {b.label} have no per-case table in common "
                           f"(A: {sorted(a.tables)}, B: {sorted(b.tables)})")
    draws = work(paired, s)
    if warn is not None:
        warn(f"compare: {sum(f.height for f in paired.values()):,} paired rows in {len(paired)} table(s), "
             f"{s.resamples:,} resamples per figure: {draws / 1e6:,.0f}M bootstrap draws (about "
             f"{max(1, round(draws / DRAWS_PER_SECOND)):,} s)")
        if draws > LARGE_WORK:
            warn(f"compare: warning: that is a large bootstrap (about {draws / DRAWS_PER_SECOND / 60:,.1f} minutes); "
                 "`--resamples 200` gives a coarser CI in a tenth of the time")
    for table, joined in paired.items():
        out.rows += FIGURES[table](joined, s)
    serving = serving_differences(a, b)
    if serving:
        out.rows += serving
        out.notes.append("sv_ figures: the serving simulation's gains (reports/tables/serving_claim.csv), not per case: "
                         "A, B and B - A without a paired interval")
    return out


# ---------------------------------------------------------------- the command

def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-.") or "run"


@dataclass(frozen=True)
class CompareCommand:
    """`copydecode compare A B [--repo R] [--out DIR] [--resamples N]` with its statistics settings."""

    a: str
    b: str
    repo: Path       # the repository that revisions and experiments belong to
    out: Path        # DIR: writes DIR/compare.md, compare.html, compare.json
    stats: CompareSettings


def compare_settings(params: dict, resamples: int | None = None) -> CompareSettings:
    """CompareSettings from params `compare` (resamples, seed, ci, alpha; `resamples` overrides) and the headline slice."""
    known_keys(params, "compare", ["resamples", "seed", "ci", "alpha"])
    if resamples is not None and (isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1):
        raise ParamsError(f"--resamples must be an integer >= 1, got {resamples!r}")
    return CompareSettings(
        resamples=resamples if resamples is not None else positive_int(params, "compare.resamples"),
        seed=get(params, "compare.seed", int),
        ci=interval_level(params, "compare.ci"),
        alpha=interval_level(params, "compare.alpha"),
        framing=get(params, "headline.framing", str),
        perturb_rate=number(params, "headline.perturb_rate", lo=0.0, hi=1.0),
    ).validate()


# `copydecode compare`: its help line and what it reads and writes (the CLI's --help)
HELP = ("two runs' headline figures paired on one value per shared case: B - A, the relative change, a paired "
        "bootstrap CI (a sign test for exact match) and the params that differ -> "
        "runs/compare/A-vs-B/compare.{md,html,json}")
DESCRIPTION = ("Compare two runs: " + HELP + ". A run is a folder (its data/ outputs, else its committed per-case "
               "tables under reports/percase/), a git revision or a `dvc exp` name (its committed reports/percase/ "
               "tables, else its data/ outputs from the dvc cache; no checkout). It reads those per-case tables and "
               "params files of A and B and params `compare` and `headline`; it writes the comparison to the "
               "terminal and to DIR/compare.md, compare.html and compare.json. See docs/compare.md.")


def add_arguments(parser) -> None:
    """compare's own options (the CLI adds --params and --set)."""
    parser.add_argument("a", metavar="A", help="the baseline run: folder, git revision or dvc experiment")
    parser.add_argument("b", metavar="B", help="the run compared with it")
    parser.add_argument("--repo", default=".", help="repository that revisions and experiments belong to (default .)")
    parser.add_argument("--out", dest="compare_out", metavar="DIR", default=None,
                        help="the folder the comparison is written to: DIR/compare.md, compare.html and compare.json "
                             "(default runs/compare/A-vs-B)")
    parser.add_argument("--resamples", type=int, default=None, metavar="N",
                        help="bootstrap resamples per figure for this run (default: params compare.resamples); "
                             "the work grows with N x cases x figures")


def settings(params: dict, a: str | None = None, b: str | None = None, repo: str | None = None,
             compare_out: str | None = None, resamples: int | None = None) -> CompareCommand:
    """The command's settings: the two runs (required), the repository and the output folder (default
    runs/compare/<A>-vs-<B>), and params `compare`."""
    if not a or not b:
        raise CompareError("compare needs two runs: copydecode compare A B")
    out = Path(compare_out) if compare_out else Path("runs/compare") / f"{_slug(a)}-vs-{_slug(b)}"
    if out.exists() and not out.is_dir():
        raise CompareError(f"--out {out}: exists and is not a folder")
    return CompareCommand(a, b, Path(repo or "."), out, compare_settings(params, resamples))


def run(s: CompareCommand) -> None:
    """Compare s.a with s.b, write DIR/compare.{md,html,json}, print the markdown (stdout) and a one-line
    summary (stderr)."""
    def warn(message: str) -> None:
        print(message, file=sys.stderr)

    comparison = compare_runs(load_run(s.a, s.repo), load_run(s.b, s.repo), s.stats, warn)
    markdown = to_markdown(comparison)
    paths = {suffix: s.out / f"compare.{suffix}" for suffix in ("md", "html", "json")}
    write_text(markdown, paths["md"])
    write_text(to_html(comparison, paths["html"].parent), paths["html"])
    write_json(to_json(comparison), paths["json"])
    print(markdown)
    significant = sum(r.significant for r in comparison.rows)
    warn(f"compare: {significant} of {len(comparison.rows)} figures differ significantly; wrote "
         f"{paths['md']}, {paths['html'].name} and {paths['json'].name}")
