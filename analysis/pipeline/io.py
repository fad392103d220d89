"""Writing stage outputs: parquet for data, csv + markdown for report tables, json metrics, charts.

Every write is atomic: the bytes go to a temporary file in the destination folder, which then
replaces the destination in one rename, so an interrupted stage leaves each output either whole and
new or whole and old, never truncated.

Inside `output_set`, a stage's outputs are replaced as a set: each file is written to its temporary
name, and only when the stage finishes is a journal (data/.pending/<stage>.json, the list of renames)
written and the renames done. A run killed before the journal leaves the old set (its temporary files
are swept by the next run: `sweep_temporaries`); one killed after it is completed by `finish_pending`,
which the CLI runs before every stage. Either way the set is all old or all new, never a mix.

One run per output root: `run_lock` holds data/.lock (an exclusive flock, the holder's pid written in
it) while a stage runs, so a second run into the same folder is refused, naming the holder; the kernel
drops the lock when its holder dies, so a killed run never blocks the next one (its file is reused).
Only the holder sweeps.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
import re
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


_BATCH: contextvars.ContextVar[list[tuple[Path | None, Path]] | None] = contextvars.ContextVar("_BATCH", default=None)
PENDING = Path("data/.pending")  # journals of output sets being renamed (untracked, under data/)


@contextmanager
def output_set(stage: str) -> Iterator[list[Path]]:
    """Replace every output written inside the block as one set (see the module docstring); yields the
    list that holds the outputs written once the set is applied."""
    written: list[Path] = []  # filled with the outputs written once the set is applied
    if _BATCH.get() is not None:  # nested: the outer set decides
        yield written
        return
    batch: list[tuple[Path | None, Path]] = []  # (temporary, output); (None, output): remove it
    token = _BATCH.set(batch)
    try:
        yield written
    except BaseException:
        for tmp, _ in batch:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        raise
    finally:
        _BATCH.reset(token)
    if not batch:
        return
    journal = PENDING / f"{stage}.json"
    write_text(json.dumps([[None if t is None else str(t), str(p)] for t, p in batch]), journal)
    _apply(journal)
    written.extend(p for t, p in batch if t is not None)


def remove_output(path: str | Path) -> None:
    """Delete an output that this run no longer writes (a stale shard): inside `output_set`, with the
    set (a run that fails keeps it, like every other old output); outside, now."""
    batch = _BATCH.get()
    if batch is None:
        Path(path).unlink(missing_ok=True)
    else:
        batch.append((None, Path(path)))


def _apply(journal: Path) -> None:
    for tmp, path in json.loads(journal.read_text(encoding="utf-8")):
        if tmp is None:  # a removal (remove_output)
            Path(path).unlink(missing_ok=True)
        elif Path(tmp).exists():
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


LOCK = Path("data/.lock")  # one run per output root (untracked, under data/)
SWEPT = (Path("data"), Path("reports"))  # where atomic writes leave their temporary files
# atomic_path's temporary names: "." + stem + "." + mkstemp's 8 characters + suffix
TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}(\.[A-Za-z0-9]+)?$")


class RunLockedError(CopyDecodeError):
    """Another copydecode run holds this output root."""


@contextmanager
def run_lock(stage: str, lock: Path = LOCK) -> Iterator[None]:
    """Hold the output root's lock for the block (see the module docstring); refuse while another
    live process holds it. The lock file (and a data/ folder made for it) is removed on release, so
    a refused run leaves nothing behind."""
    created = not lock.parent.exists()
    fd = _acquire(lock, stage)
    try:
        os.pwrite(fd, f"pid {os.getpid()}, `{stage}`".encode(), 0)
        yield
    finally:
        import fcntl

        Path(lock).unlink(missing_ok=True)  # while still held: a waiting opener of this file re-checks the inode
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):  # only when the folder made for the lock is still empty
                lock.parent.rmdir()


def _acquire(lock: Path, stage: str) -> int:
    """An open descriptor of `lock` holding its exclusive flock (the file on disk, not an unlinked one)."""
    import fcntl

    for _ in range(5):
        ensure_parent(lock)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise RunLockedError(f"another copydecode run ({holder}) is writing into this output root "
                                 f"({Path.cwd()}); wait for it to finish, or use another --out") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            return fd
        os.close(fd)  # the holder removed the file between our open and our lock: take the new one
    raise RunLockedError(f"could not take the lock {lock} (it kept changing); is another run starting?")


def sweep_temporaries(folders=SWEPT) -> list[Path]:
    """Remove the temporary files that killed runs left beside their outputs (under data/ and
    reports/, DVC directory outputs included); run under `run_lock`, after `finish_pending`."""
    swept = []
    for folder in folders:
        if not Path(folder).is_dir():
            continue
        for path in sorted(Path(folder).rglob(".*")):
            if path.is_file() and not path.is_symlink() and TEMPORARY.match(path.name) and path != LOCK:
                path.unlink(missing_ok=True)
                swept.append(path)
    return swept


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(text: str, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_parquet(frame: pl.DataFrame, path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """`metadata`: parquet key-value metadata (`analysis.pipeline.digest.parquet_metadata` records the inputs)."""
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


EMPTY_TABLE_MD = "(no rows: this run holds none of the rows this table keeps)\n"


def markdown_table(frame: pl.DataFrame, digits: int = 4) -> str:
    """A markdown table; a frame with no columns (a stage's table for rows this run lacks, e.g. the
    paper's pooled bounds on a run without the paper's corpora) says so instead of `|  |` (N19)."""
    if not frame.columns:
        return EMPTY_TABLE_MD
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
