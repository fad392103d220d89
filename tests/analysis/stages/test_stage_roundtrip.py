"""analysis.stages.roundtrip: every program must resolve to its target; a mismatch is named by
case@framing/level, a program that does not resolve at all with its error, and an empty programs
table is a RoundTripError rather than a pass."""

import json

import polars as pl
import pytest
from fixtures import toy_program_table

from analysis.errors import RoundTripError
from analysis.layout import METRICS
from analysis.parallel.workers import SERIAL
from analysis.stages.roundtrip import RoundtripSettings, roundtrip_failures, run


def test_oracle_programs_pass(qwen):
    assert roundtrip_failures(toy_program_table(qwen), qwen) == []


def test_a_wrong_target_and_a_broken_program_are_named(qwen):
    table = toy_program_table(qwen)
    first_line = (pl.col("case_id") == "T/1") & (pl.col("level") == "line")
    token_u1 = (pl.col("case_id") == "U/1") & (pl.col("level") == "token")
    damaged = table.with_columns(
        target=pl.when(first_line).then(pl.lit("something else\n")).otherwise(pl.col("target")),
        program=pl.when(token_u1).then(pl.lit('<copy lines="1-99"/>')).otherwise(pl.col("program")),
    )
    failures = roundtrip_failures(damaged, qwen)
    assert failures[0] == "T/1@body/line"
    assert len(failures) == 2 and failures[1].startswith("U/1@body/token (ProgramError: ")


def stage_on(monkeypatch, tmp_path, qwen, shards):
    """`run` on the given program shards, in tmp_path, with the embedded tokenizer."""
    from analysis.stages import roundtrip

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(roundtrip, "program_shards", lambda shard: iter(shards))
    monkeypatch.setattr(roundtrip, "load_tokenizer", lambda spec: qwen)
    return run(RoundtripSettings("embedded", SERIAL, 100))


def test_an_empty_programs_table_is_an_error_not_a_pass(tmp_path, monkeypatch, qwen):
    with pytest.raises(RoundTripError, match="programs.parquet holds no program"):
        stage_on(monkeypatch, tmp_path, qwen, [])


def test_a_run_counts_each_level_over_shards_and_writes_the_failures_before_failing(tmp_path, monkeypatch, qwen):
    table = toy_program_table(qwen)
    metrics = stage_on(monkeypatch, tmp_path, qwen, [table.head(2), table.slice(2)])
    assert metrics == {"programs": 6, "passed": 6, "failed": 0, "per_level": {"line": 3, "token": 3}}
    broken = table.with_columns(target=pl.lit("x\n"))
    with pytest.raises(RoundTripError, match="6 oracle programs do not resolve to their target: \\['T/1@body/line'"):
        stage_on(monkeypatch, tmp_path, qwen, [broken])
    written = json.loads((tmp_path / METRICS / "roundtrip.json").read_text())
    assert written["failed"] == 6 and written["passed"] == 0 and len(written["failures"]) == 6
