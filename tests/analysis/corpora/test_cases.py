"""analysis.corpora.cases: the cases table every stage reads; each defect is a CorpusError naming the
case, the column or the file."""

import polars as pl
import pytest

from analysis.corpora.cases import (
    CASES_SCHEMA,
    MEMORY_PER_TEXT_BYTE,
    Case,
    cases_frame,
    cases_from_frame,
    read_cases,
)
from analysis.errors import CorpusError

CASES = [Case("c1", "toy", "python", "body", "a\n", "b\n", "fix it"), Case("c2", "toy", "python", "body", "x", "y")]


def test_a_cases_table_round_trips_through_parquet(tmp_path):
    frame = cases_frame(CASES)
    assert list(frame.schema) == list(CASES_SCHEMA) and frame["instruction"].to_list() == ["fix it", None]
    frame.write_parquet(tmp_path / "cases.parquet")
    assert cases_from_frame(read_cases(tmp_path / "cases.parquet")) == CASES


def test_empty_targets_and_duplicate_ids_are_refused():
    with pytest.raises(CorpusError, match=r"1 case\(s\) have an empty target, e.g. \['c3'\]"):
        cases_frame([*CASES, Case("c3", "toy", "python", "body", "a", "")])
    with pytest.raises(CorpusError, match=r"duplicate case ids: \['c1'\]"):
        cases_frame([*CASES, CASES[0]])
    # the same id in another framing is another case
    assert cases_frame([*CASES, Case("c1", "toy", "python", "decl", "a", "b")]).height == 3


def test_a_null_required_column_names_the_case():
    with pytest.raises(CorpusError, match=r"column 'source' is null in 1 row\(s\), first at row 1 \(case 'c2'\)"):
        cases_frame([CASES[0], Case("c2", "toy", "python", "body", None, "y")])


def test_a_text_above_the_size_limit_names_the_memory_it_would_need():
    big = Case("big", "toy", "python", "body", "s", "t" * 1000)
    need = 1000 * MEMORY_PER_TEXT_BYTE / 1e9
    with pytest.raises(CorpusError, match=rf"case 'big': its target holds 1,000 bytes, above corpora.max_text_bytes "
                                          rf"= 999 .*about {need:.1f} GB"):
        cases_frame([*CASES, big], max_text_bytes=999)
    assert cases_frame([*CASES, big], max_text_bytes=1000).height == 3


def test_many_short_lines_count_against_the_memory_budget():
    """L5: the guard measured bytes only; a text of many short lines needs several times the memory."""
    from analysis.corpora.cases import text_memory

    short = Case("short", "toy", "python", "body", "s", "x\n" * 400)  # 800 bytes in 400 lines
    with pytest.raises(CorpusError, match=rf"case 'short': its target holds 800 bytes in 400 lines, more memory than "
                                          rf".*about {text_memory(800, 400) / 1e9:.1f} GB"):
        cases_frame([*CASES, short], max_text_bytes=1000)
    code = Case("code", "toy", "python", "body", "s", ("y" * 39 + "\n") * 25)  # 1,000 bytes in 40-byte lines
    assert cases_frame([*CASES, code], max_text_bytes=1000).height == 3


def test_a_bad_cases_file_is_named(tmp_path):
    with pytest.raises(CorpusError, match="no cases table; run `copydecode corpora`"):
        read_cases(tmp_path / "cases.parquet")
    (tmp_path / "garbage.parquet").write_bytes(b"not parquet")
    with pytest.raises(CorpusError, match="garbage.parquet: not a readable parquet file"):
        read_cases(tmp_path / "garbage.parquet")
    cases_frame(CASES).drop("target").write_parquet(tmp_path / "short.parquet")
    with pytest.raises(CorpusError, match=r"short.parquet: missing columns \['target'\]"):
        read_cases(tmp_path / "short.parquet")
    cases_frame(CASES).with_columns(pl.lit(1).alias("language")).write_parquet(tmp_path / "typed.parquet")
    with pytest.raises(CorpusError, match=r"columns must hold strings, got \{'language': 'Int"):
        read_cases(tmp_path / "typed.parquet")


def cases_table():
    """Two cases, one with an instruction."""
    return cases_frame([
        Case("C/1", "C", "python", "body", "a\n", "b\n", "do it"),
        Case("C/2", "C", "python", "body", "c\n", "d\n"),
    ])


@pytest.mark.parametrize("column", ["source", "target", "case_id"])
def test_read_cases_null_is_named(tmp_path, column):
    path = tmp_path / "cases.parquet"
    cases_table().with_columns(pl.when(pl.col("case_id") == "C/2").then(None).otherwise(pl.col(column))
                               .alias(column)).write_parquet(path)
    with pytest.raises(CorpusError, match=f"{path}: column '{column}' is null in 1 row\\(s\\), first at row 1"):
        read_cases(path)


def test_read_cases_bad_files(tmp_path):
    path = tmp_path / "cases.parquet"
    cases_table().write_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusError, match=f"{path}: not a readable parquet file"):
        read_cases(path)
    path.write_bytes(b"garbage" * 20)
    with pytest.raises(CorpusError, match=f"{path}: not a readable parquet file"):
        read_cases(path)
    cases_table().drop("instruction").write_parquet(path)
    with pytest.raises(CorpusError, match=f"{path}: missing columns \\['instruction'\\]"):
        read_cases(path)
    cases_table().with_columns(pl.lit(3).alias("source")).write_parquet(path)
    with pytest.raises(CorpusError, match="columns must hold strings, got {'source': 'Int32'}"):
        read_cases(path)
