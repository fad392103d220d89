"""analysis.stages.grammar_forcing: settings from params, named errors, and one small run in a scratch
output root (HumanEvalPack Python body cases: corpora -> programs -> grammar-forcing)."""

import json

import polars as pl
import pytest
from fixtures import params_with

from analysis.errors import ParamsError
from analysis.stages.grammar_forcing import _eos_id, settings


def test_settings_read_the_group_and_name_a_bad_value():
    s = settings(params_with())
    assert s.eos_token == "<|endoftext|>" and s.cases_per_corpus == 0
    with pytest.raises(ParamsError, match="grammar_forcing.cases_per_corpus' must be >= 0"):
        settings(params_with(**{"grammar_forcing.cases_per_corpus": -1}))
    with pytest.raises(ParamsError, match="grammar_forcing.eos_token' is empty"):
        settings(params_with(**{"grammar_forcing.eos_token": ""}))


def test_an_unknown_eos_token_is_named(qwen):
    assert _eos_id(qwen, "<|endoftext|>") == 151643
    with pytest.raises(ParamsError, match="eos_token '<eos>' is not a token of"):
        _eos_id(qwen, "<eos>")


@pytest.mark.slow
def test_a_small_run_writes_the_table_the_spans_and_the_metrics(stage_scratch):
    from analysis.cli import main

    assert main(["--set", "grammar_forcing.cases_per_corpus=6", "--set", "parallel.n_jobs=1", "grammar-forcing"]) == 0
    table = pl.read_csv(stage_scratch / "reports/tables/grammar_forcing.csv")
    assert table["corpus"].to_list() == ["HEvalFix-Py", "all"]
    row = table.row(0, named=True)
    spans = pl.read_parquet(stage_scratch / "data/grammar/forcing_spans.parquet")
    assert row["cases"] == 6 and row["copy_spans"] == spans.height > 0
    assert row["ff_equal"] == spans["ff_equal"].sum() and row["non_canonical"] == spans["non_canonical"].sum()
    assert row["ff_equal_share"] == pytest.approx(spans["ff_equal"].mean())
    assert row["compile_p50_ms"] > 0 and row["mask_p99_us"] >= row["mask_p50_us"] > 0
    metrics = json.loads((stage_scratch / "reports/metrics/grammar_forcing.json").read_text())
    assert metrics["longest_source_lines"] == spans["n_lines"].max() == row["max_lines"]
    assert metrics["per_corpus"]["all"]["copy_spans"] == spans.height
    assert (stage_scratch / "reports/tables/grammar_forcing.md").read_text().startswith("| corpus |")
