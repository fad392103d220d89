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
import errno
import functools
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import CopyDecodeError
from analysis.layout import TIMINGS
from analysis.pipeline.confine import OutputRootError, confined, relative_to_root


def ensure_parent(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix, so writers that look at it behave); renamed onto
    `path` when the block finishes, removed if it raises."""
    path = ensure_parent(path)
    fd, made = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = path.parent / Path(made).name  # spelt like `path` (relative in an output root): what a journal records
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the permissions a plain open() gives
    try:
        yield Path(tmp)
        batch = _BATCH.get()
        if batch is None:
            os.replace(tmp, path)
            _wrote(path)
        else:
            batch.append((Path(tmp), path))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_BATCH: contextvars.ContextVar[list[tuple[Path | None, Path]] | None] = contextvars.ContextVar("_BATCH", default=None)
_WRITTEN: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("_WRITTEN", default=None)
PENDING = Path("data/.pending")  # journals of output sets being renamed (untracked, under data/)


def _wrote(path: Path) -> None:
    written = _WRITTEN.get()
    if written is not None:
        written.append(Path(path))


@contextmanager
def recorded_writes() -> Iterator[list[Path]]:
    """The paths that writes inside the block put in place (each once it is renamed onto its path, an output
    set's once the set is applied), in order: what a stage wrote, for its corpus record, whether or not it
    writes its outputs as one set."""
    written: list[Path] = []
    token = _WRITTEN.set(written)
    try:
        yield written
    finally:
        _WRITTEN.reset(token)


@contextmanager
def output_set(stage: str, outputs: tuple[str, ...] | None = None) -> Iterator[list[Path]]:
    """Replace every output written inside the block as one set (see the module docstring); yields the
    list that holds the outputs written once the set is applied. `outputs`: the paths (files, or
    folders and everything below them) the stage owns, default its dvc.yaml outs; a write elsewhere is
    refused before anything is renamed, so a journal only ever names the stage's own outputs."""
    written: list[Path] = []  # filled with the outputs written once the set is applied
    if _BATCH.get() is not None:  # nested: the outer set decides
        yield written
        return
    batch: list[tuple[Path | None, Path]] = []  # (temporary, output); (None, output): remove it
    token = _BATCH.set(batch)
    try:
        yield written
        entries = [[None if t is None else _as_recorded(t), _as_recorded(p)] for t, p in batch]
        owned = tuple(_as_recorded(Path(o)) for o in (stage_outputs(stage) if outputs is None else outputs))
        check_journal(stage, entries, owned, f"the {stage} output set")
    except BaseException:
        for tmp, _ in batch:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        raise
    finally:
        _BATCH.reset(token)
    if not batch:
        return
    journal = PENDING / f"{dvc_stage(stage)}.json"
    write_text(json.dumps(entries), journal)
    _apply(entries, journal)
    written.extend(p for t, p in batch if t is not None)
    for path in written:
        _wrote(path)


def remove_output(path: str | Path) -> None:
    """Delete an output that this run no longer writes (a stale shard): inside `output_set`, with the
    set (a run that fails keeps it, like every other old output); outside, now."""
    batch = _BATCH.get()
    if batch is None:
        Path(path).unlink(missing_ok=True)
    else:
        batch.append((None, Path(path)))


class JournalError(CopyDecodeError):
    """A rename journal names something other than a stage's own temporary file and output."""


def dvc_stage(stage: str) -> str:
    """The dvc.yaml name of a command (`kernels fit` -> `kernels_fit`): also its journal's name."""
    return stage.replace(" ", "_")


# Outputs a command writes as one set beyond its dvc.yaml outs: a preset's or --model's raw timings and a
# frozen profile; a frozen pilot run (`pilot-sweep --freeze`).
OWNED_OUTSIDE_DVC = {"kernels_profile": ("data/kernels", "reports/kernels/frozen"),
                     "kernels_batched": ("data/kernels", "data/serving", "reports/kernels/frozen"),
                     "pilot-sweep": ("reports/pilot/frozen",)}


@functools.lru_cache(maxsize=4)
def _dvc_stages(dvc_yaml: Path) -> dict:
    """dvc.yaml's stages (read once per process: libyaml's loader when present, the file is long)."""
    import yaml

    # A safe loader either way: libyaml's CSafeLoader builds the same plain types as SafeLoader, so a
    # `!!python/...` tag is a ConstructorError (a YAMLError: no stages), never a call.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        stages = yaml.load(dvc_yaml.read_text(encoding="utf-8"), Loader=loader).get("stages", {})  # noqa: S506 safe loader
    except (OSError, AttributeError, yaml.YAMLError):
        return {}
    return stages if isinstance(stages, dict) else {}


def dvc_stage_names(dvc_yaml: Path | None = None) -> tuple[str, ...]:
    """The stages of the project's dvc.yaml (beside this package), in its order."""
    return tuple(_dvc_stages(dvc_yaml or Path(__file__).resolve().parents[2] / "dvc.yaml"))


def stage_outputs(stage: str, dvc_yaml: Path | None = None) -> tuple[str, ...]:
    """The outputs the project's dvc.yaml declares for `stage` (outs, metrics, plots), as spelt there;
    () for a stage it does not declare. Read from the project beside this package, never from the run
    folder: a run folder cannot widen what a stage owns."""
    stages = _dvc_stages(dvc_yaml or Path(__file__).resolve().parents[2] / "dvc.yaml")
    spec = stages.get(dvc_stage(stage)) if isinstance(stages, dict) else None
    extra = OWNED_OUTSIDE_DVC.get(dvc_stage(stage), ())
    if not isinstance(spec, dict):
        return extra

    declared = tuple(next(iter(o)) if isinstance(o, dict) else str(o)
                     for kind in ("outs", "metrics", "plots") for o in spec.get(kind) or [])
    timing = (TIMINGS / f"{dvc_stage(stage)}.json").as_posix()  # its run time (untracked: analysis.parallel.progress)
    return (*declared, *extra, timing)


def declared_outputs(stage: str, paths: list[Path]) -> list[Path]:
    """Those of `paths` that are `stage`'s declared outputs (stage_outputs: files, or under its folders), once
    each: what it wrote for the pages, not its checkpoints or a preset's files elsewhere."""
    owned = tuple(_as_recorded(Path(o)) for o in stage_outputs(stage))
    return [p for p in dict.fromkeys(Path(p) for p in paths) if _owned(Path(_as_recorded(p)), owned)]


def _as_recorded(path: Path) -> str:
    """`path` as a journal records it: relative to the output root when it lies inside (the journal is
    checked against the stage's outputs as dvc.yaml spells them), else as given (and then refused)."""
    rel = relative_to_root(path, Path("."))
    return str(path) if rel is None else rel.as_posix()


def _owned(path: Path, outputs: tuple[str, ...]) -> bool:
    return any(path == Path(o) or path.is_relative_to(Path(o)) for o in outputs)


def _entry_problem(tmp: object, path: object, outputs: tuple[str, ...]) -> str | None:
    """Why one journal entry is not a rename of the stage's own temporary file onto its own output
    (or a removal of its own output), or None when it is."""
    if not isinstance(path, str) or not (tmp is None or isinstance(tmp, str)):
        return "is not a pair of paths"
    out = Path(path)
    if out.is_absolute() or ".." in out.parts or not _owned(out, outputs):
        return f"{path!r} is not one of the stage's outputs ({', '.join(outputs) or 'none declared'})"
    if tmp is not None:
        temp = Path(tmp)
        name = re.fullmatch(rf"\.{re.escape(out.stem)}\.[a-z0-9_]{{8}}{re.escape(out.suffix)}", temp.name)
        if temp.parent != out.parent or not name:
            return f"{tmp!r} is not the temporary file of {path!r} (.{out.stem}.XXXXXXXX{out.suffix} beside it)"
        if temp.is_symlink():
            return f"{tmp!r} is a symbolic link"
    try:
        confined(out, "output")
    except OutputRootError as exc:
        return str(exc)
    return None


def check_journal(stage: str, entries: object, outputs: tuple[str, ...], where: str) -> None:
    """Refuse, naming the entry, a journal that is not a list of (temporary, output) renames of the
    stage's own outputs inside the root; nothing is moved or deleted before every entry passes."""
    if not isinstance(entries, list):
        raise JournalError(f"{where}: not a list of renames")
    for number, entry in enumerate(entries, 1):
        problem = (_entry_problem(entry[0], entry[1], outputs) if isinstance(entry, list) and len(entry) == 2
                   else "is not a pair of paths")
        if problem is not None:
            raise JournalError(f"{where}: entry {number} {problem}; nothing was moved or deleted. A journal "
                               f"only renames the `{stage}` stage's own temporary files onto its outputs: if this "
                               "run folder came from elsewhere, remove the journal (data/.pending/) and rerun")


def _apply(entries: list, journal: Path) -> None:
    for tmp, path in entries:
        if tmp is None:  # a removal (remove_output)
            Path(path).unlink(missing_ok=True)
        elif Path(tmp).exists():
            os.replace(tmp, path)
    journal.unlink()


def finish_pending(outputs_of: Callable[[str], tuple[str, ...]] = stage_outputs) -> list[str]:
    """Complete the renames of any output set whose stage was killed after its journal was written;
    returns the stages completed. A journal is replayed only when every entry renames that stage's own
    temporary file onto its own output inside the root (`check_journal`); else JournalError names it
    and nothing is touched (a run folder from elsewhere may carry a planted one)."""
    done = []
    if PENDING.is_dir():
        for journal in sorted(PENDING.glob("*.json")):
            where = str(journal)
            if journal.is_symlink() or not journal.is_file():
                raise JournalError(f"{where}: not a plain file; remove it")
            try:
                entries = json.loads(journal.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise JournalError(f"{where}: not a readable journal ({type(exc).__name__}); remove it") from None
            check_journal(journal.stem, entries, outputs_of(journal.stem), where)
            _apply(entries, journal)
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
        try:  # never through a link: a planted data/.lock -> elsewhere would be truncated
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666 & ~_umask())
        except OSError as exc:
            if Path(lock).is_symlink() or exc.errno == errno.ELOOP:
                raise RunLockedError(f"{lock} is a symbolic link; the lock of an output root must be a plain "
                                     "file: remove the link") from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise RunLockedError(f"{lock} is not a plain file; remove it")
        if info.st_nlink > 1:  # a hard link to a file elsewhere: truncating and writing it would change that file
            os.close(fd)
            raise RunLockedError(f"{lock} has {info.st_nlink - 1} other hard link(s), so it is a file of somewhere else "
                                 "too; remove it (the lock is made afresh)")
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


MAX_DOCUMENT_BYTES = 64 << 20  # a stage's JSON document (a model, a record): far below this


def read_json_document(path: str | Path, what: str, error: type[CopyDecodeError] = CopyDecodeError,
                       max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """A JSON document a stage reads from its output root (a run folder is data): a plain file no larger than
    `max_bytes`, UTF-8, valid JSON, not nested past the parser's depth; anything else is an `error` naming
    the file and the stage that writes it (`what`), never a raw traceback or a blocked read."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path} not found (or not a plain file); run `{what}` (or `dvc repro`) first")
    size = path.stat().st_size
    if size > max_bytes:
        raise error(f"{path} is {size:,} bytes, above the {max_bytes:,} such a document may hold; rerun `{what}`")
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text (byte {exc.start}); rerun `{what}`") from None
    except RecursionError:
        raise error(f"{path} is nested too deeply to be one of this suite's documents; rerun `{what}`") from None
    except ValueError as exc:
        raise error(f"{path} is not valid JSON ({exc}); rerun `{what}`") from None


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


EMPTY_TABLE_MD = "(no rows: this run holds none of the rows this table keeps)\n"


def markdown_table(frame: pl.DataFrame, digits: int = 4) -> str:
    """A markdown table; a frame with no columns (a stage's table for rows this run lacks, e.g. the
    paper's pooled bounds on a run without the paper's corpora) says so instead of `|  |`."""
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


# vl-convert's V8 reserves its heap cages up front: under `ulimit -v` of 64 GiB or less it aborts the whole
# process (SIGTRAP, "Fatal process out of memory: Oilpan: CagedHeap reservation"); 128 GiB was enough.
CHART_ADDRESS_SPACE = 128 << 30


class AddressSpaceError(CopyDecodeError):
    """An address-space limit (`ulimit -v`) below what the chart renderer reserves."""


def check_address_space() -> None:
    """Refuse, by name, to render charts under an address-space limit V8 cannot start in, instead of the
    process dying without a word."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < CHART_ADDRESS_SPACE:
        raise AddressSpaceError(
            f"an address-space limit of {soft / (1 << 30):.0f} GiB is set (ulimit -v); the charts are drawn by "
            f"vl-convert, whose V8 engine reserves more than that up front and aborts the process without it. "
            f"Lift it (ulimit -v unlimited, or at least {CHART_ADDRESS_SPACE >> 30} GiB) and bound memory with a "
            "resident limit instead (systemd-run --user -p MemoryMax=8G ..., or a container's memory limit)")


def save_chart(chart, stem: str | Path) -> None:
    """PNG and SVG through vl-convert (works offline)."""
    check_address_space()
    stem = Path(stem)
    for suffix, extra in ((".png", {"scale_factor": 2}), (".svg", {})):
        with atomic_path(stem.with_suffix(suffix)) as tmp:
            chart.save(str(tmp), **extra)


def write_with(writer: Callable[[Path], None], path: str | Path) -> None:
    """Atomic write through any writer that takes a path."""
    with atomic_path(path) as tmp:
        writer(tmp)


class OutputPathError(CopyDecodeError):
    """A file a command was told to write (`--out FILE`) cannot be written at that path."""


def os_error_text(exc: BaseException) -> str | None:
    """The named error for a path the file system cannot hold (a component over 255 bytes; a name
    that is not UTF-8, which Python holds as surrogates), else None: what the CLI reports when a stage raises
    one (analysis.pipeline.console), and what commands that name the error themselves say (`output_path_error`)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        shown = name if len(name) <= 120 else f"{name[:60]}...{name[-40:]} ({len(name.encode('utf-8', 'replace')):,} bytes)"
        return (f"a path is too long for the file system ({shown}): one name may hold at most 255 bytes; "
                "use a shorter file name, --name, or setting")
    if isinstance(exc, UnicodeEncodeError) and "surrogates not allowed" in str(exc):
        return ("a path is not valid UTF-8 (a file or folder name, or --out, made of other bytes): "
                f"{exc.object[max(exc.start - 20, 0):exc.end + 20].encode('utf-8', 'backslashreplace').decode()!r}; "
                "rename it to UTF-8")
    return None


OUTPUT_PATH_HINTS = {errno.EISDIR: "it is a folder; give a file name inside it",
                     errno.ENOTDIR: "a part of the path is a file, not a folder",
                     errno.EEXIST: "a part of the path is a file, not a folder",  # the parent folder's mkdir
                     errno.EACCES: "permission denied", errno.EPERM: "permission denied",
                     errno.EROFS: "the file system is read-only", errno.ENOSPC: "no space left on the device"}


def output_path_error(exc: BaseException, option: str, path: str | Path) -> OutputPathError | None:
    """The named error for `exc`, raised while writing the file the user named with `option` (`--out FILE`):
    any OSError there is about that path (a folder, a name over 255 bytes, no permission), so it is named
    with the path and the reason instead of a traceback; None for anything else (a real crash)."""
    text = os_error_text(exc)
    if text is None and isinstance(exc, OSError):
        text = OUTPUT_PATH_HINTS.get(exc.errno) or f"cannot write it ({exc.strerror or exc})"
    if text is None:
        return None
    shown = str(path) if len(str(path)) <= 120 else f"{str(path)[:60]}...{str(path)[-40:]}"
    shown = shown.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return OutputPathError(f"{option} {shown}: {text}")
