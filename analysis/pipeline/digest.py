"""Input digests: every stage output records the sha256 of each input file it was built from, and a
consumer refuses an output whose recorded inputs are no longer the files on disk, naming the input.

A parquet output keeps the record in its key-value metadata (`KEY`: a JSON object, input path ->
digest), so the table's columns and the report tables built from it do not change. `dvc repro` keeps
the stages in step; these records catch stages run by hand out of order (a `corpora` rerun after
`programs`, then `spans`).

Corpus records (`record_corpus`, `stale_stages`): after every stage with an output set, and after the
round trip, the CLI writes data/.corpus/<stage>.json: the sha256 of data/corpora/cases.parquet the stage
ran against and the sha256 of each output it wrote. `headline` refuses and `reports` marks a page
"stale: built from another corpus" when a stage's outputs are still the ones it wrote but the cases
table has changed since (an output that no longer matches its record, e.g. restored by `dvc checkout`,
is not judged). Contents, not sizes and mtimes: a run folder copied with `cp -r`, scp, unzip or a
checkout keeps its verdicts.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from analysis.errors import StaleInputError
from analysis.layout import CASES, CORPUS_RECORDS
from analysis.pipeline.io import dvc_stage, write_json

KEY = "copydecode.inputs"
CASES_TABLE = CASES  # the corpus every stage reads


def file_digest(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# The stage that writes each input a stage records (named when the input is missing).
WRITERS = {"data/corpora/cases.parquet": "copydecode corpora", "data/programs/programs.parquet": "copydecode programs",
           "data/spans/spans.parquet": "copydecode spans", "reports/kernels/latency_model.json": "copydecode kernels fit"}


def input_digests(paths: Iterable[str | Path]) -> dict[str, str]:
    """{path: sha256} of each input (as the path is spelt in `analysis.layout`); a missing input is named
    with the stage that writes it, before any output is opened."""
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.is_file():
            writer = WRITERS.get(path.as_posix(), "the stage that writes it")
            raise StaleInputError(f"{path} not found; run `{writer}` first (or `dvc repro`)")
    return {str(p): file_digest(p) for p in paths}


def parquet_metadata(paths: Iterable[str | Path]) -> dict[str, str]:
    """The key-value metadata that records `paths` in a parquet output."""
    return {KEY: json.dumps(input_digests(paths), sort_keys=True)}


def recorded_inputs(path: str | Path) -> dict[str, str] | None:
    """The inputs a parquet output records, or None when it records none (an older writer)."""
    try:
        text = pl.read_parquet_metadata(path).get(KEY)
    except Exception:  # a damaged file: its reader names it
        return None
    if text is None:
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def check_fresh(path: str | Path, rerun: str) -> None:
    """Refuse `path` when an input it was built from has changed (or it records none): the error names
    the output, the input and the stage to rerun."""
    record = recorded_inputs(path)
    if record is None:
        raise StaleInputError(f"{path} records no digest of the inputs it was built from (written by an older "
                              f"version, or by hand); rerun `{rerun}`")
    for name, digest in sorted(record.items()):
        now = Path(name)
        if not now.is_file():
            raise StaleInputError(f"{path} was built from {name}, which is gone; rerun the stage that writes "
                                  f"{name}, then `{rerun}`")
        if file_digest(now) != digest:
            raise StaleInputError(f"stale input: {path} was built from a different {name} "
                                  f"(recorded sha256 {digest[:12]}, now {file_digest(now)[:12]}); rerun `{rerun}` "
                                  f"(and the stages after it), or `dvc repro`")


# ---------------------------------------------------------------- corpus records (headline, reports)


def _stamp(path: Path) -> str:
    return file_digest(path)


def record_corpus(stage: str, outputs: Iterable[str | Path]) -> None:
    """data/.corpus/<stage>.json (`serving_simulate.json` for `serving simulate`): the cases table `stage` ran
    against and the outputs it wrote."""
    written = {str(Path(p)): _stamp(Path(p)) for p in outputs if Path(p).is_file()}
    cases = file_digest(CASES_TABLE) if CASES_TABLE.is_file() else None
    write_json({"stage": stage, "cases_sha256": cases, "outputs": written}, CORPUS_RECORDS / f"{dvc_stage(stage)}.json")


def _own_output(name: object) -> bool:
    """A record names outputs inside the root (relative, no `..`); anything else it names is not read."""
    return isinstance(name, str) and not Path(name).is_absolute() and ".." not in Path(name).parts


MAX_RECORD_BYTES = 64 << 20  # a record lists one stage's outputs: far below this


def _read_record(path: Path) -> dict | None:
    """A corpus record, or None when `path` is not one this suite wrote: not a plain file (a FIFO would block
    the read; a link is not followed), too large, not UTF-8 JSON, nested too deep, or not shaped as a record."""
    try:  # opened without blocking and without following a link, then checked on the open file
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RECORD_BYTES:
            return None
        try:
            record = json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return None
    if not isinstance(record, dict) or not isinstance(record.get("outputs"), dict) or "cases_sha256" not in record:
        return None
    return record


def _stage_name(record: dict, path: Path) -> str:
    """The command a record is of (`serving simulate` for serving_simulate.json), as the record names it when
    that matches its file, else the file's name."""
    named = record.get("stage")
    return named if isinstance(named, str) and dvc_stage(named) == path.stem else path.stem


def stale_stages() -> dict[str, str]:
    """{stage: reason} for each recorded stage whose outputs are the ones it wrote but whose cases
    table is not the one on disk now (a `corpora` rerun since). A record that is not one this suite wrote
    (damaged, a FIFO, a link) judges nothing."""
    if not CORPUS_RECORDS.is_dir():
        return {}
    current = file_digest(CASES_TABLE) if CASES_TABLE.is_file() else None
    stale = {}
    for path in sorted(CORPUS_RECORDS.glob("*.json")):
        record = _read_record(path)
        if record is None:
            continue
        outputs, stage = record["outputs"], _stage_name(record, path)
        if stage == "corpora" or record["cases_sha256"] == current or not outputs:
            continue
        if all(_own_output(p) and Path(p).is_file() and _stamp(Path(p)) == stamp for p, stamp in outputs.items()):
            stale[stage] = (f"stale: built from another corpus (`{stage}` ran on a different {CASES_TABLE}; "
                            f"rerun `copydecode {stage}`)")
    return stale
