"""analysis.pipeline.digest: outputs record the sha256 of their inputs; a consumer refuses an output whose
inputs changed, naming the output, the input and the stage to rerun; corpus records mark stages run
against another cases table."""

import hashlib
import os

import polars as pl
import pytest

from analysis.pipeline.digest import (
    CASES_TABLE,
    KEY,
    check_fresh,
    file_digest,
    input_digests,
    parquet_metadata,
    record_corpus,
    recorded_inputs,
    stale_stages,
)
from analysis.errors import StaleInputError


def test_file_digest_is_the_sha256_of_the_bytes(tmp_path):
    path = tmp_path / "x.bin"
    data = os.urandom(3 << 20)  # more than one 1 MiB block
    path.write_bytes(data)
    assert file_digest(path) == hashlib.sha256(data).hexdigest()


def test_a_missing_input_names_the_stage_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StaleInputError, match=r"data/programs/programs.parquet not found; run `copydecode programs`"):
        input_digests(["data/programs/programs.parquet"])
    with pytest.raises(StaleInputError, match="run `the stage that writes it` first"):
        input_digests(["elsewhere.txt"])


def write_output(path, inputs) -> None:
    pl.DataFrame({"a": [1, 2]}).write_parquet(path, metadata=parquet_metadata(inputs))


def test_an_output_records_its_inputs_and_is_fresh_until_one_changes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("one")
    write_output(tmp_path / "out.parquet", ["in.txt"])
    assert recorded_inputs("out.parquet") == {"in.txt": file_digest("in.txt")}
    check_fresh("out.parquet", "copydecode spans")  # nothing changed: no error
    (tmp_path / "in.txt").write_text("two")
    with pytest.raises(StaleInputError, match=r"stale input: out.parquet was built from a different in.txt .*"
                                              r"rerun `copydecode spans`"):
        check_fresh("out.parquet", "copydecode spans")
    (tmp_path / "in.txt").unlink()
    with pytest.raises(StaleInputError, match="built from in.txt, which is gone"):
        check_fresh("out.parquet", "copydecode spans")


def test_an_output_without_a_record_is_refused(tmp_path):
    plain, damaged, odd = tmp_path / "plain.parquet", tmp_path / "damaged.parquet", tmp_path / "odd.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(plain)
    damaged.write_bytes(b"not parquet")
    pl.DataFrame({"a": [1]}).write_parquet(odd, metadata={KEY: "[1, 2]"})  # JSON, but not an object
    for path in (plain, damaged, odd):
        assert recorded_inputs(path) is None, path
    with pytest.raises(StaleInputError, match="records no digest of the inputs"):
        check_fresh(plain, "copydecode programs")


def test_stale_stages_name_a_stage_run_against_another_cases_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CASES_TABLE.parent.mkdir(parents=True)
    CASES_TABLE.write_bytes(b"cases v1")
    (tmp_path / "spans.out").write_text("spans")
    (tmp_path / "bounds.out").write_text("bounds")
    record_corpus("corpora", [CASES_TABLE])
    record_corpus("spans", ["spans.out"])
    record_corpus("bounds", ["bounds.out", "never-written.out"])  # an output not on disk is not recorded
    assert stale_stages() == {}
    CASES_TABLE.write_bytes(b"cases v2")  # a corpora rerun
    (tmp_path / "bounds.out").write_text("bounds, rerun since by hand")  # its output is no longer the one recorded
    stale = stale_stages()
    assert list(stale) == ["spans"] and "rerun `copydecode spans`" in stale["spans"]


def test_a_damaged_corpus_record_judges_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert stale_stages() == {}  # no records at all
    record_dir = tmp_path / "data/.corpus"
    record_dir.mkdir(parents=True)
    (record_dir / "spans.json").write_text("{not json")
    (record_dir / "bounds.json").write_text('{"stage": "bounds"}')
    assert stale_stages() == {}
