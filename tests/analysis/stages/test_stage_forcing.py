"""analysis.stages.forcing on the scratch pipeline's HumanEvalPack cases: one row per corpus and one over
all, the per-span records and the metrics; a bad EOS token is a named error."""

import json

import polars as pl
import pytest

from analysis.cli import main
from analysis.errors import ParamsError
from analysis.stages.forcing import ALL, settings


@pytest.mark.slow
def test_the_stage_writes_its_table_spans_and_metrics(stage_scratch):
    assert main(["forcing", "--set", "forcing.limit=4"]) == 0
    table = pl.read_csv(stage_scratch / "reports/tables/grammar_forcing.csv")
    spans = pl.read_parquet(stage_scratch / "data/grammar/forcing_spans.parquet")
    corpora = sorted(spans["corpus"].unique())
    assert table["corpus"].to_list() == corpora + [ALL]
    total = table.filter(pl.col("corpus") == ALL).row(0, named=True)
    assert total["cases"] == 4 * len(corpora) and total["copy_spans"] == spans.height > 0
    assert total["ff_equal_share"] == pytest.approx(spans["ff_equal"].mean())
    assert total["refused"] == total["rejected"] == 0 and total["compile_p50_ms"] > 0
    metrics = json.loads((stage_scratch / "reports/metrics/grammar_forcing.json").read_text())
    assert metrics["programs"] == total["cases"] and metrics["failures"] == []
    assert metrics["longest_source_lines"] == total["max_lines"]


def test_the_eos_token_is_checked(qwen):
    from analysis.stages.forcing import eos_id

    assert eos_id(qwen, "<|endoftext|>") == 151643
    with pytest.raises(ParamsError, match="not a token"):
        eos_id(qwen, "<|nope|>")
    with pytest.raises(ParamsError, match="forcing.eos_token is empty"):
        settings({"tokenizer": {"spec": "qwen2.5"}, "forcing": {"eos_token": "", "limit": 0}})
