"""Bounded memory: the per-case stages read their inputs and write their outputs in shards of cases.

A stage that holds every case at once (texts, token ids, programs, span rows) needs memory that grows
with the corpus; a million commits do not fit. Instead:

  write   `ShardWriter` appends one shard's table at a time to a parquet file (a row group per shard, or
          row groups of `row_group_rows`: cases.parquet uses CASE_ROW_GROUP), atomically (analysis.pipeline.io: the file appears whole when the
          writer closes), with the same key-value metadata (input digests) as a one-shot write.
  read    `iter_frames(path, rows)` scans a parquet file lazily with polars (`scan_parquet` + `slice`,
          which reads only the row groups a slice touches) and yields frames of at most `rows` rows.
  join    `iter_joined_programs(cases, programs, shard)` yields programs.parquet's rows with their case's source
          and target, shard by shard: a merge of the two files in their common order (the programs
          stage writes each case's programs in cases.parquet's order), so neither file is read whole.

Every per-case result depends on its case alone, so the stages' tables are the same for any shard
size (tests/analysis/parallel/test_shards.py checks them against the one-shard run); a stage's summary tables are built
from small per-case rows (a few numbers per case) gathered across shards.

What still grows with the corpus (numbers and ids, no texts, tokens or spans): spans' per-case
coverage rows, optimal's per-case costs (per kernel and oracle: the bootstrap resamples cases),
perturb's per-draw results, the corpora stage's set of case ids (to refuse a duplicate). The corpora
stage holds one build's cases at a time: one repository, one pairs file, one HumanEvalPack language.
  spill   `Spill` writes such per-shard rows to parquet files in a temporary folder as each shard
          ends (spans' per-case coverage rows, optimal's per-case costs and copy counts), so the shard
          loop holds none of them; they are read back (`scan_parquet`) once, for the summary that needs
          them all (a bootstrap over cases), and the folder is removed when the stage ends.

Param: `parallel.shard_cases` (cases per shard).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError, ParamsError
from analysis.pipeline.io import atomic_path
from analysis.pipeline.params import get

CASE_ROW_GROUP = 1000  # cases.parquet's row groups (storage layout only: a shard read touches a few)


def shard_cases(params: dict) -> int:
    """`parallel.shard_cases` from params: a positive integer."""
    value = get(params, "parallel.shard_cases")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParamsError(f"params: 'parallel.shard_cases' must be a positive integer, got {value!r}")
    return value


def parquet_rows(path: str | Path) -> int:
    """Rows of a parquet file, from its footer (no data read); an unreadable file is a CorpusError naming it."""
    try:
        return int(pl.scan_parquet(path).select(pl.len()).collect().item())
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError, ValueError) as exc:
        raise CorpusError(f"{path}: not a readable parquet file ({type(exc).__name__}: {exc})") from None


def iter_frames(path: str | Path, rows: int, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """`path`'s rows in order, `rows` at a time (the last frame may be shorter; none for an empty file)."""
    if rows < 1:
        raise ParamsError(f"shards: rows per frame must be >= 1, got {rows}")
    total = parquet_rows(path)
    scan = pl.scan_parquet(path)
    if columns is not None:
        scan = scan.select(columns)
    for start in range(0, total, rows):
        yield scan.slice(start, rows).collect()


class ShardWriter:
    """Append frames of one schema to a parquet file, keeping only the current frame in memory.

    Used as a context manager; the file replaces `path` atomically when the block ends without an
    error (inside `analysis.pipeline.io.output_set`, with the rest of the stage's outputs). An empty run writes
    the schema with no rows. `metadata`: key-value metadata, as `analysis.pipeline.io.write_parquet` takes."""

    def __init__(self, path: str | Path, schema: dict, metadata: dict[str, str] | None = None,
                 row_group_rows: int | None = None):
        self.path, self.schema, self.metadata = Path(path), schema, metadata
        self.row_group_rows = row_group_rows
        self.rows = 0
        self._stack: ExitStack | None = None
        self._writer = None
        self._arrow_schema = None

    def __enter__(self) -> ShardWriter:
        import pyarrow.parquet as pq

        self._stack = ExitStack()
        tmp = self._stack.enter_context(atomic_path(self.path))
        arrow = pl.DataFrame(schema=self.schema).to_arrow().schema
        if self.metadata:
            arrow = arrow.with_metadata({**(arrow.metadata or {}), **{k.encode(): v.encode() for k, v in self.metadata.items()}})
        self._arrow_schema = arrow
        self._writer = pq.ParquetWriter(tmp, arrow)
        return self

    def write(self, frame: pl.DataFrame) -> None:
        if list(frame.columns) != list(self.schema):
            raise ValueError(f"{self.path}: shard columns {frame.columns} are not the file's {list(self.schema)}")
        if frame.height == 0:
            return
        table = frame.cast(self.schema).to_arrow().cast(self._arrow_schema)
        self._writer.write_table(table, row_group_size=self.row_group_rows or frame.height)
        self.rows += frame.height

    def __exit__(self, kind, value, traceback) -> None:
        try:
            self._writer.close()
        finally:
            self._stack.__exit__(kind, value, traceback)


def iter_joined_programs(cases_path: str | Path, programs_path: str | Path, shard: int) -> Iterator[pl.DataFrame]:
    """programs.parquet's rows, in its order, with each case's source and target joined on (as
    `analysis.parallel.tables.joined_programs` gives them at once), about `shard` cases at a time.

    A merge of the two files: cases are read `shard` at a time, and the programs that follow in
    programs.parquet while they name a case of the current shard are joined to it. A program whose
    case is not met in that order (an orphan, or a programs file not in the cases' order) is an error
    naming the stage to rerun."""
    programs = _RowBuffer(iter_frames(programs_path, max(2 * shard, 1)))
    for cases in iter_frames(cases_path, shard, ["case_id", "framing", "source", "target"]):
        keys = cases.select("case_id", "framing")
        taken = programs.take_while_in(keys)
        if taken.height:
            yield taken.join(cases, on=["case_id", "framing"], how="left", validate="m:1")
    left, first = programs.rest()
    if left:
        raise CorpusError(f"{programs_path}: {left} programs name cases not in {cases_path}, or not in its "
                          f"order (e.g. {first!r}); rerun `copydecode programs`")


class _RowBuffer:
    """Rows of an iterator of frames, consumed from the front while their (case_id, framing) is in a key set."""

    def __init__(self, frames: Iterator[pl.DataFrame]):
        self.frames = frames
        self.buffer: pl.DataFrame | None = None
        self.done = False

    def _fill(self) -> bool:
        if self.done:
            return False
        frame = next(self.frames, None)
        if frame is None:
            self.done = True
            return False
        self.buffer = frame if self.buffer is None or self.buffer.height == 0 else pl.concat([self.buffer, frame])
        return True

    def take_while_in(self, keys: pl.DataFrame) -> pl.DataFrame:
        parts = []
        while True:
            if (self.buffer is None or self.buffer.height == 0) and not self._fill():
                break
            outside = (self.buffer.select("case_id", "framing").with_row_index("_row")
                       .join(keys, on=["case_id", "framing"], how="anti")["_row"])
            stop = self.buffer.height if outside.is_empty() else int(outside.min())
            parts.append(self.buffer.slice(0, stop))
            self.buffer = self.buffer.slice(stop)
            if self.buffer.height:  # met a program of a later case: this shard is complete
                break
        parts = [p for p in parts if p.height]
        if not parts:
            return self.buffer.clear() if self.buffer is not None else pl.DataFrame()
        return pl.concat(parts)

    def rest(self) -> tuple[int, str | None]:
        """How many rows are left unconsumed (read one frame at a time), and the first one's case_id."""
        rows = 0 if self.buffer is None else self.buffer.height
        first = self.buffer["case_id"][0] if rows else None
        for frame in self.frames:
            if frame.height and first is None:
                first = frame["case_id"][0]
            rows += frame.height
        return rows, first


class Spill:
    """Frames kept on disk instead of in memory until the stage reads them back: `put(frame)` writes
    it to a parquet file of a temporary folder and returns a lazy scan of it; `concat(scans)` reads
    several back as one frame (in the given order: the same frame `pl.concat` of the originals
    gives, dtypes included, which parquet keeps). A context manager: the folder goes on exit."""

    def __init__(self, prefix: str = "copydecode-spill-"):
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)
        self._count = 0

    def put(self, frame: pl.DataFrame) -> pl.LazyFrame:
        path = Path(self._dir.name) / f"{self._count:06d}.parquet"
        self._count += 1
        frame.write_parquet(path)
        return pl.scan_parquet(path)

    @staticmethod
    def concat(parts: list[pl.DataFrame | pl.LazyFrame]) -> pl.DataFrame:
        frames = [p.collect() if isinstance(p, pl.LazyFrame) else p for p in parts]
        return frames[0] if len(frames) == 1 else pl.concat(frames)

    def __enter__(self) -> "Spill":
        return self

    def __exit__(self, *exc) -> None:
        self._dir.cleanup()
