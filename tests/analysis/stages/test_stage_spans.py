"""analysis.stages.spans: one span row per op whose token counts add up to the target's, the prompt
length each case's program starts at, the line boundaries that fall inside a BPE token summed over
shards, the coverage metric keys, and (slow, in a scratch folder) the prompt length on real cases."""

import polars as pl
import pytest
import yaml
from fixtures import ROOT, toy_program_table

from analysis.errors import ParamsError
from analysis.grammar.program import parse
from analysis.coverage.spans import SPANS_SCHEMA
from analysis.coverage.spans import build_spans
from analysis.stages.spans import boundary_counts, boundary_sums, coverage_metrics
from analysis.text.tokens import count_split_boundaries

BASE = yaml.safe_load((ROOT / "params.yaml").read_text())


def test_spans_cover_every_target_token_once_and_carry_the_prompt(qwen):
    table = toy_program_table(qwen)
    spans = build_spans(table, qwen, prompt_overhead_tokens=5)
    assert spans.schema == pl.Schema(SPANS_SCHEMA)
    per_program = spans.group_by("case_id", "level", maintain_order=True).agg(
        pl.col("n_tokens").sum(), pl.col("op_index").max() + 1, pl.col("prompt_tokens").unique())
    for row, program in zip(per_program.iter_rows(named=True), table.iter_rows(named=True)):
        assert (row["case_id"], row["level"]) == (program["case_id"], program["level"])
        assert row["n_tokens"] == len(qwen.encode(program["target"]).ids)
        assert row["op_index"] == len(parse(program["program"]))
        assert row["prompt_tokens"] == [len(qwen.encode(program["source"]).ids) + 5]
    gen = spans.filter(pl.col("kind") == "gen")
    assert (gen["n_tokens_src"] == 0).all() and (gen["directive_tokens"] > 0).all()


def test_a_negative_prompt_overhead_is_named(qwen):
    with pytest.raises(ParamsError, match="spans.prompt_overhead_tokens must be >= 0 tokens, got -1"):
        build_spans(toy_program_table(qwen).head(1), qwen, prompt_overhead_tokens=-1)


def test_boundary_counts_sum_over_shards_as_over_the_whole(qwen):
    cases = toy_program_table(qwen).filter(pl.col("level") == "line").select(
        "corpus", "framing", "target").with_columns(
        # a target whose newline sits inside a token ("\n\n" is one Qwen token) counts as inside
        target=pl.when(pl.col("corpus") == "Other").then(pl.lit("a\n\n\nb\n")).otherwise(pl.col("target")))
    whole = boundary_counts([cases], qwen)
    assert whole.columns == ["corpus", "framing", "inside", "boundaries", "share"]
    assert boundary_counts([cases.head(1), cases.slice(1)], qwen).equals(whole)
    other = whole.filter(pl.col("corpus") == "Other").row(0, named=True)
    assert other["inside"] == count_split_boundaries(qwen.encode("a\n\n\nb\n")) and other["inside"] > 0
    assert other["share"] == other["inside"] / other["boundaries"]
    assert whole["corpus"].to_list() == sorted(whole["corpus"].to_list())


def test_a_one_line_target_has_no_inner_boundary(qwen):
    sums = boundary_sums(pl.DataFrame({"corpus": ["C"], "framing": ["body"], "target": ["x = 1\n"]}), qwen)
    assert sums.row(0, named=True) == {"corpus": "C", "framing": "body", "inside": 0, "boundaries": 0}


def test_coverage_metrics_are_keyed_by_level_framing_corpus():
    coverage = pl.DataFrame({"level": ["line", "token"], "framing": ["body", "body"], "corpus": ["C", "pooled"],
                             "coverage": [0.5, 0.75], "ci_low": [0.4, 0.7], "ci_high": [0.6, 0.8],
                             "n_cases": [3, 5], "extra": [1, 2]})
    assert coverage_metrics(coverage) == {
        "line/body/C": {"coverage": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n_cases": 3},
        "token/body/pooled": {"coverage": 0.75, "ci_low": 0.7, "ci_high": 0.8, "n_cases": 5},
    }


@pytest.mark.slow  # a corpora -> programs -> spans build in a scratch folder
def test_spans_carry_the_prompt_length(stage_scratch):
    from analysis.text.tokens import load_tokenizer

    spans = pl.read_parquet(stage_scratch / "data/spans/spans.parquet")
    cases = pl.read_parquet(stage_scratch / "data/corpora/cases.parquet")
    overhead = BASE["spans"]["prompt_overhead_tokens"]
    per_case = spans.group_by("case_id", "framing").agg(pl.col("prompt_tokens").unique())
    assert (per_case["prompt_tokens"].list.len() == 1).all()  # one prompt length per case
    tokenizer = load_tokenizer()
    for row in cases.head(5).iter_rows(named=True):
        got = per_case.filter(pl.col("case_id") == row["case_id"])["prompt_tokens"][0][0]
        assert got == tokenizer.count(row["source"]) + overhead
