"""A user's own edit pairs: a JSON Lines or Parquet file -> cases (framing "pair").

Fields (JSONL keys or Parquet columns):
    source       str, required   the text before the edit
    target       str, required   the text after it
    case_id      str, optional   unique in the file; the case id is "<corpus>/<case_id>" (an id that
                                 starts with "<corpus>/" already is kept as it is; default
                                 "<corpus>/<n>", n the 0-based record number)
    instruction  str, optional   the edit request in words
    language     str, optional   default `PairsSettings.language`
A null optional field counts as absent. `PairsSettings.fields` maps these names to the file's own
(`{source: before, target: after, case_id: id}`): a mapped field is read from the file's field of
that name. Other fields are ignored and listed in the report (so a
misspelt field name shows up rather than vanishing). The corpus name is the caller's
(`PairsSettings.name`), by default "Pairs-<file stem>".

Every defect is a CorpusError naming the file and the JSONL line (1-based) or the Parquet row
(0-based index): missing field, wrong type, empty file, duplicate case_id, malformed JSON, invalid
UTF-8 or a lone surrogate (analysis.corpora.jsonl).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analysis.corpora.cases import Case, read_parquet_file
from analysis.corpora.entries import PairsSettings, pairs_corpus
from analysis.pipeline.digest import file_digest
from analysis.errors import CorpusError
from analysis.corpora.jsonl import read_jsonl
from analysis.pipeline.params import did_you_mean_path

FRAMING = "pair"
REQUIRED: tuple[str, ...] = ("source", "target")
OPTIONAL: tuple[str, ...] = ("case_id", "instruction", "language")
FORMATS: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class PairsReport:
    corpus: str
    origin: str          # "pairs:<path>"
    sha256: str          # of the file
    format: str
    n_records: int
    ignored_fields: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"corpus": self.corpus, "origin": self.origin, "sha256": self.sha256, "format": self.format,
                "n_records": self.n_records, "ignored_fields": list(self.ignored_fields)}


def file_format(settings: PairsSettings) -> str:
    path = Path(settings.path)
    if settings.format in ("jsonl", "parquet"):
        return settings.format
    if settings.format != "auto":
        raise CorpusError(f"pairs: format must be auto, jsonl or parquet, got {settings.format!r}")
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise CorpusError(
            f"{path}: cannot tell the format from the suffix {path.suffix!r} "
            f"(known: {', '.join(FORMATS)}); rename it to .jsonl (one JSON object per line) or .parquet, or set "
            "`format: jsonl` or `format: parquet` in its corpora.pairs entry of params"
        )
    return found


def check_mapping(fields: dict[str, str] | None, where: str) -> dict[str, str]:
    """The field mapping, checked: only this suite's fields as keys, no file field used twice."""
    fields = dict(fields or {})
    unknown = sorted(set(fields) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise CorpusError(f"{where}: fields maps unknown field(s) {unknown}; the fields are "
                          f"{', '.join((*REQUIRED, *OPTIONAL))} (e.g. fields: {{source: before, target: after}})")
    theirs = list(fields.values())
    twice = sorted({t for t in theirs if theirs.count(t) > 1})
    if twice:
        raise CorpusError(f"{where}: fields maps several fields to {twice}")
    return fields


def map_record(record: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    """A record under this suite's field names: each mapped field read from the file's field (absent
    when the file lacks it, so the missing-field error names the file's field); the rest unchanged."""
    if not fields:
        return record
    used = set(fields.values())
    out = {k: v for k, v in record.items() if k not in used and k not in fields}
    for ours, theirs in fields.items():
        if theirs in record:
            out[ours] = record[theirs]
    return out


def missing_text(name: str, fields: dict[str, str]) -> str:
    return f"{name!r} (mapped from the file's field {fields[name]!r})" if name in fields else repr(name)


def check_fields(record: dict[str, Any], where: str, fields: dict[str, str] | None = None) -> None:
    fields = fields or {}
    for name in REQUIRED:
        if name not in record or record[name] is None:
            raise CorpusError(f"{where}: missing field {missing_text(name, fields)}" + (" (null)" if name in record else ""))

    for name in (*REQUIRED, *OPTIONAL):
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise CorpusError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
    if record["target"] == "":
        raise CorpusError(f"{where}: field 'target' is empty (nothing to generate: coverage and speedup are "
                          "undefined); drop this record")
    case_id = record.get("case_id")
    if case_id == "":
        raise CorpusError(f"{where}: field 'case_id' is empty")
    if case_id is not None and not case_id.strip():
        raise CorpusError(f"{where}: field 'case_id' is only blanks ({case_id!r}); ids must be readable in tables")
    if case_id is not None and any(not ch.isprintable() for ch in case_id):
        raise CorpusError(f"{where}: field 'case_id' holds a line break or control character ({case_id!r})")


def _jsonl_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{path}:{r.line}", r.data) for r in read_jsonl(path)]


def _parquet_records(path: Path, fields: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    frame = read_parquet_file(path)
    fields = fields or {}
    column = {name: fields.get(name, name) for name in (*REQUIRED, *OPTIONAL)}
    missing = [column[name] for name in REQUIRED if column[name] not in frame.columns]
    if missing:
        raise CorpusError(f"{path}: missing column(s) {missing} (columns: {frame.columns})")
    # dictionary-encoded strings (pyarrow dictionary, pandas category) are read as Categorical: strings all the same
    frame = frame.with_columns(pl.col(name).cast(pl.String) for name in frame.columns
                               if isinstance(frame[name].dtype, (pl.Categorical, pl.Enum)))
    for name in (*REQUIRED, *OPTIONAL):
        if column[name] in frame.columns and frame[column[name]].dtype not in (pl.String, pl.Null):
            raise CorpusError(f"{path}: column {column[name]!r} must hold strings, got {frame[column[name]].dtype}")
    if frame.height == 0:
        raise CorpusError(f"{path}: the file is empty (no rows)")
    return [(f"{path} row {index}", row) for index, row in enumerate(frame.iter_rows(named=True))]


def load_pairs(settings: PairsSettings) -> tuple[list[Case], PairsReport]:
    path = Path(settings.path)
    if not path.is_file():
        raise CorpusError(f"{path}: a folder, not a pairs file" if path.is_dir()
                          else f"{path}: not a regular file (a FIFO, a device or a socket); give a pairs file"
                          if path.exists() else f"{path}: no such pairs file{did_you_mean_path(path)}")
    fields = check_mapping(settings.fields, str(path))
    fmt = file_format(settings)
    records = _jsonl_records(path) if fmt == "jsonl" else _parquet_records(path, fields)
    cases, ignored = cases_from_records(records, pairs_corpus(settings), settings.language, fields, str(path))
    digest = file_digest(path)
    report = PairsReport(pairs_corpus(settings), f"pairs:{path}", digest, fmt, len(cases), tuple(sorted(ignored)))
    return cases, report


def first_repeat(items: list[str]) -> str:
    """The first item met a second time, in one pass (`ids.count` in a scan was quadratic)."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    raise ValueError("no repeat")


def case_id(corpus: str, own: str) -> str:
    """`<corpus>/<own id>`; an id that already starts with `<corpus>/` is kept as it is, so a benchmark that
    names its tasks after itself (EditEval's `EditEval/80`) keeps its own ids rather than `EditEval/EditEval/80`."""
    return own if own.startswith(f"{corpus}/") else f"{corpus}/{own}"


def cases_from_records(records: list[tuple[str, dict[str, Any]]], corpus: str, language: str,
                       fields: dict[str, str], path: str) -> tuple[list[Case], set[str]]:
    """Cases (framing "pair") from (where, record) pairs read under the file's own field names, and the
    fields no case reads (as the file names them)."""
    seen: dict[str, str] = {}
    cases = []
    ignored: set[str] = set()
    for number, (where, raw) in enumerate(records):
        record = map_record(raw, fields)
        check_fields(record, where, fields)
        ignored.update(k for k in record if k not in REQUIRED and k not in OPTIONAL)
        own_id = record.get("case_id")
        if own_id is not None:
            if own_id in seen:
                raise CorpusError(f"{where}: duplicate case_id {own_id!r} (first at {seen[own_id]})")
            seen[own_id] = where
        cases.append(Case(
            case_id(corpus, own_id if own_id is not None else str(number)), corpus,
            record.get("language") or language, FRAMING,
            record["source"], record["target"], record.get("instruction"),
        ))
    ids = [c.case_id for c in cases]
    if len(set(ids)) != len(ids):  # a given case_id such as "3" can meet a numbered one
        clash = first_repeat(ids)
        raise CorpusError(f"{path}: case id {clash!r} is given twice (a case_id equals another record's number, "
                          f"or one record's id is another's with the corpus name {corpus + '/'!r} in front); give "
                          "every record a case_id or none, each naming one case")
    return cases, ignored
