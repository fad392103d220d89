"""analysis.pilot.report's statistics: every pilot EM with a 95% interval and every before/after difference
with an exact McNemar p-value, from the paired per-case outcomes (or from the counts when one side is 0)."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.pilot import report as pilotreport
from analysis.stats import clopper_pearson, mcnemar_exact


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
