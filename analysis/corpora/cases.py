"""The case schema: one row per case and framing, shared by every corpus, and its one reader.

`cases.parquet` schema (one row per case and framing):

    case_id   str  "<corpus>/<n>": unique within a corpus; (case_id, framing) is the row key
    corpus    str  "HEvalFix-Py", "HEvalFix-JS", ... or "ProbeEdit-S" (a stand-in, see corpora/probeedit.py)
    language  str  "python", "js", "cpp", "go", "java", "rust"
    framing   str  HEvalFix: "body" | "decl" | "prompt"; ProbeEdit-S: "unit"
    source    str  the input the model edits
    target    str  the gold output
    instruction str|null  the edit request in words: HEvalFix the dataset's `instruction`, CommitEdits
                   the commit subject, pairs the user's field; null where the corpus has none
                   (ProbeEdit-S)

A builder returns `Case`s; `cases_frame` turns them into the checked table the corpora stage
writes, and `read_cases` is how every later stage reads it back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError

CASES_SCHEMA: dict[str, type[pl.DataType]] = {
    "case_id": pl.String,
    "corpus": pl.String,
    "language": pl.String,
    "framing": pl.String,
    "source": pl.String,
    "target": pl.String,
    "instruction": pl.String,
}
# every column but `instruction` must be set in every row
REQUIRED_COLUMNS: tuple[str, ...] = ("case_id", "corpus", "language", "framing", "source", "target")


@dataclass(frozen=True)
class Case:
    case_id: str
    corpus: str
    language: str
    framing: str
    source: str
    target: str
    instruction: str | None = None  # the edit request, when the corpus has one (HEvalFix, commits, pairs)


# Peak memory of the per-case stages per byte of one case's text (programs: 4.4 GB for a 22 MB target),
# and per line on top (a 6.4 MB source of 700,000 lines peaked at 4.6 GB in programs, 3.5x the bytes alone).
MEMORY_PER_TEXT_BYTE = 200
MEMORY_PER_LINE = 4_800
TYPICAL_LINE_BYTES = 40  # of source code: the memory budget of corpora.max_text_bytes assumes lines this long


def text_memory(size: int, lines: int) -> int:
    """The per-case stages' peak memory for one text of `size` bytes in `lines` lines (bytes)."""
    return size * MEMORY_PER_TEXT_BYTE + lines * MEMORY_PER_LINE


def check_text_sizes(frame: pl.DataFrame, max_text_bytes: int) -> None:
    """Refuse a case whose source or target is above `max_text_bytes` (params corpora.max_text_bytes),
    or whose many short lines would need more memory than a text of that many bytes in lines of
    TYPICAL_LINE_BYTES (the limit is a memory budget). The error names the case, its size and lines and
    the memory the per-case stages would need for it."""
    budget = text_memory(max_text_bytes, max_text_bytes // TYPICAL_LINE_BYTES)
    for column in ("source", "target"):
        sizes = frame[column].str.len_bytes()
        lines = frame[column].str.count_matches("\n", literal=True)
        need = sizes.cast(pl.Int64) * MEMORY_PER_TEXT_BYTE + lines.cast(pl.Int64) * MEMORY_PER_LINE
        over = (sizes > max_text_bytes) | (need > budget)
        if over.any():
            row = int(over.arg_true()[0])
            size, count = int(sizes[row]), int(lines[row])
            why = (f", above corpora.max_text_bytes = {max_text_bytes:,}" if size > max_text_bytes else
                   f" in {count:,} lines, more memory than a text of corpora.max_text_bytes = {max_text_bytes:,} "
                   f"bytes in {TYPICAL_LINE_BYTES}-byte lines may take ({budget / 1e9:.1f} GB)")
            raise CorpusError(f"case {frame['case_id'][row]!r}: its {column} holds {size:,} bytes{why} "
                              f"({int(over.sum())} case(s) over); the per-case stages would need about "
                              f"{text_memory(size, count) / 1e9:.1f} GB of memory for it; raise the limit in params "
                              "if this machine has that, or split the edit")


def cases_frame(cases: list[Case], max_text_bytes: int | None = None) -> pl.DataFrame:
    frame = pl.DataFrame(
        {name: [getattr(c, name) for c in cases] for name in CASES_SCHEMA}, schema=CASES_SCHEMA
    )
    check_no_nulls(frame, "the cases table")
    if max_text_bytes is not None:
        check_text_sizes(frame, max_text_bytes)
    empty = frame.filter(pl.col("target") == "")
    if empty.height:  # one rule for every stage: refused here, so no stage counts a case another drops
        raise CorpusError(f"{empty.height} case(s) have an empty target, e.g. {empty['case_id'].to_list()[:5]}: "
                          "there is nothing to generate, so coverage and speedup are undefined (0 of 0 tokens); "
                          "drop these cases")
    dupes = frame.group_by("case_id", "framing").len().filter(pl.col("len") > 1)
    if dupes.height:
        raise CorpusError(f"duplicate case ids: {dupes['case_id'].to_list()[:5]}: the same input is built twice "
                          "(e.g. a --repo or --pairs that params.yaml already lists; `copydecode corpora --only` "
                          "builds just the command line's inputs), or two inputs share a corpus name (set `name`)")
    return frame


def read_parquet_file(path: Path) -> pl.DataFrame:
    """A parquet file's table; a truncated or garbage file is a CorpusError naming it."""
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError, ValueError) as exc:
        raise CorpusError(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from None


def check_no_nulls(frame: pl.DataFrame, where: str) -> None:
    for column in REQUIRED_COLUMNS:
        nulls = frame[column].is_null()
        if nulls.any():
            row = int(nulls.arg_true()[0])
            case_id = frame["case_id"][row] if column != "case_id" else None
            raise CorpusError(
                f"{where}: column {column!r} is null in {int(nulls.sum())} row(s), first at row {row}"
                + (f" (case {case_id!r})" if case_id is not None else "")
            )


def read_cases(path: str | os.PathLike) -> pl.DataFrame:
    """cases.parquet, checked: every column of CASES_SCHEMA, strings, no null but `instruction`."""
    path = check_cases_file(path)
    return checked_cases(read_parquet_file(path), path)


def check_cases_file(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: no cases table; run `copydecode corpora` (or `dvc repro`) first")
    return path


def checked_cases(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    """A cases table (whole or one shard) checked as `read_cases` checks it."""
    missing = [c for c in CASES_SCHEMA if c not in frame.columns]
    if missing:
        raise CorpusError(f"{path}: missing columns {missing}; rebuild it with `copydecode corpora`")
    wrong = {c: str(frame[c].dtype) for c in CASES_SCHEMA if frame[c].dtype not in (pl.String, pl.Null)}
    if wrong:
        raise CorpusError(f"{path}: columns must hold strings, got {wrong}")
    frame = frame.with_columns(pl.col(c).cast(pl.String) for c in CASES_SCHEMA)
    check_no_nulls(frame, str(path))
    return frame


def cases_from_frame(frame: pl.DataFrame) -> list[Case]:
    return [Case(**{k: row[k] for k in CASES_SCHEMA}) for row in frame.iter_rows(named=True)]
