"""analysis.parallel.tables: the case and program tables read back by the stages that start from them,
whole or shard by shard, refusing a stale, incomplete or orphaned programs table."""

import polars as pl
import pytest

from analysis.corpora.cases import Case, cases_frame
from analysis.pipeline.digest import parquet_metadata
from analysis.errors import CorpusError, StaleInputError
from analysis.layout import CASES, PROGRAMS
from analysis.parallel.tables import case_shards, joined_programs, program_shards, read_programs

CASE_LIST = [Case(f"c{i}", "toy", "python", "body", f"a{i}\n", f"b{i}\n") for i in range(5)]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CASES.parent.mkdir(parents=True)
    PROGRAMS.parent.mkdir(parents=True)
    cases_frame(CASE_LIST).write_parquet(CASES)
    return tmp_path


def write_programs(case_ids, drop=()) -> None:
    frame = pl.DataFrame({"case_id": case_ids, "corpus": "toy", "framing": "body",
                          "level": "line", "program": [f"<gen>{c}</gen>" for c in case_ids]})
    frame.drop(list(drop)).write_parquet(PROGRAMS, metadata=parquet_metadata([CASES]))


def test_joined_programs_whole_and_by_shard_agree(scratch):
    write_programs(["c0", "c1", "c1", "c3"])
    whole = joined_programs()
    assert whole["case_id"].to_list() == ["c0", "c1", "c1", "c3"]
    assert whole["source"].to_list() == ["a0\n", "a1\n", "a1\n", "a3\n"]
    for shard in (1, 2, 10):
        assert pl.concat(list(program_shards(shard))).equals(whole), shard


def test_case_shards_read_the_cases_a_shard_at_a_time(scratch):
    shards = list(case_shards(2, ["case_id"]))
    assert [s.height for s in shards] == [2, 2, 1] and all(s.columns == ["case_id"] for s in shards)
    assert pl.concat(shards)["case_id"].to_list() == [c.case_id for c in CASE_LIST]


def test_a_program_whose_case_is_missing_is_named(scratch):
    write_programs(["c0", "zz"])
    with pytest.raises(CorpusError, match=r"1 programs name cases not in .*'zz'.*rerun `copydecode programs`"):
        joined_programs()
    with pytest.raises(CorpusError, match="programs name cases not in"):
        list(program_shards(2))


def test_programs_built_from_other_cases_are_stale(scratch):
    write_programs(["c0"])
    cases_frame(CASE_LIST[:3]).write_parquet(CASES)  # a corpora rerun after programs
    with pytest.raises(StaleInputError, match="rerun `copydecode programs`"):
        read_programs()
    with pytest.raises(StaleInputError, match="rerun `copydecode programs`"):
        program_shards(2)


def test_an_incomplete_or_absent_programs_table_is_named(scratch):
    with pytest.raises(CorpusError, match="programs.parquet not found; run `copydecode programs`"):
        read_programs()
    with pytest.raises(CorpusError, match="programs.parquet not found; run `copydecode programs`"):
        program_shards(2)
    write_programs(["c0"], drop=["level"])
    with pytest.raises(CorpusError, match=r"missing columns \['level'\]"):
        read_programs()
    with pytest.raises(CorpusError, match=r"missing columns \['level'\]"):
        program_shards(2)


def test_no_cases_table_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError, match="no cases table; run `copydecode corpora`"):
        list(case_shards(2))
