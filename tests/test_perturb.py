import random

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.perturb import PerturbCase, em_table, perturb_program, run_perturbation
from analysis.program import Copy, Gen, Program


def case(cid, program, source, target, corpus="T"):
    return PerturbCase(cid, corpus, "body", "line", program, source, target, None)


SOURCE = "a\nb\nc\nd\n"
TOY = [
    # copying line 2 of four distinct lines: any off-by-one changes the text
    case("T/0", Program((Copy(2, 2),)), SOURCE, "b\n"),
    # no copy span: never perturbed
    case("T/1", Program((Gen("z\n"),)), SOURCE, "z\n"),
    # copying line 1: start-1 is invalid, start+1 inverts (2 > 1): always invalid under 'start'
    case("T/2", Program((Copy(1, 1),)), SOURCE, "a\n"),
    # identical lines: a shift by one copies the same text
    case("T/3", Program((Copy(2, 2),)), "x\nx\nx\n", "x\n"),
]


def test_rate_zero_is_exact():
    res = run_perturbation(TOY, ["start", "end", "both", "shift"], [0.0], [0, 1])
    assert (res["outcome"] == "match").all()


def test_known_em_at_rate_one():
    res = run_perturbation(TOY, ["shift", "start"], [1.0], list(range(10)))
    em = em_table(res).filter((pl.col("corpus") == "T"))
    shift = em.filter(pl.col("kind") == "shift").row(0, named=True)
    assert shift["em"] == pytest.approx(2 / 4)  # T/1 (no copy) and T/3 (identical lines) survive
    assert shift["no_copy"] == pytest.approx(1 / 4)
    start = em.filter(pl.col("kind") == "start").row(0, named=True)
    assert start["em"] == pytest.approx(1 / 4)  # only T/1; T/3 start+-1 inverts or changes length
    t2 = res.filter((pl.col("case_id") == "T/2") & (pl.col("kind") == "start"))
    assert (t2["outcome"] == "invalid").all()


def test_perturbation_is_seeded():
    a = run_perturbation(TOY, ["both"], [0.5], [3])
    b = run_perturbation(TOY, ["both"], [0.5], [3])
    assert a.equals(b)


def test_every_span_moves_by_one_at_rate_one():
    program = Program((Copy(5, 9), Gen("x"), Copy(20, 30)))
    for kind in ("start", "end", "both", "shift"):
        out, touched = perturb_program(program, kind, 1.0, random.Random(0))
        assert touched == 2
        for before, after in zip(program.copies, out.copies):
            assert abs(after.start - before.start) <= 1 and abs(after.end - before.end) <= 1
            assert (after.start, after.end) != (before.start, before.end)


def test_bad_params():
    with pytest.raises(ParamsError, match="unknown"):
        run_perturbation(TOY, ["jitter"], [0.5], [0])
    with pytest.raises(ParamsError, match=r"\[0, 1\]"):
        run_perturbation(TOY, ["start"], [1.5], [0])
