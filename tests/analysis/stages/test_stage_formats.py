"""analysis.stages.formats: per case, the token cost of each edit format (rewrite, diffs, the two copy
programs); per copy span, one token-boundary row per level; the per-corpus sums and their ratio to
rewriting the whole target."""

import polars as pl
import pytest
from fixtures import toy_program_table

from analysis.grammar.program import parse
from analysis.stages.formats import CASE_KEYS, format_summary, per_case_formats


def wide_programs(tokenizer) -> pl.DataFrame:
    """The toy programs one row per case, a column per level (as the stage pivots programs.parquet)."""
    return toy_program_table(tokenizer).pivot(on="level", index=["case_id", "corpus", "framing", "source", "target"],
                                              values="program")


def test_each_case_gets_every_formats_cost_and_each_copy_a_boundary_row(qwen):
    wide = wide_programs(qwen)
    costs, spans = per_case_formats(wide, qwen, udiff_context=3)
    assert costs.select(CASE_KEYS).rows() == wide.select(CASE_KEYS).rows()
    assert set(costs.columns) - set(CASE_KEYS) == {"rewrite", "unified_diff", "search_replace", "copy_line", "copy_token"}
    for row, case in zip(costs.iter_rows(named=True), wide.iter_rows(named=True)):
        assert row["rewrite"] == qwen.count(case["target"]) and row["copy_line"] == qwen.count(case["line"])
    copies = sum(len(parse(p).copies) for level in ("line", "token") for p in wide[level])
    assert spans.height == copies and set(spans["level"]) <= {"line", "token"}


def test_more_diff_context_never_makes_the_diff_cheaper(qwen):
    wide = wide_programs(qwen)
    narrow, _ = per_case_formats(wide, qwen, udiff_context=0)
    broad, _ = per_case_formats(wide, qwen, udiff_context=5)
    assert (broad["unified_diff"] >= narrow["unified_diff"]).all()
    assert broad.drop("unified_diff").equals(narrow.drop("unified_diff"))


def test_the_summary_sums_per_corpus_and_sets_each_format_beside_rewriting():
    costs = pl.DataFrame({"case_id": ["a", "b", "c"], "corpus": ["C", "C", "D"], "framing": ["body"] * 3,
                          "rewrite": [10, 30, 5], "copy_line": [4, 6, 5]})
    summary, formats = format_summary(costs)
    assert formats == ["rewrite", "copy_line"]
    assert summary.select("corpus", "n_cases", "rewrite", "copy_line").rows() == [("C", 2, 40, 10), ("D", 1, 5, 5)]
    assert summary["copy_line_vs_rewrite"].to_list() == pytest.approx([0.25, 1.0])
    assert "rewrite_vs_rewrite" not in summary.columns
