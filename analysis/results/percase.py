"""The committed per-case tables of a run (reports/percase/), and reading a per-case table back.

The pipeline's per-case outputs live under data/, which DVC tracks and git ignores; with no DVC
remote a fresh clone has none of them. The `percase` stage copies each one, recompressed, into
reports/percase/<name>.parquet (committed with the reports), writes samples.jsonl (one line per case
and method, in the spirit of lm-eval's `--log_samples`) and a manifest (rows, bytes, and the sha256 of
the data/ file each copy came from). So `copydecode compare HEAD~1 HEAD` and the explorer work on a
clone that never ran `dvc repro`.

`read_table(name)` is the one way to read a per-case table in a workspace: data/ when the stage's
output is there (this run), else the committed copy (the last committed run), else a named error.
`committed_at(name, rev)` reads the committed copy of a git revision without a checkout.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import polars as pl

from analysis.errors import MissingOutputError, ParamsError
from analysis.pipeline.repo import git
from analysis.rivals.families.ar import AR
from analysis.rivals.families.copy import IDEAL
from analysis.rivals.methods import Method, canonical, parse_method
from analysis.layout import (CASE_COSTS, CASES, E2E_MEASUREMENTS, PER_CASE, PERCASE, PERTURB_RESULTS, PILOT_RECORDS,
                             PROGRAMS, RIVALS_PERCASE, SPANS)


@dataclass(frozen=True)
class PerCaseTable:
    name: str     # reports/percase/<name>.parquet
    source: Path  # the stage output under data/ it copies
    stage: str    # the stage that writes `source`
    keys: tuple[str, ...]  # the columns that identify a row (checked unique when the copy is written)

    @property
    def committed(self) -> Path:
        return PERCASE / f"{self.name}.parquet"


TABLES: tuple[PerCaseTable, ...] = (
    PerCaseTable("cases", CASES, "corpora", ("case_id", "framing")),
    PerCaseTable("programs", PROGRAMS, "programs", ("case_id", "framing", "level")),
    PerCaseTable("spans", SPANS, "spans", ("case_id", "framing", "level", "op_index")),
    PerCaseTable("coverage", PER_CASE, "spans", ("case_id", "framing", "level")),
    PerCaseTable("case_costs", CASE_COSTS, "bounds", ("case_id", "framing", "level", "kernel_source", "baseline")),
    PerCaseTable("perturb", PERTURB_RESULTS, "perturb", ("case_id", "framing", "level", "kind", "rate", "seed")),
    PerCaseTable("e2e", E2E_MEASUREMENTS, "e2e", ("model", "case_id", "method", "repeat")),
    PerCaseTable("pilot", PILOT_RECORDS, "pilot", ("phase", "seed", "split", "mode", "case_id", "kind", "position")),
    PerCaseTable("rivals", RIVALS_PERCASE, "rivals", ("kernel_source", "case_id", "framing", "method")),
)
BY_NAME = {t.name: t for t in TABLES}


def spec(name: str) -> PerCaseTable:
    if name not in BY_NAME:
        raise ParamsError(f"no per-case table {name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[name]


# ---------------------------------------------------------------- reading back

def where(name: str, root: Path = Path(".")) -> Path | None:
    """The file `read_table` reads for `name` under `root`: data/ first, then the committed copy."""
    table = spec(name)
    for path in (Path(root) / table.source, Path(root) / table.committed):
        if path.is_file():
            return path
    return None


def read_table(name: str, root: Path = Path(".")) -> pl.DataFrame:
    """Per-case table `name`: this run's data/ output, else the committed copy under reports/percase/."""
    table = spec(name)
    path = where(name, root)
    if path is None:
        raise MissingOutputError(f"{table.source} not found; run `copydecode {table.stage}` (or `dvc repro`) first "
                                 f"(nor is there a committed copy, {table.committed})")
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises ComputeError/OSError variants for damaged files
        raise MissingOutputError(f"{path} is not a readable parquet file ({type(exc).__name__}: {exc}); "
                                 f"rerun `copydecode {table.stage}`") from exc


def committed_bytes(path: Path, rev: str, repo: Path = Path(".")) -> bytes | None:
    """The bytes of the tracked file `path` at git revision `rev` (`git show`), None when it has none."""
    done = git(repo, "show", f"{rev}:{Path(path).as_posix()}")
    return done.stdout if done.ok else None


def committed_at(name: str, rev: str, repo: Path = Path(".")) -> pl.DataFrame | None:
    """The committed copy of per-case table `name` at git revision `rev`, None when that revision has none."""
    data = committed_bytes(spec(name).committed, rev, repo)
    if data is None:
        return None
    try:
        return pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - a damaged committed file is named, not skipped
        raise MissingOutputError(f"{rev}:{spec(name).committed} is not a readable parquet file "
                                 f"({type(exc).__name__}: {exc})") from exc


# ---------------------------------------------------------------- samples.jsonl

SIGNIFICANT = 6  # digits a float keeps in samples.jsonl (the parquet copies keep full precision)


def number(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return float(f"{value:.{SIGNIFICANT}g}") if isinstance(value, float) else value


def ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def oracle_lines(programs: pl.DataFrame, costs: pl.DataFrame | None, perturb: pl.DataFrame | None) -> Iterator[dict]:
    """One line per (case, framing, level): the oracle program, its coverage, its bound under every kernel
    source and AR loop (ideal and with directive tokens decoded), and its exact match under span noise at
    every rate (kind both; the share of seeds that matched)."""
    keys = ["case_id", "framing", "level"]
    bounds: dict[tuple, dict] = {}
    cover: dict[tuple, tuple] = {}
    if costs is not None:
        for row in costs.sort(*keys, "kernel_source", "baseline").iter_rows(named=True):
            key = (row["case_id"], row["framing"], row["level"])
            cover.setdefault(key, (row["gold_tokens"], row["copied_tokens"]))
            bounds.setdefault(key, {})[f"{row['kernel_source']}/{row['baseline']}"] = {
                "ideal": number(ratio(row["regen"], row["program_ideal"])),
                "directives_decoded": number(ratio(row["regen"], row["program_overhead"])),
                "extrapolated_spans": row["extrapolated_spans"]}
    noise: dict[tuple, dict] = {}
    if perturb is not None:
        both = perturb.filter(pl.col("kind") == "both").group_by(*keys, "rate").agg(
            em=(pl.col("outcome") == "match").mean(), seeds=pl.len())
        for row in both.sort(*keys, "rate").iter_rows(named=True):
            noise.setdefault((row["case_id"], row["framing"], row["level"]), {})[f"{row['rate']:g}"] = {
                "exact_match": number(row["em"]), "seeds": row["seeds"]}
    for row in programs.sort("corpus", *keys).iter_rows(named=True):
        key = (row["case_id"], row["framing"], row["level"])
        gold, copied = cover.get(key, (None, None))
        yield {"task": "oracle", "case_id": row["case_id"], "corpus": row["corpus"], "framing": row["framing"],
               "method": Method("copy", level=row["level"], directives=IDEAL).name, "program": row["program"], "n_ops": row["n_ops"],
               "gold_tokens": gold, "copied_tokens": copied, "coverage": number(ratio(copied, gold)),
               "bound": bounds.get(key, {}), "em_under_span_noise": noise.get(key, {})}


def e2e_lines(measurements: pl.DataFrame) -> Iterator[dict]:
    """One line per (model, case, method) measured end to end: the median seconds over repeats, the same
    case's AR median and their ratio (the e2e stage's per-case speedup), and what the method emitted."""
    keys = ["model", "corpus", "case_id", "method"]
    per = canonical(measurements).group_by(keys).agg(
        seconds=pl.col("seconds").median(), repeats=pl.len(), forwards=pl.col("forwards").median(),
        tokens=pl.col("tokens").first(), predicted_seconds=pl.col("predicted_seconds").first(),
        directive_tokens=pl.col("directive_tokens").first(), gold_tokens=pl.col("gold_tokens").first(),
        prompt_tokens=pl.col("prompt_tokens").first(), lossless_ok=pl.col("lossless_ok").first())
    ar = per.filter(pl.col("method") == AR).select("model", "case_id", ar_seconds=pl.col("seconds"))
    per = per.join(ar, on=["model", "case_id"], how="left").sort(keys)
    for row in per.iter_rows(named=True):
        yield {"task": "e2e", "case_id": row["case_id"], "corpus": row["corpus"], "model": row["model"],
               "method": row["method"], "seconds_median": row["seconds"], "repeats": row["repeats"],
               "ar_seconds_median": row["ar_seconds"],
               "speedup_over_ar": number(ratio(row["ar_seconds"], row["seconds"])),
               "predicted_seconds": number(row["predicted_seconds"]), "forwards_median": row["forwards"],
               "tokens": row["tokens"], "gold_tokens": row["gold_tokens"], "prompt_tokens": row["prompt_tokens"],
               "directive_tokens": row["directive_tokens"], "lossless_ok": row["lossless_ok"]}


def pilot_lines(records: pl.DataFrame) -> Iterator[dict]:
    """One line per pilot decode: the case, the adapter (phase, seed, mode), what it wrote and whether it matched."""
    keys = ["split", "case_id", "phase", "seed", "mode", "kind", "position"]
    for row in records.sort(keys, nulls_last=True).iter_rows(named=True):
        yield {"task": "pilot", "case_id": row["case_id"], "corpus": row["split"],
               "method": f"pilot_{row['mode']}_{row['phase']}", "phase": row["phase"], "seed": row["seed"],
               "mode": row["mode"], "kind": row["kind"], "exact_match": row["exact_match"], "valid": row["valid"],
               "error": row.get("error"), "program": row.get("program"), "output": row.get("output"),
               "seconds": number(row["seconds"])}


def sample_lines(tables: dict[str, pl.DataFrame]) -> list[str]:
    """samples.jsonl's lines from the per-case tables present (`TABLES` names); oracle lines need programs."""
    lines: list[dict] = []
    if "programs" in tables:
        lines += oracle_lines(tables["programs"], tables.get("case_costs"), tables.get("perturb"))
    if "e2e" in tables:
        lines += e2e_lines(tables["e2e"])
    if "pilot" in tables:
        lines += pilot_lines(tables["pilot"])

    return [json.dumps(line, sort_keys=True, ensure_ascii=False, allow_nan=False) for line in lines]


def rivals_lines(priced: pl.DataFrame) -> Iterator[dict]:
    """One line per case of the rivals stage: per kernel source, Copy-as-Decode's best deployable variant and the
    best rival over every case (by summed seconds: the pair of the pooled head-to-head), each one's speedup over AR
    on this case, and Copy-as-Decode over the rival here (rival seconds over Copy-as-Decode seconds)."""
    pairs = {}
    for (source,), rows in priced.group_by("kernel_source"):
        totals = rows.group_by("method").agg(pl.col("seconds").sum()).sort("seconds")["method"].to_list()
        copy = [m for m in totals if parse_method(m).role == "copy"]
        rival = [m for m in totals if parse_method(m).role == "rival"]
        if copy and rival:
            pairs[source] = (copy[0], rival[0])
    wanted = priced.filter(pl.struct("kernel_source", "method").map_elements(
        lambda r: r["method"] in pairs.get(r["kernel_source"], ()), return_dtype=pl.Boolean))
    by_case: dict[tuple, dict] = {}
    for row in wanted.sort("corpus", "case_id", "kernel_source").iter_rows(named=True):
        entry = by_case.setdefault((row["corpus"], row["case_id"], row["framing"]), {})
        copy, rival = pairs[row["kernel_source"]]
        side = entry.setdefault(row["kernel_source"], {"copy": copy, "rival": rival})
        key = "copy" if row["method"] == copy else "rival"
        side[f"{key}_seconds"] = number(row["seconds"])
        side[f"{key}_speedup_over_ar"] = number(row["speedup"])
    for (corpus, case_id, framing), sources in by_case.items():
        for side in sources.values():
            side["copy_over_rival"] = number(ratio(side.get("rival_seconds"), side.get("copy_seconds")))
        yield {"task": "rivals", "case_id": case_id, "corpus": corpus, "framing": framing,
               "method": "best Copy-as-Decode vs best rival", "by_kernel_source": sources}


def rivals_sample_lines(priced: pl.DataFrame) -> list[str]:
    """samples.jsonl's rivals lines (the percase stage appends them to the other tasks' lines)."""
    return [json.dumps(line, sort_keys=True, ensure_ascii=False, allow_nan=False) for line in rivals_lines(priced)]
