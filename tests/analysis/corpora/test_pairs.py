import json

import polars as pl
import pytest

from analysis.corpora import registry
from analysis.corpora.cases import cases_frame
from analysis.errors import CorpusError
from analysis.corpora.jsonl import read_jsonl
from analysis.corpora.entries import PairsSettings
from analysis.corpora.pairs import load_pairs


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


PAIRS = [
    {"source": "a = 1\n", "target": "a = 2\n", "instruction": "bump a", "language": "python"},
    {"source": "x\u2028y\n", "target": "x\u2029y\n"},
]


# ---------------------------------------------------------------- the JSONL reader

def test_jsonl_splits_on_newline_only(tmp_path):
    text = "\u2028\u2029\x85\x0b\x0c\x1c\r"
    path = write_jsonl(tmp_path / "t.jsonl", [{"s": text}, {"s": "plain"}])
    records = read_jsonl(path)
    assert [r.data["s"] for r in records] == [text, "plain"] and [r.line for r in records] == [1, 2]


def test_jsonl_crlf_bom_and_blank_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"s": "a"}\r\n\r\n   \n{"s": "b"}\r\n')
    records = read_jsonl(path)
    assert [(r.line, r.data["s"]) for r in records] == [(1, "a"), (4, "b")]


def test_jsonl_lone_surrogate_names_line_and_field(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"s": "ok"}\n{"s": "bad \\ud800 here"}\n')
    with pytest.raises(CorpusError, match=r"t.jsonl:2: record\['s'\] holds a lone surrogate"):
        read_jsonl(path)


def test_jsonl_invalid_utf8_names_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"s": "ok"}\n{"s": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match=r"t.jsonl:2: not valid UTF-8 \(byte 0xe9 at byte column 11"):
        read_jsonl(path)
    path.write_bytes(b'{"s": "\xed\xa0\x80"}\n')  # a surrogate written as raw bytes
    with pytest.raises(CorpusError, match=r"t.jsonl:1: not valid UTF-8"):
        read_jsonl(path)


def test_jsonl_bad_json_and_non_objects(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"s": 1}\n{oops\n')
    with pytest.raises(CorpusError, match="t.jsonl:2: not valid JSON"):
        read_jsonl(path)
    path.write_text('{"s": 1}\n[1, 2]\n')
    with pytest.raises(CorpusError, match="t.jsonl:2: expected a JSON object, got list"):
        read_jsonl(path)
    path.write_text("[" * 100_000 + "\n")
    with pytest.raises(CorpusError, match="t.jsonl:1: not valid JSON"):
        read_jsonl(path)
    path.write_text("\n  \n")
    with pytest.raises(CorpusError, match="t.jsonl: the file is empty"):
        read_jsonl(path)


# ---------------------------------------------------------------- pairs

def test_jsonl_pairs(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", PAIRS)
    cases, report = load_pairs(PairsSettings(str(path)))
    assert [c.case_id for c in cases] == ["Pairs-mine/0", "Pairs-mine/1"]
    assert cases[0].instruction == "bump a" and cases[1].instruction is None
    assert [c.language for c in cases] == ["python", "unknown"]
    assert cases[1].source == PAIRS[1]["source"] and cases[1].target == PAIRS[1]["target"]
    assert {c.framing for c in cases} == {"pair"} and {c.corpus for c in cases} == {"Pairs-mine"}
    assert report.n_records == 2 and report.format == "jsonl" and report.ignored_fields == ()
    frame = cases_frame(cases)
    assert frame["instruction"].to_list() == ["bump a", None]


def test_own_ids_name_and_ignored_fields(tmp_path):
    records = [dict(r, case_id=f"k{i}", note="x") for i, r in enumerate(PAIRS)]
    path = write_jsonl(tmp_path / "mine.jsonl", records)
    cases, report = load_pairs(PairsSettings(str(path), name="MyEdits", language="js"))
    assert [c.case_id for c in cases] == ["MyEdits/k0", "MyEdits/k1"]
    assert [c.language for c in cases] == ["python", "js"] and report.ignored_fields == ("note",)


@pytest.mark.parametrize("record, message", [
    ({"target": "t"}, r"mine.jsonl:2: missing field 'source'"),
    ({"source": "s", "target": None}, r"mine.jsonl:2: missing field 'target' \(null\)"),
    ({"source": 3, "target": "t"}, r"mine.jsonl:2: field 'source' must be a string, got int"),
    ({"source": "s", "target": "t", "language": ["py"]}, r"mine.jsonl:2: field 'language' must be a string"),
    ({"source": "s", "target": "t", "case_id": 7}, r"mine.jsonl:2: field 'case_id' must be a string"),
])
def test_jsonl_field_errors(tmp_path, record, message):
    path = write_jsonl(tmp_path / "mine.jsonl", [PAIRS[0], record])
    with pytest.raises(CorpusError, match=message):
        load_pairs(PairsSettings(str(path)))


def test_duplicate_ids(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", [dict(PAIRS[0], case_id="a"), dict(PAIRS[1], case_id="a")])
    with pytest.raises(CorpusError, match=r"mine.jsonl:2: duplicate case_id 'a' \(first at .*mine.jsonl:1\)"):
        load_pairs(PairsSettings(str(path)))
    path = write_jsonl(tmp_path / "mine.jsonl", [dict(PAIRS[0], case_id="1"), PAIRS[1]])
    with pytest.raises(CorpusError, match="case id 'Pairs-mine/1' is given twice"):
        load_pairs(PairsSettings(str(path)))


def test_parquet_pairs(tmp_path):
    path = tmp_path / "mine.parquet"
    pl.DataFrame({"source": ["a\n", "b\n"], "target": ["A\n", "B\n"], "case_id": ["p", "q"],
                  "instruction": [None, "upper b"]}).write_parquet(path)
    cases, report = load_pairs(PairsSettings(str(path)))
    assert [(c.case_id, c.target, c.instruction) for c in cases] == [
        ("Pairs-mine/p", "A\n", None), ("Pairs-mine/q", "B\n", "upper b")]
    assert report.format == "parquet" and len(report.sha256) == 64


@pytest.mark.parametrize("frame, message", [
    (pl.DataFrame({"source": ["a"]}), r"mine.parquet: missing column\(s\) \['target'\]"),
    (pl.DataFrame({"source": ["a", None], "target": ["b", "c"]}), r"mine.parquet row 1: missing field 'source' \(null\)"),
    (pl.DataFrame({"source": [1], "target": ["b"]}), r"mine.parquet: column 'source' must hold strings, got Int64"),
    (pl.DataFrame({"source": ["a", "b"], "target": ["x", "y"], "case_id": ["k", "k"]}),
     r"mine.parquet row 1: duplicate case_id 'k' \(first at .*mine.parquet row 0\)"),
    (pl.DataFrame(schema={"source": pl.String, "target": pl.String}), r"mine.parquet: the file is empty"),
])
def test_parquet_errors(tmp_path, frame, message):
    path = tmp_path / "mine.parquet"
    frame.write_parquet(path)
    with pytest.raises(CorpusError, match=message):
        load_pairs(PairsSettings(str(path)))


def test_bad_files(tmp_path):
    with pytest.raises(CorpusError, match="no such pairs file"):
        load_pairs(PairsSettings(str(tmp_path / "absent.jsonl")))
    odd = tmp_path / "mine.csv"
    odd.write_text("source,target\n")
    with pytest.raises(CorpusError, match="cannot tell the format from the suffix '.csv'"):
        load_pairs(PairsSettings(str(odd)))
    garbage = tmp_path / "mine.parquet"
    garbage.write_bytes(b"PAR1 not really")
    with pytest.raises(CorpusError, match="mine.parquet: not a readable parquet file"):
        load_pairs(PairsSettings(str(garbage)))
    empty = tmp_path / "mine.jsonl"
    empty.write_text("")
    with pytest.raises(CorpusError, match="mine.jsonl: the file is empty"):
        load_pairs(PairsSettings(str(empty)))
    with pytest.raises(CorpusError, match="format must be auto, jsonl or parquet"):
        load_pairs(PairsSettings(str(empty), format="csv"))


def test_registry_builds_pairs_and_checks_kinds(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", PAIRS)
    build = registry.build_corpus("pairs", PairsSettings(str(path)))
    assert len(build.cases) == 2 and build.report["corpus"] == "Pairs-mine" and build.tables == {}
    assert set(registry.KINDS) == {"humanevalpack", "probeedit", "commits", "pairs", "hfdataset"}
    with pytest.raises(CorpusError, match="unknown corpus kind 'csv'"):
        registry.build_corpus("csv", PairsSettings(str(path)))
    with pytest.raises(CorpusError, match="corpus kind 'commits' takes CommitSettings, got PairsSettings"):
        registry.build_corpus("commits", PairsSettings(str(path)))
