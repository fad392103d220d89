"""Any edit dataset that Hugging Face `datasets` reads -> cases (framing "pair"), like a pairs file.

`dataset` is a hub id (`nuprl/CanItEdit`), a folder written by `Dataset.save_to_disk` /
`DatasetDict.save_to_disk`, or a .json/.jsonl/.parquet/.csv file. `fields` maps this suite's fields
(`source`, `target`, optional `instruction`, `case_id`, `language`; as in analysis.corpora.pairs) to
the dataset's columns, e.g. CanItEdit `{source: before, target: after, instruction:
instruction_descriptive, case_id: id}`. `split` picks the split (a local file has the one split
`train`; the hub accepts slices such as `train[:500]`). Every record goes through the pairs checks.
`sha256` pins a local file: a file whose bytes changed is refused by name before it is read (the field's
benchmarks in the default run, CanItEdit and EditEval, are read in place from ../shared/data/edits so pinned).
A local file is read through a temporary `datasets` cache that is removed after the read, so a run writes
nothing in the user's Hugging Face cache.

Named errors (CorpusError): a missing dataset or file, an unknown split (the known ones listed), an
empty dataset, a mapped column the dataset lacks (its columns listed), and each pairs-record defect. A
JSON Lines file `datasets` cannot read is read again line by line to name its first bad line, row and
cause (not UTF-8, not JSON, not an object, a key twice, a lone surrogate: analysis.corpora.jsonl). A .json
file holding one document (an array of records) is checked for lone surrogates, which `datasets` drops silently.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.corpora.cases import Case
from analysis.corpora.entries import FILE_BUILDERS, HFDatasetSettings, check_pin, hfdataset_corpus, hfdataset_is_local_file
from analysis.corpora.jsonl import document_surrogate, first_defect
from analysis.corpora.pairs import REQUIRED, cases_from_records, check_mapping
from analysis.errors import CorpusError
from analysis.pipeline.digest import file_digest
from analysis.pipeline.scratch import owned_temp_dir

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


@dataclass(frozen=True)
class HFDatasetReport:
    corpus: str
    origin: str
    sha256: str | None     # a local file's sha256; else the loaded split's fingerprint (datasets' own), hashed
    split: str
    n_records: int
    ignored_fields: tuple[str, ...]
    pinned: bool = False   # the sha256 was checked against the entry's pin

    def as_dict(self) -> dict:
        return {"corpus": self.corpus, "origin": self.origin, "sha256": self.sha256, "pinned": self.pinned,
                "split": self.split, "n_records": self.n_records, "ignored_fields": list(self.ignored_fields)}


def verified_digest(settings: HFDatasetSettings, where: str) -> str:
    """A local file's sha256, refused by name when the entry pins other bytes (the file changed in place)."""
    digest = file_digest(settings.dataset)
    if settings.sha256 is not None and digest != settings.sha256.lower():
        raise CorpusError(f"{where}: the file has sha256 {digest}, not the pinned {settings.sha256.lower()}: its "
                          "contents changed; check the file, and set the entry's sha256 to the new digest only if "
                          "the change is meant")
    return digest


def _pick_split(loaded, split: str, where: str):
    from datasets import DatasetDict

    if isinstance(loaded, DatasetDict):
        if split not in loaded:
            raise CorpusError(f"{where}: unknown split {split!r}; the dataset has {', '.join(sorted(loaded))}")
        return loaded[split]
    return loaded


def load_split(settings: HFDatasetSettings):
    """The one split as a `datasets.Dataset`, from a local folder or file or from the hub."""
    import datasets

    where = f"dataset {settings.dataset}"
    path = Path(settings.dataset)
    if path.is_dir():
        try:
            loaded = datasets.load_from_disk(str(path))
        except FileNotFoundError as exc:
            raise CorpusError(f"{where}: not a folder written by save_to_disk ({exc})") from exc
        except IndexError as exc:  # datasets cannot reopen a saved dataset of 0 rows (0 shards)
            raise CorpusError(f"{where}: the dataset is empty (saved with no rows)") from exc
        return _pick_split(loaded, settings.split, where)
    if path.suffix.lower() in FILE_BUILDERS:
        if not path.is_file():
            raise CorpusError(f"{where}: no such file")
        if settings.split != "train":
            raise CorpusError(f"{where}: unknown split {settings.split!r}; a local file has the one split 'train'")
        if path.stat().st_size == 0:
            raise CorpusError(f"{where}: the file is empty")
        try:
            loaded = _read_local(path)
        except Exception as exc:  # noqa: BLE001 - datasets' reader errors vary by format; name the file
            defect = jsonl_defect(path)
            if defect is not None:  # the row and its cause, not pandas' fallback ("Trailing data at position 29")
                raise CorpusError(f"{where}: `datasets` cannot read it: {defect}") from exc
            raise CorpusError(f"{where}: `datasets` cannot read it ({reader_cause(exc)})") from exc
        if path.suffix.lower() == ".json" and (defect := document_surrogate(path)) is not None:
            raise CorpusError(f"{where}: {defect}; `datasets` would drop it silently, changing the text")
        return loaded
    if not HUB_ID.fullmatch(settings.dataset):
        raise CorpusError(f"{where}: not a folder, a .json/.jsonl/.parquet/.csv file or a hub id")
    try:
        return datasets.load_dataset(settings.dataset, settings.config, split=settings.split,
                                     revision=settings.revision)
    except ValueError as exc:  # datasets: 'Unknown split "x". Should be one of [...]'
        raise CorpusError(f"{where}: {exc}") from exc
    except (FileNotFoundError, ConnectionError, OSError) as exc:
        raise CorpusError(f"{where}: cannot load it from the hub ({type(exc).__name__}: {exc}); offline, "
                          f"save it with save_to_disk and name the folder") from exc


def _read_local(path: Path):
    """A local file as one in-memory split, built in a temporary cache removed after the read (a killed run's
    is removed by the next): `datasets` would otherwise write its Arrow copy under the user's home."""
    import datasets

    with owned_temp_dir("copydecode-datasets-") as cache:
        return datasets.load_dataset(FILE_BUILDERS[path.suffix.lower()], data_files=str(path), split="train",
                                     cache_dir=str(cache), keep_in_memory=True)


def jsonl_defect(path: Path) -> str | None:
    """For a JSON Lines file `datasets` failed on: its first bad line, with the row and the cause
    (analysis.corpora.jsonl.first_defect: not UTF-8, not JSON, not an object, a key twice, a lone surrogate).
    None for other files, for a .json file that holds one JSON document over several lines (an array, a
    pretty-printed object: not JSON Lines), and when every line reads (the failure is then `datasets`' own,
    which `reader_cause` names)."""
    suffix = path.suffix.lower()
    if FILE_BUILDERS.get(suffix) != "json":
        return None
    if suffix == ".json":
        with path.open("rb") as lines:
            first = next((line for line in lines if line.strip()), b"").strip().removeprefix(b"\xef\xbb\xbf")
        if not (first.startswith(b"{") and first.endswith(b"}")):
            return None
    return first_defect(path)


def reader_cause(exc: BaseException) -> str:
    """What actually went wrong under `datasets`' wrapper (DatasetGenerationError: "An error occurred while
    generating the dataset"): the innermost cause, with the byte of a decoding error."""
    seen, inner = {id(exc)}, exc
    while (nxt := inner.__cause__ or inner.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        inner = nxt
    if isinstance(inner, UnicodeDecodeError):
        return (f"not valid {inner.encoding} text: byte 0x{inner.object[inner.start]:02x} at "
                f"offset {inner.start:,} ({inner.reason}); save the file as UTF-8")
    text = " ".join(str(inner).split()) or "no message"
    if "surrogate" in text:
        return f"a lone surrogate in the text ({text[:200]}); such a string is not valid UTF-8"
    if "UTF8" in text or "UTF-8" in text:
        return f"{type(inner).__name__}: {text[:200]}; save the file as UTF-8"
    return f"{type(inner).__name__}: {text[:300]}"


def _rows(split, where: str) -> Iterator[dict[str, Any]]:
    """The split's rows as dicts; a row that cannot be decoded is a CorpusError naming it."""
    rows = iter(split)
    for index in range(len(split)):
        try:
            yield dict(next(rows))
        except UnicodeDecodeError as exc:  # a string column that is not UTF-8
            raise CorpusError(f"{where} row {index}: a text field is not valid UTF-8 (byte "
                              f"0x{exc.object[exc.start]:02x}: {exc.reason}); save the dataset as UTF-8") from None
        except Exception as exc:  # noqa: BLE001 - arrow's readers raise ArrowInvalid and friends for bad strings
            raise CorpusError(f"{where} row {index}: cannot be read ({reader_cause(exc)})") from exc


def _string_id(row: dict[str, Any], column: str) -> dict[str, Any]:
    """An integer case id as its decimal string (most hub datasets, CanItEdit among them, number their
    rows with an int64 `id`); a bool or any other type is left for check_fields to name."""
    value = row.get(column)
    if isinstance(value, int) and not isinstance(value, bool):
        return {**row, column: str(value)}
    return row


def records(split, fields: dict[str, str], where: str) -> list[tuple[str, dict[str, Any]]]:
    columns = list(split.column_names)
    wanted = [fields.get(name, name) for name in REQUIRED]
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise CorpusError(f"{where}: missing field(s) {missing} (the dataset's columns: {columns}); "
                          "map them with fields: {source: COLUMN, target: COLUMN}")
    for name, column in fields.items():
        if column not in columns:
            raise CorpusError(f"{where}: fields maps {name!r} to {column!r}, which the dataset lacks "
                              f"(its columns: {columns})")
    if len(split) == 0:
        raise CorpusError(f"{where}: the dataset is empty (no rows in this split)")
    id_column = fields.get("case_id", "case_id")
    return [(f"{where} row {i}", _string_id(row, id_column)) for i, row in enumerate(_rows(split, where))]


def load_hfdataset(settings: HFDatasetSettings) -> tuple[list[Case], HFDatasetReport]:
    where = f"dataset {settings.dataset} [{settings.split}]"
    fields = check_mapping(settings.fields, where)
    check_pin(settings, where)
    local = hfdataset_is_local_file(settings) and Path(settings.dataset).is_file()
    file_sha256 = verified_digest(settings, where) if local else None  # before a byte of it is parsed
    split = load_split(settings)
    rows = records(split, fields, where)
    corpus = hfdataset_corpus(settings)
    cases, ignored = cases_from_records(rows, corpus, settings.language, fields, where)
    fingerprint = getattr(split, "_fingerprint", None)
    digest = file_sha256 or (hashlib.sha256(fingerprint.encode()).hexdigest() if fingerprint else None)
    origin = f"hf:{settings.dataset}" + (f"@{settings.revision}" if settings.revision else "")
    return cases, HFDatasetReport(corpus, origin, digest, settings.split, len(cases), tuple(sorted(ignored)),
                                  pinned=settings.sha256 is not None)
