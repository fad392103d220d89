"""analysis.corpora.jsonl: the one JSON Lines reader of the corpus files. Lines split on '\\n' only;
every defect is a CorpusError naming the file and the 1-based line."""

import json

import pytest

from analysis.corpora.jsonl import JsonlRecord, read_jsonl
from analysis.errors import CorpusError


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_records_keep_their_line_numbers_across_blank_lines(tmp_path):
    path = write(tmp_path / "a.jsonl", b'{"a": 1}\n\n  \t\n{"a": 2}\n')
    assert read_jsonl(path) == [JsonlRecord(1, {"a": 1}), JsonlRecord(4, {"a": 2})]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])  # str.splitlines would cut at each
def test_unicode_line_separators_inside_a_string_do_not_split_the_record(tmp_path, separator):
    record = {"source": f"a{separator}b", "target": "c"}
    path = write(tmp_path / "a.jsonl", (json.dumps(record, ensure_ascii=False) + "\n").encode())
    assert read_jsonl(path) == [JsonlRecord(1, record)]


def test_crlf_and_a_byte_order_mark_are_read(tmp_path):
    path = write(tmp_path / "a.jsonl", b'\xef\xbb\xbf{"a": 1}\r\n{"a": 2}\r\n')
    assert [r.data["a"] for r in read_jsonl(path)] == [1, 2]


def test_invalid_utf8_names_the_line_and_byte_column(tmp_path):
    path = write(tmp_path / "a.jsonl", b'{"a": 1}\n{"a": "x\xffy"}\n')
    with pytest.raises(CorpusError, match=f"{path}:2: not valid UTF-8 \\(byte 0xff at byte column 9"):
        read_jsonl(path)


def test_a_utf16_file_is_named_as_such(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"a": 1}\n'.encode("utf-16"))
    with pytest.raises(CorpusError, match="looks like UTF-16.*save it as UTF-8"):
        read_jsonl(path)


@pytest.mark.parametrize("text, message", [
    ('{"a": 1}\n{"a": \n', ":2: not valid JSON \\(Expecting value at column 7\\)"),
    ('[{"a": 1}]\n', ":1: expected a JSON object, got list \\(JSON Lines needs one object per line"),
    ('[{"a": 1},\n{"a": 2}]\n', ":1: not valid JSON .*this looks like a JSON array"),
    ('{"a": 1}\n3\n', ":2: expected a JSON object, got int"),
    ('{"a": 1, "a": 2}\n', ":1: the key 'a' is given twice in one object"),
    ('{"a": {"b": 1, "b": 1}}\n', ":1: the key 'b' is given twice"),
    ('{"a": "\\ud800"}\n', ":1: record\\['a'\\] holds a lone surrogate"),
    ('{"\\udfff": 1}\n', ":1: record key '\\\\udfff' holds a lone surrogate"),
    ('{"a": ["ok", "\\ud800"]}\n', ":1: record\\['a'\\]\\[1\\] holds a lone surrogate"),
    ('{"a": "x\ty"}\n', ":1: not valid JSON \\(Invalid control character at column 9\\)"),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n", ":1: not valid JSON \\(nested too deeply\\)"),
    ('{"a": ' + "9" * 5000 + "}\n", ":1: not readable JSON"),
])
def test_each_defect_is_a_named_corpus_error(tmp_path, text, message):
    path = write(tmp_path / "a.jsonl", text.encode())
    with pytest.raises(CorpusError, match=f"{path}{message}"):
        read_jsonl(path)


def test_a_missing_or_empty_file_is_named(tmp_path):
    with pytest.raises(CorpusError, match=f"{tmp_path / 'no.jsonl'}: no such file \\(set data.dir\\)"):
        read_jsonl(tmp_path / "no.jsonl", missing_hint="set data.dir")
    with pytest.raises(CorpusError, match="no such file$"):
        read_jsonl(tmp_path / "no.jsonl")
    for blank in (b"", b"\n \n", b"\xef\xbb\xbf\r\n"):
        with pytest.raises(CorpusError, match="the file is empty"):
            read_jsonl(write(tmp_path / "e.jsonl", blank))
