"""Why a pilot run's held-out programs are wrong (analysis.pilot.diagnosis): range errors against the gold
program, the diagnosis text counted from them, the same-run check and the written files."""

from types import SimpleNamespace

import polars as pl
import pytest

from analysis.errors import CorpusError
from analysis.pilot.diagnosis import diagnosis, range_errors, write_diagnosis
from fixtures import pilot_record
from kernels_profile.pilot import jobs as pilot_jobs


def test_range_errors_compare_decoded_copy_ranges_with_the_gold_program():
    from types import SimpleNamespace

    from kernels_profile.tools.pilot_sweep import range_errors

    gold = SimpleNamespace(case_id="c/0", kind="change_literal", site_line=4,
                           program='<copy lines="1-3"/><gen>    x = 2\n</gen><copy lines="5-9"/>')
    records = pilot_jobs.records_frame([
        pilot_record(case_id="c/0", exact_match=False, program='<copy lines="1-4"/><gen>    x = 2\n</gen>'),
        pilot_record(case_id="c/0", seed=1, exact_match=True, program=gold.program),
        pilot_record(case_id="c/0", seed=2, phase="before", program="")])  # before: not an adapter's output
    frame = range_errors(records, [gold])
    assert frame["seed"].to_list() == [0, 1]
    assert frame["first_end_off"].to_list() == [1, 0] and frame["copies_off"].to_list() == [-1, 0]
    assert frame["ranges_exact"].to_list() == [False, True] and frame["gen_exact"].to_list() == [True, True]
    with pytest.raises(CorpusError, match="c/0 is not a held-out case"):
        range_errors(records, [])


def test_the_diagnosis_text_is_counted_from_the_run_it_names_and_refuses_another_runs_metrics(tmp_path):
    from types import SimpleNamespace

    from analysis.pilot.diagnosis import check_same_run, diagnosis, range_errors

    gold = SimpleNamespace(case_id="c/0", kind="off_by_one", site_line=4,
                           program='<copy lines="1-3"/><gen>    x = 2\n</gen><copy lines="5-9"/>')
    records = pilot_jobs.records_frame([
        pilot_record(case_id="c/0", exact_match=False, program='<copy lines="1-4"/><gen>    x = 2\n</gen>')])
    frame = range_errors(records, [gold])
    m = {"model": "smollm2-135m", "task": "bugfix", "steps": 96, "method": "LoRA r8", "heldout_em_after": {"0": 0}}
    text = diagnosis(frame, m, tmp_path / "records.parquet", tmp_path / "pilot.json")
    assert "smollm2-135m, task bugfix, 96 steps; LoRA r8" in text
    assert "Written by `copydecode pilot-sweep --diagnose " in text  # the default writer
    staged = diagnosis(frame, m, tmp_path / "records.parquet", tmp_path / "pilot.json", "the pilot stage (`copydecode pilot`)")
    assert staged.startswith("# Why the held-out programs are wrong\n\nWritten by the pilot stage (`copydecode pilot`) from")
    assert "exact match 0/1; copy ranges exactly right 0/1, gen text exactly right 1/1, both 0/1" in text
    assert "off by one or two lines in 1 (too short in 0, too long in 1)" in text and "copies missing in 1" in text
    check_same_run(frame, m, tmp_path / "r", tmp_path / "m")
    with pytest.raises(CorpusError, match="come from different runs"):
        check_same_run(frame, {**m, "heldout_em_after": {"0": 2}}, tmp_path / "r", tmp_path / "m")


GOLD = SimpleNamespace(case_id="c/0", kind="off_by_one", site_line=4,
                       program='<copy lines="1-3"/><gen>    x = 2\n</gen><copy lines="5-9"/>')


def test_a_program_with_no_copy_has_no_first_end_and_counts_as_missing_copies():
    records = pilot_jobs.records_frame([pilot_record(program="<gen>    x = 2\n</gen>", exact_match=False),
                                   pilot_record(seed=1, error="too long", program=None)])  # an error: not decoded
    frame = range_errors(records, [GOLD])
    assert frame["seed"].to_list() == [0] and frame["first_end_off"].to_list() == [None]
    assert frame["copies_off"].to_list() == [-2] and frame["gen_exact"].to_list() == [True]
    text = diagnosis(frame, {"model": "m"}, "r.parquet", "m.json")
    assert "with no copy to compare in 1; copies missing in 1, extra in 0" in text


def test_no_decoded_program_is_said_in_words():
    frame = range_errors(pilot_jobs.records_frame([pilot_record(split="train")]), [GOLD])
    assert frame.height == 0
    assert "No held-out program was decoded by a program adapter." in diagnosis(frame, {}, "r", "m")


def test_the_diagnosis_is_written_as_rows_and_as_text_then_rows(tmp_path):
    frame = range_errors(pilot_jobs.records_frame([pilot_record(program=GOLD.program)]), [GOLD])
    write_diagnosis(frame, {"model": "m", "heldout_em_after": {"0": 1}}, "r", "m", tmp_path / "range_errors")
    assert pl.read_csv(tmp_path / "range_errors.csv")["ranges_exact"].to_list() == [True]
    md = (tmp_path / "range_errors.md").read_text()
    assert md.startswith("# Why the held-out programs are wrong") and "c/0" in md.split("\n\n", 2)[2]
    with pytest.raises(CorpusError, match="not a held-out case"):
        range_errors(pilot_jobs.records_frame([pilot_record(case_id="c/9")]), [GOLD])
