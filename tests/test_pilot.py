"""Pilot data: disjoint from ProbeEdit-S's evaluation units and split by file; instructions in words."""

import dataclasses

import pytest

from analysis.errors import CorpusError
from analysis.oracle import line_oracle
from analysis.pilotdata import (
    PilotDataParams,
    _changed_span,
    build_pilot_cases,
    check_disjoint,
    evaluation_ranges,
    instruction,
    with_split,
)
from analysis.probeedit import Edit, ProbeEditParams, load_pinned_sources
from analysis.program import parse, render
from analysis.resolver import resolve

SMALL = PilotDataParams(seed=1, n_train=30, n_heldout=12, heldout_files=6)


@pytest.fixture(scope="module")
def cases():
    return build_pilot_cases(SMALL)


@pytest.fixture(scope="module")
def ranges():
    params = ProbeEditParams()
    return evaluation_ranges(params, load_pinned_sources(params))


def test_cases_avoid_every_probeedit_unit_and_heldout_files_are_never_trained_on(cases, ranges):
    assert len(with_split(cases, "train")) == 30 and len(with_split(cases, "heldout")) == 12
    assert sum(len(r) for r in ranges.values()) == 154
    for case in cases:
        for lo, hi in ranges.get(case.file, []):
            assert case.last_line < lo or hi < case.first_line, (case.case_id, lo, hi)
    assert not {c.file for c in with_split(cases, "train")} & {c.file for c in with_split(cases, "heldout")}
    assert all(SMALL.min_lines <= c.source.count("\n") <= SMALL.max_lines for c in cases)


def test_programs_resolve_to_targets_and_name_the_site(cases):
    for case in cases:
        assert resolve(parse(case.program), case.source) == case.target
        assert case.program == render(line_oracle(case.source, case.target))
        assert f"line {case.site_line}" in case.instruction and case.source != case.target


def test_cases_are_deterministic_in_the_seed(cases):
    again = build_pilot_cases(SMALL)
    assert again == cases
    other = build_pilot_cases(dataclasses.replace(SMALL, seed=2))
    assert [c.source for c in other] != [c.source for c in cases]


def test_overlap_and_leak_are_refused(cases, ranges):
    case = cases[0]
    clash = {case.file: [(case.first_line, case.first_line)]}
    with pytest.raises(CorpusError, match="overlapping ProbeEdit-S evaluation units"):
        check_disjoint(cases, clash)
    leak = dataclasses.replace(with_split(cases, "heldout")[0], file=case.file)
    with pytest.raises(CorpusError, match="held-out files also used for training"):
        check_disjoint([case, leak], {})


def test_instruction_words():
    assert _changed_span("    if a == b:\n", "    if a != b:\n") == ("==", "!=")
    assert instruction("change_literal", Edit(12, "", "    x = 3\n", "    x = 4\n")) == "on line 12, change 3 to 4"
    assert instruction("delete_line", Edit(3, "", "    y = 1\n", "")) == "delete line 3: y = 1"
    guard = Edit(5, "", "", "    if x is None: return None\n")
    assert instruction("insert_guard", guard) == "before line 5, insert the line: if x is None: return None"


def test_bad_params_are_clear_errors():
    with pytest.raises(CorpusError, match="kinds must be"):
        build_pilot_cases(dataclasses.replace(SMALL, kinds=("nope",)))
    with pytest.raises(CorpusError, match="heldout_files must lie in 1..33"):
        build_pilot_cases(dataclasses.replace(SMALL, heldout_files=34))
    with pytest.raises(CorpusError, match="heldout cases could be drawn"):
        build_pilot_cases(dataclasses.replace(SMALL, heldout_files=1, n_heldout=500))
