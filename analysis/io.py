"""Writing stage outputs: parquet for data, csv + markdown for report tables, json metrics, charts.

Every write is atomic: the bytes go to a temporary file in the destination folder, which then
replaces the destination in one rename, so an interrupted stage leaves each output either whole and
new or whole and old, never truncated.

Inside `output_set`, a stage's outputs are replaced as a set: each file is written to its temporary
name, and only when the stage finishes is a journal (data/.pending/<stage>.json, the list of renames)
written and the renames done. A run killed before the journal leaves the old set (its temporary files
are swept by the next run); one killed after it is completed by `finish_pending`, which the CLI runs
before every stage. Either way the set is all old or all new, never a mix.
"""

from __future__ import annotations

import contextvars
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import CopyDecodeError


def ensure_parent(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix, so writers that look at it behave); renamed onto
    `path` when the block finishes, removed if it raises."""
    path = ensure_parent(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the permissions a plain open() gives
    try:
        yield Path(tmp)
        batch = _BATCH.get()
        if batch is None:
            os.replace(tmp, path)
        else:
            batch.append((Path(tmp), path))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_BATCH: contextvars.ContextVar[list[tuple[Path, Path]] | None] = contextvars.ContextVar("_BATCH", default=None)
PENDING = Path("data/.pending")  # journals of output sets being renamed (untracked, under data/)


@contextmanager
def output_set(stage: str) -> Iterator[None]:
    """Replace every output written inside the block as one set (see the module docstring)."""
    if _BATCH.get() is not None:  # nested: the outer set decides
        yield
        return
    batch: list[tuple[Path, Path]] = []
    token = _BATCH.set(batch)
    try:
        yield
    except BaseException:
        for tmp, _ in batch:
            tmp.unlink(missing_ok=True)
        raise
    finally:
        _BATCH.reset(token)
    if not batch:
        return
    journal = PENDING / f"{stage}.json"
    write_text(json.dumps([[str(t), str(p)] for t, p in batch]), journal)
    _apply(journal)


def _apply(journal: Path) -> None:
    for tmp, path in json.loads(journal.read_text(encoding="utf-8")):
        if Path(tmp).exists():
            os.replace(tmp, path)
    journal.unlink()


def finish_pending() -> list[str]:
    """Complete the renames of any output set whose stage was killed after its journal was written;
    returns the stages completed."""
    done = []
    if PENDING.is_dir():
        for journal in sorted(PENDING.glob("*.json")):
            _apply(journal)
            done.append(journal.stem)
    return done


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(text: str, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_parquet(frame: pl.DataFrame, path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """`metadata`: parquet key-value metadata (`analysis.digest.parquet_metadata` records the inputs)."""
    with atomic_path(path) as tmp:
        if metadata:
            frame.write_parquet(tmp, metadata=metadata)
        else:
            frame.write_parquet(tmp)


def read_parquet(path: str | Path, what: str, error: type[CopyDecodeError] = CopyDecodeError) -> pl.DataFrame:
    """Read a stage's parquet output; a missing, truncated or foreign file is an `error` naming it
    and the stage that writes it (`what`)."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path} not found; run `{what}` (or `dvc repro`) first")
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises ComputeError/OSError variants for damaged files
        raise error(f"{path} is not a readable parquet file ({type(exc).__name__}: {exc}); rerun `{what}`") from exc


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pl.DataFrame, digits: int = 4) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_cell(v, digits) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([header, rule, *rows]) + "\n"


def write_table(frame: pl.DataFrame, stem: str | Path, digits: int = 4) -> None:
    """Write `stem`.csv and `stem`.md (the markdown rounded to `digits` for reading)."""
    stem = Path(stem)
    with atomic_path(stem.with_suffix(".csv")) as tmp:
        frame.write_csv(tmp)
    write_text(markdown_table(frame, digits), stem.with_suffix(".md"))


def write_csv(frame: pl.DataFrame, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        frame.write_csv(tmp)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_json(data: Any, path: str | Path) -> None:
    write_text(json.dumps(_finite(data), indent=2, sort_keys=True) + "\n", path)


def save_chart(chart, stem: str | Path) -> None:
    """PNG and SVG through vl-convert (works offline)."""
    stem = Path(stem)
    for suffix, extra in ((".png", {"scale_factor": 2}), (".svg", {})):
        with atomic_path(stem.with_suffix(suffix)) as tmp:
            chart.save(str(tmp), **extra)


def write_with(writer: Callable[[Path], None], path: str | Path) -> None:
    """Atomic write through any writer that takes a path."""
    with atomic_path(path) as tmp:
        writer(tmp)
