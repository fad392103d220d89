"""The engine run's request draw and the Copy-as-Decode emulation plan (analysis.engine.requests, .plan)."""

from __future__ import annotations

import polars as pl
import pytest

from analysis.engine.plan import copy_plan
from analysis.engine.requests import LONG, SHORT, DrawSettings, EngineRunError, closed_loop_order, draw_requests
from analysis.grammar.program import parse
from analysis.grammar.resolver import resolve


def cases(corpora=("A", "B"), n=10) -> pl.DataFrame:
    rows = []
    for corpus in corpora:
        for i in range(n):
            rows.append({"case_id": f"{corpus}-{i}", "corpus": corpus, "language": "py", "framing": "unit",
                         "source": "x = 1\n" * (i + 1), "target": "y\n", "instruction": None})
    return pl.DataFrame(rows)


def test_the_draw_names_every_corpus_with_short_and_long_cases_and_is_seeded():
    draw = DrawSettings(seed=3, short_per_corpus=2, long_per_corpus=1, framing="body", max_source_lines=8)
    first, notes = draw_requests(cases(), draw)
    again, _ = draw_requests(cases(), draw)
    assert first == again and notes == []
    assert [(r.corpus, r.length) for r in first] == [("A", SHORT), ("A", SHORT), ("A", LONG),
                                                     ("B", SHORT), ("B", SHORT), ("B", LONG)]
    assert all(r.source_lines <= 8 for r in first)  # max_source_lines holds
    short = [r.source_lines for r in first if r.length == SHORT]
    long = [r.source_lines for r in first if r.length == LONG]
    assert max(short) <= 4.5 < min(long)  # split at the median of the 8 kept cases (4.5)
    assert len({r.rid for r in first}) == len(first)


def test_adding_a_corpus_leaves_the_others_draws_alone():
    draw = DrawSettings(seed=0, short_per_corpus=1, long_per_corpus=1, framing="body", max_source_lines=100)
    two, _ = draw_requests(cases(("A", "B")), draw)
    three, _ = draw_requests(cases(("A", "B", "C")), draw)
    assert [r.case_id for r in two] == [r.case_id for r in three if r.corpus != "C"]


def test_a_shortfall_is_named_and_an_empty_draw_refused():
    draw = DrawSettings(seed=0, short_per_corpus=1, long_per_corpus=20, framing="body", max_source_lines=100)
    got, notes = draw_requests(cases(("A",), n=4), draw)
    assert len(got) == 3 and any("2 long case(s) for 20 asked" in n for n in notes)
    with pytest.raises(EngineRunError, match="the draw is empty"):
        draw_requests(cases(("A",)), DrawSettings(0, 1, 1, "body", max_source_lines=0))


def test_the_submission_order_is_a_seeded_permutation_per_load_and_repeat():
    rids = [f"r{i}" for i in range(12)]
    a = closed_loop_order(rids, 0, "c4-r0")
    assert sorted(a) == sorted(rids) and a == closed_loop_order(rids, 0, "c4-r0")
    assert a != closed_loop_order(rids, 0, "c4-r1")


def encode(text: str) -> list[int]:
    return [ord(ch) for ch in text]  # a character tokenizer: one token per character


SOURCE = "def f(x):\n    y = x + 1\n    return y\n\nprint(f(2))\n"


def test_the_plan_prefills_each_copy_and_forces_the_program_tokens():
    output = "def f(x):\n    y = x + 2\n    return y\n\nprint(f(2))\n"
    plan = copy_plan(SOURCE, output, encode, end_id=0, ended=True)
    program = parse(plan.program)
    assert resolve(program, SOURCE) == output
    decoded = "".join(chr(t) for s in plan.stages for t in s.forced_ids if t)
    assert decoded == plan.program  # every program token is decoded, in order
    copied = ["".join(chr(t) for t in s.append_ids) for s in plan.stages[1:]]
    assert copied == ["def f(x):\n", "    return y\n\nprint(f(2))\n"]  # each copy's source lines, as a prefill
    assert plan.stages[0].append_ids == () and plan.stages[-1].forced_ids[-1] == 0  # the end token, as AR paid it


def test_a_program_that_ends_with_a_copy_gets_one_forward_for_it():
    plan = copy_plan(SOURCE, "def f(x):\n", encode, end_id=0, ended=False)
    assert plan.stages[-1].forced_ids == (0,) and plan.stages[-1].append_ids == tuple(encode("def f(x):\n"))
