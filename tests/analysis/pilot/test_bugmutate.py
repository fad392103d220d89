"""Bug mutations for the pilot's bugfix task: each operator plants a valid, distinct bug of its type on
fixtures; draws are seeded; the fix program rebuilds the original; a kind with no site yields None."""

import ast
import random
import re

import pytest

from analysis.pilot.bugmutate import MUTATION_KINDS, SITE_FINDERS, draw_mutation, fix_program, verify
from analysis.errors import CorpusError
from analysis.grammar.program import parse
from analysis.grammar.resolver import resolve
from fixtures import MUTABLE_FUNCTION as FIXTURE


def changed_lines(a: str, b: str) -> list[tuple[str, str]]:
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return [("<deleted>", "")]
    return [(x, y) for x, y in zip(la, lb) if x != y]


@pytest.mark.parametrize("kind", MUTATION_KINDS)
def test_each_operator_plants_a_valid_distinct_mutant_whose_fix_program_round_trips(kind):
    mutation = draw_mutation(FIXTURE, kind, random.Random(0))
    assert mutation is not None and mutation.kind == kind
    ast.parse(mutation.text)
    assert mutation.text != FIXTURE
    program = verify(FIXTURE, mutation.text)
    assert resolve(parse(program), mutation.text) == FIXTURE
    assert len(changed_lines(FIXTURE, mutation.text)) == 1  # one line: one bug


def test_operators_plant_their_own_bug_type():
    def one(kind, seed=0):
        return changed_lines(FIXTURE, draw_mutation(FIXTURE, kind, random.Random(seed)).text)[0]

    before, after = one("wrong_operator")
    assert {t for t in ("<=", "<", "+", "-", "and", "or", "==", "!=", "+=", "-=") if f" {t} " in before} != \
        {t for t in ("<=", "<", "+", "-", "and", "or", "==", "!=", "+=", "-=") if f" {t} " in after}
    before, after = one("off_by_one")
    digits = [c for c in before if c.isdigit()], [c for c in after if c.isdigit()]
    assert digits[0] != digits[1] and before.replace("0", "").replace("1", "").replace("2", "") == \
        after.replace("0", "").replace("1", "").replace("2", "")
    before, after = one("swapped_variable")
    names = {"items", "size", "step", "out", "i"}
    assert [w for w in re.findall(r"\w+", before) if w in names] != [w for w in re.findall(r"\w+", after) if w in names]
    before, after = one("excess_clause")
    test = before.strip().split(" ", 1)[1].rstrip(":")  # the if/while test
    clauses = [len(re.findall(r" (?:and|or) ", line)) for line in (before, after)]
    assert test in after and clauses[1] == clauses[0] + 1


def test_missing_clause_drops_an_operand_or_a_statement():
    seen = set()
    for seed in range(20):
        mutant = draw_mutation(FIXTURE, "missing_clause", random.Random(seed)).text
        seen.add("statement" if mutant.count("\n") < FIXTURE.count("\n") else "operand")
        assert len(mutant) < len(FIXTURE)
    assert seen == {"statement", "operand"}


def test_draws_are_deterministic_in_the_seed():
    for kind in MUTATION_KINDS:
        a = [draw_mutation(FIXTURE, kind, random.Random(s)) for s in range(6)]
        assert a == [draw_mutation(FIXTURE, kind, random.Random(s)) for s in range(6)]
        if len(SITE_FINDERS[kind](FIXTURE)) > 1:
            assert len({m.text for m in a}) > 1, kind  # the seed picks the site


def test_an_operator_without_a_site_yields_none_for_the_caller_to_count():
    bare = "def f(x):\n    return x\n"
    assert draw_mutation(bare, "off_by_one", random.Random(0)) is None
    assert draw_mutation(bare, "excess_clause", random.Random(0)) is None
    assert draw_mutation(bare, "wrong_operator", random.Random(0)) is None


def test_verify_refuses_an_unchanged_or_broken_mutant_and_names_an_unknown_operator():
    with pytest.raises(CorpusError, match="equals the original"):
        verify(FIXTURE, FIXTURE)
    with pytest.raises(CorpusError, match="does not parse"):
        verify(FIXTURE, FIXTURE.replace("while", "whle"))
    with pytest.raises(CorpusError, match="unknown operator 'typo'"):
        draw_mutation(FIXTURE, "typo", random.Random(0))
    assert resolve(parse(fix_program(FIXTURE.replace("i = 0", "i = 1"), FIXTURE)),
                   FIXTURE.replace("i = 0", "i = 1")) == FIXTURE
