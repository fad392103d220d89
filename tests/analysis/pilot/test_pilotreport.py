"""analysis.pilot.report's statistics: every pilot EM with a 95% interval and every before/after difference
with an exact McNemar p-value, from the paired per-case outcomes (or from the counts when one side is 0)."""

from __future__ import annotations

import polars as pl
import pytest
from fixtures import pilot_record

from analysis.coverage.copyinput import copy_scores
from analysis.errors import CorpusError
from analysis.pilot import report as pilotreport
from analysis.stats import clopper_pearson, mcnemar_exact
from kernels_profile.stages.pilot import records_frame


def _records(before: list[bool], after: list[bool], split: str = "heldout") -> pl.DataFrame:
    rows = []
    for phase, seed, outcomes in (("before", None, before), ("after", 0, after)):
        for i, hit in enumerate(outcomes):
            rows.append({"phase": phase, "mode": "program", "seed": seed, "split": split, "case_id": f"c/{i}",
                         "exact_match": hit})
    return pl.DataFrame(rows, schema={"phase": pl.Utf8, "mode": pl.Utf8, "seed": pl.Int64, "split": pl.Utf8,
                                      "case_id": pl.Utf8, "exact_match": pl.Boolean})


def test_paired_outcomes_count_the_discordant_pairs_of_the_same_cases():
    before = [True, True, False, False, False, True]
    after = [True, False, True, True, False, False]
    out = pilotreport.paired_outcomes(_records(before, after), "heldout")
    assert out == {"0": {"cases": 6, "both": 1, "before_only": 2, "after_only": 2, "neither": 1}}
    assert pilotreport.paired_outcomes(_records(before, after), "HEvalFix-Py") == {}


def test_the_mcnemar_p_uses_the_recorded_pairs_and_else_the_counts_only_when_they_decide_them():
    m = {"heldout_cases": 33, "heldout_em_before": 3, "heldout_em_after": {"0": 5},
         "heldout_paired": {"0": {"before_only": 1, "after_only": 3}}}
    assert pilotreport.mcnemar_p(m, "heldout", "0") == mcnemar_exact(1, 3)
    del m["heldout_paired"]
    assert pilotreport.mcnemar_p(m, "heldout", "0") is None  # 3 -> 5 does not say which cases changed
    m = {"heldout_cases": 33, "heldout_em_before": 0, "heldout_em_after": {"0": 2}}
    assert pilotreport.discordant(m, "heldout", "0") == (0, 2) and pilotreport.mcnemar_p(m, "heldout", "0") == 0.5


def test_every_pilot_table_carries_the_interval_and_the_paired_test():
    m = {"steps": 96, "heldout_cases": 33, "heldout_em_before": 0, "heldout_em_after": {"0": 2},
         "teacher_forced_before": {"program": {"loss": 2.0}}, "teacher_forced_after": {"program": {"0": {"loss": 0.3}}}}
    low, high = clopper_pearson(2, 33)
    for table in (pilotreport.before_after_table(m), pilotreport.runs_table(m)):
        row = table.row(0, named=True)
        assert (row["heldout_em_after_ci_low"], row["heldout_em_after_ci_high"]) == (low, high)
        assert row["heldout_mcnemar_p"] == 0.5 and row["heldout_difference"] == "not significant"
        assert row["humaneval_mcnemar_p"] is None  # not decoded: no figure, not a zero
    em = pilotreport.em_table(_records([False] * 33, [True, True] + [False] * 31).with_columns(
        valid=pl.lit(True), stopped=pl.lit("eos"), copy_coverage=pl.lit(0.5), error=pl.lit(None, pl.Utf8),
        seconds=pl.lit(1.0), program_tokens=pl.lit(5)))
    after = em.filter(pl.col("phase") == "after").row(0, named=True)
    assert (after["em_ci_low"], after["em_ci_high"]) == (low, high)
    assert em.filter(pl.col("phase") == "before").row(0, named=True)["em_ci_low"] == 0.0


def test_a_significant_lift_is_called_significant():
    m = {"steps": 96, "humaneval_cases": 33, "humaneval_em_before": 0, "humaneval_em_after": {"0": 12},
         "heldout_cases": 33, "heldout_em_before": 0, "heldout_em_after": {"0": 0}}
    text = pilotreport.em_change_text(m, "humaneval", "0")
    assert "McNemar exact p = " in text and "not significant" not in text and ", significant" in text
    assert pilotreport.mcnemar_p(m, "humaneval", "0") == pytest.approx(2 * 0.5 ** 12)


def test_the_em_table_reads_each_row_beside_copying_the_input():
    """The Copy Ceiling's control (issue 46 section 3): EM and gold-line recall beside what returning the input
    scores on the same cases, and the gain over it."""
    records = records_frame([
        pilot_record(phase="before", seed=None, case_id="c/0", exact_match=False, output="a\nX\n"),
        pilot_record(phase="before", seed=None, case_id="c/1", exact_match=False, output=None, error="too long"),
        pilot_record(case_id="c/0", exact_match=True, output="a\nB\n"),
        pilot_record(case_id="c/1", exact_match=False, output="q\n")])
    copies = copy_scores([("heldout", "c/0", "a\nb\n", "a\nB\n"), ("heldout", "c/1", "q\nr\n", "q\nR\n")])
    table = pilotreport.em_table(records, copies)
    before = table.filter(pl.col("phase") == "before").row(0, named=True)
    after = table.filter(pl.col("phase") == "after").row(0, named=True)
    assert before["copy_em"] == after["copy_em"] == 0.0 and after["em_gain_over_copy"] == pytest.approx(0.5)
    assert before["copy_line_recall"] == pytest.approx(0.5)  # each input keeps one of the target's two lines
    assert before["line_recall"] == pytest.approx(0.25)  # c/0 keeps `a`; c/1 could not run
    assert before["line_recall_gain_over_copy"] == pytest.approx(-0.25)  # copying would have kept more
    assert after["line_recall"] == pytest.approx(0.75) and after["line_recall_gain_over_copy"] == pytest.approx(0.25)
    assert pilotreport.em_table(records).columns == table.columns[:len(pilotreport.em_table(records).columns)]
    assert pilotreport.copy_metrics(copies) == {"heldout": {"cases": 2, "exact_match": 0, "line_recall": 0.5}}
    with pytest.raises(CorpusError, match="no copy baseline for heldout/c/1"):
        pilotreport.em_table(records, copies.filter(pl.col("case_id") == "c/0"))
