"""The copy-the-input baseline (analysis.coverage.copyinput): what returning the input scores, by hand, and that no
shipped corpus lets it score an exact match (issue 46 section 3, the Copy Ceiling)."""

import polars as pl
from fixtures import ROOT

from analysis.coverage.copyinput import copy_scores, exact_match, line_recall


def test_line_recall_counts_the_target_lines_reproduced_in_order():
    target = "a\nb\nc\nd\n"
    assert line_recall("a\nb\nc\nd\n", target) == 1.0
    assert line_recall("a\nX\nc\nd\n", target) == 0.75          # one line edited
    assert line_recall("d\nc\nb\na\n", target) == 0.25          # reordered: one line in order
    assert line_recall(None, target) == 0.0                     # no output
    assert line_recall("", "") == 1.0 and line_recall("x", "") == 0.0


def test_copy_scores_are_the_input_scored_as_an_output():
    scores = copy_scores([("s", "c/0", "a\nb\n", "a\nB\n"), ("s", "c/1", "same\n", "same\n")]).sort("case_id")
    assert scores["copy_exact"].to_list() == [False, True]
    assert scores["copy_line_recall"].to_list() == [0.5, 1.0]
    assert exact_match(None, "") is False


def test_no_shipped_case_is_solved_by_copying_its_input():
    """So copying scores 0 EM on every corpus: a perturbation EM or a pilot EM is all gain over copy."""
    cases = pl.read_parquet(ROOT / "reports/percase/cases.parquet")
    assert cases.height and not (cases["source"] == cases["target"]).any()
