import random

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.perturb import PerturbCase, em_table, perturb_program, run_perturbation
from analysis.grammar.program import Copy, Gen, Program


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


# ---------------------------------------------------------------- definitions, crossing, validation

from analysis.perturb import (  # noqa: E402
    DEFINITIONS,
    PAPER_EM,
    clip_span,
    crossing_rate,
    crossing_rates,
    paper_pool_rows,
    source_units,
)


def test_strict_is_the_default_and_unchanged():
    a = run_perturbation(TOY, ["start", "end", "both", "shift"], [0.25, 1.0], [0, 1, 2])
    b = run_perturbation(TOY, ["start", "end", "both", "shift"], [0.25, 1.0], [0, 1, 2], definition="strict")
    assert a.equals(b)
    assert a.columns == ["case_id", "corpus", "framing", "level", "kind", "rate", "seed", "outcome", "touched",
                         "n_copies"]


def test_clip_projects_in_the_fsm_order():
    assert clip_span(Copy(0, 3), 4) == Copy(1, 3)
    assert clip_span(Copy(2, 5), 4) == Copy(2, 4)
    assert clip_span(Copy(2, 1), 4) == Copy(2, 2)  # an end pulled before the start stays at the start
    assert clip_span(Copy(5, 4), 4) == Copy(4, 4)  # a start past the source end comes back, end follows


def test_clip_uses_strict_draws_and_is_never_invalid():
    kinds, rates, seeds = ["start", "end", "both", "shift"], [0.5, 1.0], list(range(6))
    strict = run_perturbation(TOY, kinds, rates, seeds)
    clip = run_perturbation(TOY, kinds, rates, seeds, definition="clip")
    assert strict["touched"].to_list() == clip["touched"].to_list()
    assert (clip["outcome"] != "invalid").all()
    assert (strict["outcome"] == "invalid").any()
    # T/2 copies line 1: under 'start', +1 inverts (2 > 1) and clipping then moves the end to 2 ('b'),
    # -1 clips back to line 1 (a match): strict calls both invalid
    t2 = clip.filter((pl.col("case_id") == "T/2") & (pl.col("kind") == "start") & (pl.col("rate") == 1.0))
    assert set(t2["outcome"]) <= {"match", "miss"} and t2.height == len(seeds)


def test_one_span_moves_exactly_one_span():
    program = Program((Copy(5, 9), Gen("x"), Copy(20, 30), Copy(40, 41)))
    moved_index = set()
    for seed in range(40):
        out, touched = perturb_program(program, "shift", 1.0, random.Random(seed), "one_span", 100)
        assert touched == 1
        changed = [i for i, (a, b) in enumerate(zip(program.ops, out.ops)) if a != b]
        assert len(changed) == 1
        moved_index.update(changed)
        out, touched = perturb_program(program, "shift", 0.0, random.Random(seed), "one_span", 100)
        assert touched == 0 and out == program
    assert moved_index == {0, 2, 3}  # every copy span can be the one chosen; the gen never


def test_one_span_rate_is_the_share_of_programs_touched():
    program = Program((Copy(5, 9), Copy(20, 30)))
    touched = [perturb_program(program, "end", 0.3, random.Random(s), "one_span", 100)[1] for s in range(2000)]
    assert set(touched) <= {0, 1}
    assert sum(touched) / len(touched) == pytest.approx(0.3, abs=0.04)


def test_source_units_per_level():
    assert source_units(TOY[0]) == 4
    token_case = PerturbCase("K/0", "K", "body", "token", Program((Copy(1, 2, "tokens"),)), "ab", "ab", (0, 1, 2))
    assert source_units(token_case) == 2
    res = run_perturbation([token_case], ["end"], [1.0], list(range(8)), definition="clip")
    # end+1 clips back to 2 (a match), end-1 copies 'a' (a miss)
    assert set(res["outcome"]) == {"match", "miss"}


@pytest.mark.parametrize("rates, ems, want", [
    ([0.0, 0.5, 1.0], [1.0, 0.3, 0.1], 0.5 + (0.3 - PAPER_EM) / (0.3 - 0.1) * 0.5),
    ([1.0, 0.0, 0.5], [0.1, 1.0, 0.3], 0.5 + (0.3 - PAPER_EM) / (0.3 - 0.1) * 0.5),  # order-free
    ([0.0, 0.5], [1.0, PAPER_EM], 0.5),
    ([0.0, 0.5, 1.0], [1.0, 0.6, 0.2], None),
    ([0.5, 1.0], [0.1, 0.05], None),  # below the grid already: cannot be placed
])
def test_crossing_rate(rates, ems, want):
    got = crossing_rate(rates, ems)
    assert got == (None if want is None else pytest.approx(want))


def test_crossing_table_per_definition_labels_the_paper_underdetermined():
    cases = [case(f"T/{i}", Program((Copy(2, 2),)), SOURCE, "b\n") for i in range(8)] + [TOY[1]]
    rates = [0.0, 0.25, 0.5, 0.75, 1.0]
    tables = {d: em_table(run_perturbation(cases, ["start", "shift"], rates, list(range(4)), definition=d))
              for d in DEFINITIONS}
    out = crossing_rates(tables)
    ours = out.filter(pl.col("definition") != "paper")
    assert ours.height == len(DEFINITIONS) * 2
    for row in ours.iter_rows(named=True):
        pooled = tables[row["definition"]].filter(
            (pl.col("corpus") == "pooled") & (pl.col("kind") == row["kind"])).sort("rate")
        assert row["crossing_rate"] == crossing_rate(pooled["rate"].to_list(), pooled["em"].to_list())
    # EM falls to 1/9 (the no-copy case) at rate 1 under strict, so it crosses 15.48% inside the grid
    strict_start = ours.filter((pl.col("definition") == "strict") & (pl.col("kind") == "start")).row(0, named=True)
    assert strict_start["crossing_rate"] is not None and 0.75 <= strict_start["crossing_rate"] <= 1.0
    paper = out.filter(pl.col("definition") == "paper").row(0, named=True)
    assert "underdetermined" in paper["note"] and paper["em_at_max_rate"] == PAPER_EM


def test_crossing_table_puts_the_papers_pool_first_and_labels_every_corpus_pool():
    paper = [case(f"P/{i}", Program((Copy(2, 2),)), SOURCE, "b\n", corpus="HEvalFix-Py") for i in range(6)]
    paper += [case("P/nocopy", Program((Gen("z\n"),)), SOURCE, "z\n", corpus="HEvalFix-Py")]
    others = [case(f"C/{i}", Program((Gen("z\n"),)), SOURCE, "z\n", corpus="CommitEdits-click") for i in range(7)]
    table = em_table(run_perturbation(paper + others, ["start"], [0.0, 0.5, 1.0], [0, 1], definition="strict"))
    out = crossing_rates({"strict": table}).filter(pl.col("definition") != "paper")
    assert out["pool"].to_list() == ["paper", "all"] and out["n_cases"].to_list() == [7, 14]
    pooled = paper_pool_rows(table).filter(pl.col("kind") == "start").sort("rate")
    assert pooled["em"][-1] == pytest.approx(1 / 7) and pooled["n_cases"].to_list() == [7, 7, 7]
    rows = out.rows_by_key("pool", named=True)
    assert rows["paper"][0]["crossing_rate"] == crossing_rate(pooled["rate"].to_list(), pooled["em"].to_list())
    assert rows["all"][0]["crossing_rate"] is None  # half the cases never copy: EM never falls to 15.48%


@pytest.mark.parametrize("kwargs, named", [
    ({"kinds": []}, "perturb.kinds is empty"),
    ({"kinds": ["jitter"]}, "'jitter'"),
    ({"kinds": ["start", "start"]}, "repeats"),
    ({"rates": ["abc"]}, "'abc'"),
    ({"rates": [True]}, "True"),
    ({"rates": [0.5, 1.5]}, "1.5"),
    ({"rates": [-0.1]}, "-0.1"),
    ({"rates": [float("nan")]}, "nan"),
    ({"rates": []}, "perturb.rates is empty"),
    ({"rates": "0.5"}, "'0.5'"),
    ({"definition": "loose"}, "'loose'"),
])
def test_a_bad_grid_is_named_by_its_value(kwargs, named):
    good = {"kinds": ["start"], "rates": [0, 0.5, 1], "definition": "strict"}
    grid = {**good, **kwargs}
    with pytest.raises(ParamsError, match=__import__("re").escape(named)):
        run_perturbation(TOY, grid["kinds"], grid["rates"], [0], definition=grid["definition"])


def test_run_perturbation_rejects_bad_grids():
    with pytest.raises(ParamsError, match="perturb.kinds is empty"):
        run_perturbation(TOY, [], [0.5], [0])
    with pytest.raises(ParamsError, match="'abc'"):
        run_perturbation(TOY, ["start"], ["abc"], [0])
    with pytest.raises(ParamsError, match="'loose'"):
        run_perturbation(TOY, ["start"], [0.5], [0], definition="loose")
    with pytest.raises(ParamsError, match="'loose'"):
        perturb_program(Program((Copy(1, 1),)), "start", 1.0, random.Random(0), "loose", 4)
