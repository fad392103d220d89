"""What the line oracle leaves out: moved lines.

The line oracle is diff-based (`analysis.oracle.covmax.line_oracle`: Myers' longest common subsequence), so
it copies lines in source order only. A block that moved, or a line the target repeats, is generated
even though the grammar could copy it (`<copy lines="6-10"/><copy lines="1-5"/>` is a valid program).
This module measures how much a move-aware line oracle would add: a target line that occurs anywhere
in the source can be copied (as a one-line span, in any order, as often as needed), so the share of
target lines and bytes that occur in the source is the ceiling of any line-level copy program.

`copydecode moves` reads data/corpora/cases.parquet (run `copydecode corpora` first) and writes
reports/tables/line_moves.{csv,md}: per corpus and framing, the diff-based and the move-aware share
of target lines and of target bytes, and the difference in percentage points.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.corpora.cases import Case, cases_from_frame, read_cases
from analysis.layout import CASES, TABLES
from analysis.text.diff import myers_matches
from analysis.text.lines import split_lines
from analysis.pipeline.io import write_table


@dataclass(frozen=True)
class LineMoves:
    lines: int          # target lines
    bytes: int          # target bytes (UTF-8)
    diff_lines: int     # lines the diff-based oracle copies
    diff_bytes: int
    move_lines: int     # lines a move-aware oracle could copy (the target line occurs in the source)
    move_bytes: int


def line_moves(source: str, target: str) -> LineMoves:
    src, tgt = split_lines(source), split_lines(target)
    copied = {j for _, j in myers_matches(src, tgt)}
    present = set(src)
    size = [len(line.encode("utf-8")) for line in tgt]
    movable = [j for j, line in enumerate(tgt) if line in present]
    return LineMoves(len(tgt), sum(size), len(copied), sum(size[j] for j in copied),
                     len(movable), sum(size[j] for j in movable))


def moves_table(cases: list[Case]) -> pl.DataFrame:
    rows = [{"corpus": c.corpus, "framing": c.framing, **line_moves(c.source, c.target).__dict__} for c in cases]
    frame = pl.DataFrame(rows, schema={"corpus": pl.String, "framing": pl.String, "lines": pl.Int64,
                                       "bytes": pl.Int64, "diff_lines": pl.Int64, "diff_bytes": pl.Int64,
                                       "move_lines": pl.Int64, "move_bytes": pl.Int64})
    return (frame.group_by("corpus", "framing")
            .agg(pl.len().alias("n_cases"), pl.col("lines", "bytes", "diff_lines", "diff_bytes",
                                                   "move_lines", "move_bytes").sum())
            .with_columns(diff_line_share=pl.col("diff_lines") / pl.col("lines"),
                          move_line_share=pl.col("move_lines") / pl.col("lines"),
                          diff_byte_share=pl.col("diff_bytes") / pl.col("bytes"),
                          move_byte_share=pl.col("move_bytes") / pl.col("bytes"))
            .with_columns(added_bytes_pp=(pl.col("move_byte_share") - pl.col("diff_byte_share")) * 100)
            .select("corpus", "framing", "n_cases", "diff_line_share", "move_line_share", "diff_byte_share",
                    "move_byte_share", "added_bytes_pp")
            .sort("corpus", "framing"))


# `copydecode moves`: its help line and what it reads and writes (the CLI's --help)
HELP = "what the diff-based line oracle leaves out (moved lines)"
READS_WRITES = "reads data/corpora/cases.parquet; it writes reports/tables/line_moves.*"
READS_PARAMS = False  # the diff oracle has no settings: --params and --set are refused, not ignored


def add_arguments(parser) -> None:
    """`copydecode moves` takes no options of its own."""


def command(args) -> int:
    """Write reports/tables/line_moves.{csv,md} from data/corpora/cases.parquet and print the table."""
    table = moves_table(cases_from_frame(read_cases(CASES)))
    write_table(table, TABLES / "line_moves")
    print(table)
    return 0
