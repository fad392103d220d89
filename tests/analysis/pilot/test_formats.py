"""The edit-format check, torch-free (UX review M3): every prompt's worked example reads back, by its own parser, as
the right edit; what a model writes is judged well formed, range error, applies and exact match by its format's own
grammar or parser; the table counts them with exact intervals."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.pilot.formats import (EXAMPLE_INSTRUCTION, EXAMPLE_SOURCE, EXAMPLE_TARGET, FORMATS, FREE, GRAMMAR,
                                    PROGRAM, SEARCH_REPLACE, UNIFIED_DIFF, examples, formats_metrics, formats_table,
                                    gold_text, grammar_rows, judge, lead_tiles, page_table, records_frame, spread,
                                    system_text)

SRC = "a = 1\nb = 2\nc = 3\n"
TGT = "a = 1\nb = 20\nc = 3\n"


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_prompt_shows_its_format_and_its_example_is_right(fmt):
    text = system_text(fmt, 3)
    answer = gold_text(fmt, EXAMPLE_SOURCE, EXAMPLE_TARGET, '<copy lines="1-2"/><gen>        return lo\n</gen>'
                                                             '<copy lines="4-6"/>', 3)
    assert EXAMPLE_INSTRUCTION in text and text.endswith(answer)
    assert judge(fmt, answer, EXAMPLE_SOURCE, EXAMPLE_TARGET).exact_match
    assert ("1: def clamp" in text) == (fmt == PROGRAM)  # only the program addresses numbered lines


@pytest.mark.parametrize("fmt, text, expected", [
    (PROGRAM, '<copy lines="1-1"/><gen>b = 20\n</gen><copy lines="3-3"/>', (True, False, True, True)),
    (PROGRAM, '```\n<copy lines="1-1"/><gen>b = 20\n</gen><copy lines="3-3"/>\n```', (True, False, True, True)),
    (PROGRAM, '<copy lines="1-1"/><gen>b = 20\n</gen><copy lines="3-4"/>', (True, True, False, False)),
    (PROGRAM, '<copy lines="1-2"/>', (True, False, True, False)),
    (PROGRAM, 'Here is the program: <copy lines="1-1"/>', (False, None, False, False)),
    (UNIFIED_DIFF, "--- a\n+++ b\n@@ -2 +2 @@\n-b = 2\n+b = 20\n", (True, False, True, True)),
    (UNIFIED_DIFF, "@@ -3 +3 @@\n-b = 2\n+b = 20\n", (True, True, True, True)),  # found by offset
    (UNIFIED_DIFF, "@@ -2,2 +2,2 @@\n-b = 2\n+b = 20\n", (False, None, False, False)),  # counts disagree
    (UNIFIED_DIFF, "@@ -2 +2 @@\n-b = 9\n+b = 20\n", (True, None, False, False)),
    (SEARCH_REPLACE, "<<<<<<< SEARCH\nb = 2\n=======\nb = 20\n>>>>>>> REPLACE", (True, None, True, True)),
    (SEARCH_REPLACE, "<<<<<<< SEARCH\nb = 3\n=======\nb = 20\n>>>>>>> REPLACE", (True, None, False, False)),
    (SEARCH_REPLACE, "b = 20", (False, None, False, False)),
])
def test_what_a_model_wrote_is_judged_by_its_own_parser(fmt, text, expected):
    judged = judge(fmt, text, SRC, TGT)
    assert (judged.well_formed, judged.range_error, judged.applies, judged.exact_match) == expected
    assert (judged.error is None) == judged.applies


def test_spread_takes_evenly_spaced_cases():
    assert spread(list(range(33)), 4) == [0, 8, 16, 24] and spread([1, 2], 8) == [1, 2] and spread([1, 2], 0) == []


def _record(variant, decoding, fmt, case, **verdict):
    return {"model": "m", "variant": variant, "prompt": "p", "decoding": decoding, "format": fmt, "case_id": case,
            "kind": "k", "budget": 10, "tokens": 6, "stopped": "eos", "seconds": 1.0, **verdict}


def test_the_table_counts_each_verdict_with_an_exact_interval():
    ok = dict(well_formed=True, range_error=False, applies=True, exact_match=True)
    ranged = dict(well_formed=True, range_error=True, applies=False, exact_match=False)
    bad = dict(well_formed=False, range_error=None, applies=False, exact_match=False)
    records = records_frame([_record("base model", FREE, PROGRAM, "c1", **ok),
                             _record("base model", FREE, PROGRAM, "c2", **ranged),
                             _record("base model", FREE, PROGRAM, "c3", **bad),
                             _record("base model", FREE, SEARCH_REPLACE, "c1", **{**ok, "range_error": None}),
                             _record("base model", FREE, UNIFIED_DIFF, "c1", **bad)])
    table = formats_table(records)
    assert table["format"].to_list() == [PROGRAM, UNIFIED_DIFF, SEARCH_REPLACE]  # the formats' order
    program = table.row(0, named=True)
    assert (program["cases"], program["well_formed_n"], program["range_errors_n"], program["range_errors_of"],
            program["exact_match_n"]) == (3, 2, 1, 2, 1)
    assert program["well_formed"] == pytest.approx(2 / 3)
    assert program["well_formed_ci_low"] < 2 / 3 < program["well_formed_ci_high"]
    sr = table.row(2, named=True)
    assert sr["range_errors_of"] == 0 and sr["range_errors"] is None  # no line numbers: no range error to count
    shown = page_table(formats_metrics(records)["rows"])
    assert shown["well formed"].to_list() == ["2/3", "0/1", "1/1"]
    assert shown["range errors (of well formed)"].to_list() == ["1/2", "0/0", "no line numbers"]
    tiles = lead_tiles(formats_metrics(records))
    assert tiles[0][1] == "copy program 2/3 · unified diff 0/1 · search/replace 1/1"
    assert "exact match: copy program 1/3" in tiles[0][0]
    assert examples(records)["format"].to_list() == ["copy program", "search/replace", "unified diff"]
    from analysis.pilot.formats import summary_sentence

    assert summary_sentence(formats_metrics(records)) == (
        "Which edit format the model writes correctly, on 3 held-out cases, each read by its own parser: base model, "
        "no grammar (p): copy program 2/3 well formed, 1/3 exact, unified diff 0/1 well formed, 0/1 exact, search/replace "
        "1/1 well formed, 1/1 exact.")
    assert summary_sentence(None) == "" and summary_sentence({"rows": []}) == ""


def test_the_pilots_own_grammar_decodes_join_the_table():
    pilot = pl.DataFrame([
        {"phase": "before", "seed": None, "split": "heldout", "mode": "program", "case_id": "c1", "kind": "k",
         "budget": 20, "program_tokens": 20, "stopped": "forced", "seconds": 2.0, "valid": False, "exact_match": False,
         "error": None, "program": '<copy lines="1-3"/>', "output": SRC},
        {"phase": "after", "seed": 0, "split": "heldout", "mode": "program", "case_id": "c1", "kind": "k",
         "budget": 20, "program_tokens": 9, "stopped": "eos", "seconds": 1.0, "valid": True, "exact_match": True,
         "error": None, "program": "p", "output": TGT},
        {"phase": "after", "seed": 0, "split": "heldout", "mode": "program", "case_id": "c9", "kind": "k",
         "budget": 20, "program_tokens": 9, "stopped": "eos", "seconds": 1.0, "valid": True, "exact_match": True,
         "error": None, "program": "p", "output": TGT},
    ])
    rows = grammar_rows(pilot, ["c1"], "m")
    assert [(r["variant"], r["decoding"], r["well_formed"], r["exact_match"]) for r in rows] == [
        ("base model", GRAMMAR, False, False), ("program adapter, seed 0", GRAMMAR, True, True)]
    assert records_frame(rows).height == 2
