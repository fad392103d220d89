"""One JSON Lines reader for every corpus file (HumanEvalPack, a user's edit pairs).

Lines are split on '\\n' only. `str.splitlines` also breaks on U+2028, U+2029, U+0085, '\\x0b',
'\\x0c', '\\x1c'-'\\x1e' and a lone '\\r', all of which JSON allows raw inside a string, so a record
holding one of them would be cut in two. A trailing '\\r' (a CRLF file) is JSON whitespace and
needs nothing special; a UTF-8 byte order mark at the start is dropped.

Every defect is a CorpusError naming the file and the 1-based line: invalid UTF-8 (with the byte
and its column), malformed JSON, a value that is not an object, and a string holding a lone
surrogate (JSON's "\\ud800" escape decodes to one; it cannot be written as UTF-8, so it would
fail later, far from its cause, when the table is written).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import CorpusError

_BOM = "\ufeff"
_JSON_BLANK = " \t\r"


@dataclass(frozen=True)
class JsonlRecord:
    line: int  # 1-based line number in the file
    data: dict[str, Any]


def decode_utf8(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        utf16 = "; it looks like UTF-16 (a byte-order mark): save it as UTF-8" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise CorpusError(
            f"{path}:{line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at byte column {column}: {exc.reason}){utf16}"
        ) from None


def _unencodable(value: Any, where: str) -> str | None:
    """The JSON path of the first string (key or value) holding a lone surrogate, if any."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            bad = _unencodable(key, f"{where} key {key!r}") or _unencodable(item, f"{where}[{key!r}]")
            if bad:
                return bad
    if isinstance(value, list):
        for index, item in enumerate(value):
            bad = _unencodable(item, f"{where}[{index}]")
            if bad:
                return bad
    return None


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """object_pairs_hook: a key given twice in one object is an error (json keeps the last silently)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def parse_line(path: Path, lineno: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        hint = "; this looks like a JSON array, but JSON Lines needs one object per line" if (
            lineno == 1 and line.lstrip(_BOM + _JSON_BLANK).startswith("[")) else ""
        what = exc.msg.removesuffix(" at")  # json's own messages may end in "at" ("Invalid control character at")
        raise CorpusError(f"{path}:{lineno}: not valid JSON ({what} at column {exc.colno}){hint}") from None
    except RecursionError:
        raise CorpusError(f"{path}:{lineno}: not valid JSON (nested too deeply)") from None
    except _DuplicateKey as exc:
        raise CorpusError(f"{path}:{lineno}: the key {exc.key!r} is given twice in one object") from None
    except ValueError as exc:  # an integer past Python's int-string conversion limit (4300 digits)
        raise CorpusError(f"{path}:{lineno}: not readable JSON ({exc})") from None
    if isinstance(value, list):
        raise CorpusError(f"{path}:{lineno}: expected a JSON object, got list (JSON Lines needs one object "
                          "per line, not a JSON array)")
    if not isinstance(value, dict):
        raise CorpusError(f"{path}:{lineno}: expected a JSON object, got {type(value).__name__}")
    bad = _unencodable(value, "record")
    if bad:
        raise CorpusError(f"{path}:{lineno}: {bad} holds a lone surrogate (not encodable as UTF-8)")
    return value


def read_jsonl(path: str | Path, missing_hint: str = "") -> list[JsonlRecord]:
    """The objects of a JSON Lines file, one per non-blank line, with their line numbers."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: no such file{f' ({missing_hint})' if missing_hint else ''}")
    text = decode_utf8(path, path.read_bytes()).removeprefix(_BOM)
    records = [
        JsonlRecord(lineno, parse_line(path, lineno, line))
        for lineno, line in enumerate(text.split("\n"), start=1)
        if line.strip(_JSON_BLANK)
    ]
    if not records:
        raise CorpusError(f"{path}: the file is empty")
    return records


def document_surrogate(path: str | Path) -> str | None:
    """For a file holding one JSON document (an array of records, or one object): the first string that
    holds a lone surrogate, as `PATH (row R): record[...] holds ...` (R: the array index, as a dataset
    numbers its rows); None when there is none or the file is not one JSON document (JSON Lines:
    `first_defect` names those). Hugging Face `datasets` reads such a document through pandas, which drops
    a lone surrogate without a word ("x\\ud800y" becomes "xy"), so the text would change silently."""
    path = Path(path)
    try:
        value = json.loads(decode_utf8(path, path.read_bytes()).removeprefix(_BOM))
    except (CorpusError, ValueError, RecursionError):
        return None
    for row, record in enumerate(value if isinstance(value, list) else [value]):
        bad = _unencodable(record, "record")
        if bad:
            return f"{path} (row {row}): {bad} holds a lone surrogate (not encodable as UTF-8)"
    return None


def first_defect(path: str | Path) -> str | None:
    """The first defect `read_jsonl` would name, as `PATH:LINE (row R): cause` (R: the 0-based record, blank
    lines skipped, as a dataset numbers its rows), read one line at a time; None when every line reads.
    For naming the row and cause when another reader (Hugging Face `datasets`) fails on the file."""
    path = Path(path)
    row = 0
    with path.open("rb") as lines:
        for lineno, raw in enumerate(lines, start=1):
            if lineno == 1:
                raw = raw.removeprefix(_BOM.encode("utf-8"))
            try:
                line = raw.decode("utf-8").removesuffix("\n")  # as read_jsonl splits them
            except UnicodeDecodeError as exc:
                return (f"{path}:{lineno} (row {row}): not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte column "
                        f"{exc.start + 1}: {exc.reason}); save the file as UTF-8")
            if not line.strip(_JSON_BLANK):
                continue
            try:
                parse_line(path, lineno, line)
            except CorpusError as exc:
                return str(exc).replace(f"{path}:{lineno}:", f"{path}:{lineno} (row {row}):", 1)
            row += 1
    return None
