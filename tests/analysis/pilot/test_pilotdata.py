"""Pilot data (analysis.pilot.data): disjoint from ProbeEdit-S's evaluation units and split by file;
instructions in words; bugfix cases are verified mutants; a kind that fits no function is counted."""

import dataclasses
import random

import pytest

from analysis.pilot.bugmutate import MUTATION_KINDS
from analysis.errors import CorpusError
from analysis.oracle.covmax import line_oracle
from analysis.pilot.data import (
    Function,
    PilotDataParams,
    _changed_span,
    _draw,
    build_pilot_cases,
    build_pilot_data,
    check_disjoint,
    evaluation_ranges,
    instruction,
    with_split,
)
from analysis.corpora.entries import ProbeEditParams
from analysis.corpora.probeedit import EDIT_KINDS, Edit, load_pinned_sources
from analysis.grammar.program import parse, render
from analysis.grammar.resolver import resolve
from fixtures import MUTABLE_FUNCTION as FIXTURE

# the tests marked slow build ProbeEdit-S and the pilot's cases
SMALL = PilotDataParams(task="edit", seed=1, min_lines=10, max_lines=40, n_train=30, n_heldout=12, heldout_files=6, kinds=EDIT_KINDS)
BUGFIX = dataclasses.replace(SMALL, task="bugfix", kinds=MUTATION_KINDS)


def probeedit() -> ProbeEditParams:
    """params.yaml's ProbeEdit-S recipe (corpora.probeedit)."""
    from fixtures import params_with

    from analysis.corpora.entries import probeedit_recipe

    return probeedit_recipe(params_with())


@pytest.fixture(scope="module")
def cases():
    return build_pilot_cases(SMALL, probeedit())


@pytest.fixture(scope="module")
def ranges():
    params = probeedit()
    return evaluation_ranges(params, load_pinned_sources(params))


@pytest.mark.slow
def test_cases_avoid_every_probeedit_unit_and_heldout_files_are_never_trained_on(cases, ranges):
    assert len(with_split(cases, "train")) == 30 and len(with_split(cases, "heldout")) == 12
    assert sum(len(r) for r in ranges.values()) == 154
    for case in cases:
        for lo, hi in ranges.get(case.file, []):
            assert case.last_line < lo or hi < case.first_line, (case.case_id, lo, hi)
    assert not {c.file for c in with_split(cases, "train")} & {c.file for c in with_split(cases, "heldout")}
    assert all(SMALL.min_lines <= c.source.count("\n") <= SMALL.max_lines for c in cases)


@pytest.mark.slow
def test_programs_resolve_to_targets_and_name_the_site(cases):
    for case in cases:
        assert resolve(parse(case.program), case.source) == case.target
        assert case.program == render(line_oracle(case.source, case.target))
        assert f"line {case.site_line}" in case.instruction and case.source != case.target


@pytest.mark.slow
def test_cases_are_deterministic_in_the_seed(cases):
    again = build_pilot_cases(SMALL, probeedit())
    assert again == cases
    other = build_pilot_cases(dataclasses.replace(SMALL, seed=2), probeedit())
    assert [c.source for c in other] != [c.source for c in cases]


@pytest.mark.slow
def test_overlap_and_leak_are_refused(cases, ranges):
    case = cases[0]
    clash = {case.file: [(case.first_line, case.first_line)]}
    with pytest.raises(CorpusError, match="overlapping ProbeEdit-S evaluation units"):
        check_disjoint(cases, clash)
    leak = dataclasses.replace(with_split(cases, "heldout")[0], file=case.file)
    with pytest.raises(CorpusError, match="held-out files also used for training"):
        check_disjoint([case, leak], {})


@pytest.mark.slow
def test_instruction_words():
    assert _changed_span("    if a == b:\n", "    if a != b:\n") == ("==", "!=")
    assert instruction("change_literal", Edit(12, "", "    x = 3\n", "    x = 4\n")) == "on line 12, change 3 to 4"
    assert instruction("delete_line", Edit(3, "", "    y = 1\n", "")) == "delete line 3: y = 1"
    guard = Edit(5, "", "", "    if x is None: return None\n")
    assert instruction("insert_guard", guard) == "before line 5, insert the line: if x is None: return None"


@pytest.fixture(scope="module")
def bugfix():
    return build_pilot_data(BUGFIX, probeedit())


@pytest.mark.slow
def test_bugfix_cases_are_verified_mutants_fixed_on_humanevalfixs_instruction(bugfix):
    import ast

    from analysis.corpora.humanevalpack import bugfix_instruction

    cases = bugfix.cases
    assert len(with_split(cases, "train")) == 30 and len(with_split(cases, "heldout")) == 12
    assert [c.kind for c in with_split(cases, "train")][:5] == list(MUTATION_KINDS)
    for case in cases:
        ast.parse(case.source)
        assert case.source != case.target and case.instruction == bugfix_instruction(case.function)
        assert resolve(parse(case.program), case.source) == case.target  # the fix rebuilds the original
        assert "<gen>" in case.program or case.program.count("<copy") > 1
    assert all(isinstance(v, int) and v > 0 for v in bugfix.not_applied.values())
    assert set(bugfix.not_applied) <= {f"{split}/{k}" for split in ("train", "heldout") for k in MUTATION_KINDS}


@pytest.mark.slow
def test_bugfix_cases_are_disjoint_from_every_evaluation_unit(bugfix, ranges):
    from analysis.corpora.probeedit import build_probeedit

    cases = bugfix.cases
    for case in cases:
        for lo, hi in ranges.get(case.file, []):
            assert case.last_line < lo or hi < case.first_line, (case.case_id, lo, hi)
    assert not {c.file for c in with_split(cases, "train")} & {c.file for c in with_split(cases, "heldout")}
    evaluated, _ = build_probeedit(probeedit())
    texts = [e.source for e in evaluated] + [e.target for e in evaluated]
    assert not [c.case_id for c in cases if any(c.target in t or t in c.target for t in texts)]


@pytest.mark.slow
def test_bugfix_cases_are_deterministic_in_the_seed(bugfix):
    assert build_pilot_data(BUGFIX, probeedit()) == bugfix
    other = build_pilot_cases(dataclasses.replace(BUGFIX, seed=2), probeedit())
    assert [c.source for c in other] != [c.source for c in bugfix.cases]


@pytest.mark.slow
def test_bad_params_are_clear_errors():
    with pytest.raises(CorpusError, match="kinds must be"):
        build_pilot_cases(dataclasses.replace(SMALL, kinds=("nope",)), probeedit())
    with pytest.raises(CorpusError, match="bugfix kinds must be"):
        build_pilot_cases(dataclasses.replace(BUGFIX, kinds=("change_literal",)), probeedit())
    with pytest.raises(CorpusError, match="task must be one of edit, bugfix"):
        build_pilot_cases(dataclasses.replace(SMALL, task="refactor"), probeedit())
    with pytest.raises(CorpusError, match="heldout_files must lie in 1..33"):
        build_pilot_cases(dataclasses.replace(SMALL, heldout_files=34), probeedit())
    with pytest.raises(CorpusError, match="heldout cases could be drawn"):
        build_pilot_cases(dataclasses.replace(SMALL, heldout_files=1, n_heldout=500), probeedit())


def test_a_function_a_kind_cannot_be_applied_to_is_counted_per_split_and_kind():
    bare = Function("a.py", "f", 1, 2, "def f(x):\n    return x\n")
    good = Function("a.py", "window", 3, 12, FIXTURE)
    counted: dict[str, int] = {}
    cases = _draw([bare, good, bare, good], 2, ("off_by_one", "wrong_operator"), "train", random.Random(0),
                  "bugfix", counted)
    assert [c.kind for c in cases] == ["off_by_one", "wrong_operator"]
    assert counted == {"train/off_by_one": 1, "train/wrong_operator": 1}
    with pytest.raises(CorpusError, match="only 0 of 1 heldout cases"):
        _draw([bare], 1, ("off_by_one",), "heldout", random.Random(0), "bugfix", counted)
    assert counted["heldout/off_by_one"] == 1
