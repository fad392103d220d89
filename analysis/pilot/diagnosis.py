"""Why a pilot run's held-out programs are wrong, read without a model (torch-free): each decoded
held-out program beside its gold line-level oracle program (`range_errors`), the diagnosis in words
counted from those rows and naming the run it comes from (`diagnosis`), written together
(`write_diagnosis`: range_errors.csv, and range_errors.md = the text, then the table).

The pilot stage writes it for its own run (reports/pilot/range_errors.{csv,md}; a preset run under
data/pilot/<preset>/); `copydecode pilot-sweep --diagnose RECORDS` rewrites it from a records file.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError
from analysis.pipeline.io import markdown_table, write_csv, write_text
from analysis.pilot.data import run_task


def _ranges(program: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r'<copy lines="(\d+)-(\d+)"/>', program or "")]


def _gens(program: str) -> list[str]:
    return re.findall(r"<gen>(.*?)</gen>", program or "", flags=re.S)


RANGE_ERRORS_SCHEMA = {"seed": pl.Int64, "case_id": pl.Utf8, "kind": pl.Utf8, "site_line": pl.Int64,
                       "gold_ranges": pl.Utf8, "ranges": pl.Utf8, "first_end_off": pl.Int64, "copies_off": pl.Int64,
                       "ranges_exact": pl.Boolean, "gen_exact": pl.Boolean, "exact_match": pl.Boolean}


def range_errors(records: pl.DataFrame, cases) -> pl.DataFrame:
    """One row per decoded held-out program ("after", program mode): gold and predicted copy ranges, the
    first copy's end (predicted - gold), copies missing (-) or extra (+), ranges and gen text exactly right."""
    gold = {c.case_id: c for c in cases}
    rows = []
    decoded = records.filter((pl.col("phase") == "after") & (pl.col("mode") == "program")
                             & (pl.col("split") == "heldout") & pl.col("error").is_null())
    for r in decoded.iter_rows(named=True):
        case = gold.get(r["case_id"])
        if case is None:
            raise CorpusError(f"pilot diagnosis: {r['case_id']} is not a held-out case of the params' pilot data")
        want, got = _ranges(case.program), _ranges(r["program"])
        rows.append({"seed": r["seed"], "case_id": r["case_id"], "kind": case.kind, "site_line": case.site_line,
                     "gold_ranges": str(want), "ranges": str(got),
                     "first_end_off": got[0][1] - want[0][1] if got and want else None,
                     "copies_off": len(got) - len(want), "ranges_exact": got == want,
                     "gen_exact": _gens(r["program"]) == _gens(case.program), "exact_match": r["exact_match"]})
    return pl.DataFrame(rows, schema=RANGE_ERRORS_SCHEMA)


def _count(flags: list[bool]) -> int:
    return sum(bool(f) for f in flags)


def diagnosis(frame: pl.DataFrame, m: dict, records: Path, metrics: Path, writer: str | None = None) -> str:
    """The diagnosis of one run in words, every figure counted from `frame` (range_errors) and the run's
    facts (model, task, steps, LoRA method) read from its metrics `m`: the text range_errors.md opens with.
    `writer` names the command that writes it (default: `copydecode pilot-sweep --diagnose <records>`)."""
    lines = []
    for seed in sorted(set(frame["seed"].to_list())):
        rows = frame.filter(pl.col("seed") == seed)
        n = rows.height
        ranges, gens = rows["ranges_exact"].to_list(), rows["gen_exact"].to_list()
        off = [v for v in rows["first_end_off"].to_list() if v is not None]
        copies = rows["copies_off"].to_list()
        lines.append(
            f"- program seed {seed}, {n} held-out programs: exact match {_count(rows['exact_match'].to_list())}/{n}; "
            f"copy ranges exactly right {_count(ranges)}/{n}, gen text exactly right {_count(gens)}/{n}, "
            f"both {_count([a and b for a, b in zip(ranges, gens)])}/{n}. The first copy's end is right in "
            f"{sum(v == 0 for v in off)}, off by one or two lines in {sum(1 <= abs(v) <= 2 for v in off)} "
            f"(too short in {sum(-2 <= v < 0 for v in off)}, too long in {sum(0 < v <= 2 for v in off)}), further off "
            f"in {sum(abs(v) > 2 for v in off)}, with no copy to compare in {n - len(off)}; copies missing in "
            f"{sum(c < 0 for c in copies)}, extra in {sum(c > 0 for c in copies)}.")
    writer = writer or f"`copydecode pilot-sweep --diagnose {records}`"
    return (f"# Why the held-out programs are wrong\n\nWritten by {writer} "
            f"from the run's records ({records}) and its metrics ({metrics}): {m.get('model', '?')}, task "
            f"{run_task(m)}, {m.get('steps', '?')} steps; {m.get('method', '?')}. Each decoded held-out program "
            "beside its gold line-level oracle program (one row per program below).\n\n"
            + ("\n".join(lines) or "No held-out program was decoded by a program adapter.") + "\n\n")


def check_same_run(frame: pl.DataFrame, m: dict, records: Path, metrics: Path) -> None:
    """Refuse records and metrics of different runs: each seed's exact matches must be the metrics' count."""
    recorded = m.get("heldout_em_after") or {}
    counted = {str(seed): _count(frame.filter(pl.col("seed") == seed)["exact_match"].to_list())
               for seed in sorted(set(frame["seed"].to_list()))}
    differ = {seed: (k, recorded.get(seed)) for seed, k in counted.items() if recorded.get(seed) != k}
    if differ:
        raise CorpusError(f"pilot diagnosis: {records} and {metrics} come from different runs (held-out exact matches "
                          f"per seed, records vs metrics: {differ})")




def write_diagnosis(frame: pl.DataFrame, m: dict, records: Path, metrics: Path, out: Path,
                    writer: str | None = None) -> None:
    """`out`.csv (the rows) and `out`.md (the diagnosis text, then the rows)."""
    write_csv(frame, out.with_suffix(".csv"))
    write_text(diagnosis(frame, m, records, metrics, writer) + markdown_table(frame, 3), out.with_suffix(".md"))
