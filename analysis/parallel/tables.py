"""Reading the pipeline's case and program tables, for the stages that start from them: whole
(`joined_programs`) or shard by shard (`program_shards`, `case_shards`: analysis.parallel.shards)."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from analysis.corpora.cases import check_cases_file, checked_cases, read_cases
from analysis.pipeline.digest import check_fresh
from analysis.errors import CorpusError
from analysis.pipeline.io import read_parquet
from analysis.layout import CASES, PROGRAMS
from analysis.parallel.shards import iter_frames, iter_joined_programs

PROGRAM_COLUMNS = {"case_id", "corpus", "framing", "level", "program"}


def read_programs() -> pl.DataFrame:
    """programs.parquet, refused when the cases it was built from have changed since (a stale input)."""
    frame = read_parquet(PROGRAMS, "copydecode programs", CorpusError)
    check_fresh(PROGRAMS, "copydecode programs")
    _check_program_columns(frame.columns)
    return frame


def _check_program_columns(columns) -> None:
    missing = PROGRAM_COLUMNS - set(columns)
    if missing:
        raise CorpusError(f"{PROGRAMS}: missing columns {sorted(missing)}; rerun `copydecode programs`")


def joined_programs() -> pl.DataFrame:
    """programs.parquet with each case's source and target joined on."""
    cases = read_cases(CASES).select("case_id", "framing", "source", "target")
    programs = read_programs()
    joined = programs.join(cases, on=["case_id", "framing"], how="left", validate="m:1")
    orphans = joined.filter(pl.col("source").is_null())
    if orphans.height:
        raise CorpusError(f"{PROGRAMS}: {orphans.height} programs name cases not in {CASES} "
                          f"(e.g. {orphans['case_id'][0]!r}); rerun `copydecode programs`")
    return joined


def case_shards(shard: int, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """cases.parquet, `shard` cases at a time, each frame checked as `read_cases` checks the whole."""
    check_cases_file(CASES)
    for frame in iter_frames(CASES, shard):
        frame = checked_cases(frame, CASES)
        yield frame if columns is None else frame.select(columns)


def program_shards(shard: int) -> Iterator[pl.DataFrame]:
    """`joined_programs()`'s rows in its order, about `shard` cases at a time (the same checks: a stale or
    incomplete programs table, a program whose case is missing)."""
    check_cases_file(CASES)
    _check_program_columns(_programs_schema())
    check_fresh(PROGRAMS, "copydecode programs")
    return iter_joined_programs(CASES, PROGRAMS, shard)


def _programs_schema() -> list[str]:
    if not PROGRAMS.is_file():
        raise CorpusError(f"{PROGRAMS} not found; run `copydecode programs` (or `dvc repro`) first")
    try:
        return list(pl.scan_parquet(PROGRAMS).collect_schema())
    except Exception as exc:
        raise CorpusError(f"{PROGRAMS} is not a readable parquet file ({type(exc).__name__}: {exc}); "
                          "rerun `copydecode programs`") from exc
