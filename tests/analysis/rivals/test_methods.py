"""analysis.rivals.methods: one Method value, one spelling, one parser, and the family registry every stage looks a
family up in (review round 6, section 7 item 1)."""

import ast

import polars as pl
import pytest
from fixtures import ROOT, params_with

from analysis.errors import ParamsError
from analysis.rivals.families.suffix import DEFAULTS
from analysis.rivals.forwards import Forwards
from analysis.rivals.methods import (
    EXECUTORS,
    FAMILIES,
    ROLES,
    Family,
    Method,
    canonical,
    families,
    headline_order,
    method_label,
    parse_method,
    register,
    stage_methods,
    table_order,
)
from analysis.rivals.settings import DraftSettings, draft_settings
from analysis.rivals.simulate import SimulationEnv, method_forwards
from kernels_profile.e2e.settings import settings as e2e_settings

DRAFTS = DraftSettings(2, DEFAULTS, ())
EVERY = params_with(**{"rivals.suffix.response_cache": True, "rivals.suffix.unbounded": True})
# the e2e stage's first spelling, as the committed frozen e2e-wide run and older tables hold it
OLD_E2E = {"ar": "ar", "pld_earliest_k10": "pld-earliest-k10", "pld_latest_k64": "pld-latest-k64",
           "suffix_k64": "suffix-k64", "cad_line": "copy-line-ideal", "cad_token": "copy-token-ideal",
           "cad_line_overhead": "copy-line-decoded", "cad_token_overhead": "copy-token-decoded"}


def every_member() -> list[Method]:
    """What the rivals stage simulates with every option on, and what the e2e stage measures."""
    e2e = e2e_settings(params_with())
    planned = [m for model in e2e.models for corpus, _ in model.sample for m in e2e.plan(model.name, corpus).methods]
    return list(dict.fromkeys([*stage_methods(EVERY, "rivals"), *planned]))


# ---------------------------------------------------------------- the registry

def test_every_family_registers_its_names_labels_role_and_behaviour():
    assert {"ar", "pld", "suffix", "format", "copy"} <= set(FAMILIES)
    positions = [f.position for f in families()]
    assert len(set(positions)) == len(positions)  # a table order
    for family in families():
        assert family.title and family.pattern().startswith(family.name) or family.name == "format"
        assert family.executor in (*EXECUTORS, None)
        assert type(family).forwards is not Family.forwards, family.name
        assert type(family).members is not Family.members, family.name
        assert family.speculative == (type(family).drafter is not Family.drafter), family.name
        for m in family.members(EVERY, "rivals"):
            assert m.label and m.short and m.role in ROLES and m.prompt in ("rewrite", "program")


def test_each_speculative_family_drafts_from_the_context_with_the_shared_settings():
    for m in (parse_method("pld-earliest-k4"), parse_method("suffix-k4")):
        drafter = m.drafter([1, 2, 3, 1, 2, 3, 1, 2], DRAFTS)
        assert drafter.draft(4) == [3, 1, 2, 3][:len(drafter.draft(4))] and drafter.draft(4)
    with pytest.raises(ParamsError, match="ar has no drafter"):
        parse_method("ar").drafter([1, 2], DRAFTS)


def test_every_member_has_forwards_that_reach_the_gold(qwen):
    from analysis.coverage.spans import DirectiveCounter
    from analysis.stages.rivals import case_input

    row = {"case_id": "P/1", "corpus": "P", "framing": "body", "source": "def f(x):\n    return x\n",
           "target": "def f(x):\n    return x + 1\n", "line": '<copy lines="1-1"/><gen>    return x + 1\n</gen>',
           "token": '<gen>def f(x):\n    return x + 1\n</gen>'}
    case = case_input(row, qwen, DirectiveCounter(qwen), 10)
    drafts = draft_settings(EVERY, "rivals")
    for m in stage_methods(EVERY, "rivals"):
        state = m.spec.response_cache(m, drafts) if m.cache else None
        out = method_forwards(m, case, drafts, SimulationEnv(qwen, 3, state))
        assert isinstance(out, Forwards) and len(out) > 0, m.name
        if m.family != "format":  # a format emits its own text's tokens
            assert sum(out.emitted) == len(case.gold), m.name


def test_a_family_registered_twice_or_with_an_unknown_executor_is_refused():
    class Twin(Family):
        name, title, position = "ar", "twin", 99

    with pytest.raises(ParamsError, match="registered twice"):
        register(Twin)

    class Odd(Family):
        name, title, position, executor = "odd", "odd", 98, "teleport"

    with pytest.raises(ParamsError, match="executor must be one of"):
        register(Odd)
    assert "odd" not in FAMILIES and type(FAMILIES["ar"]).__name__ != "Twin"


@pytest.mark.parametrize("path", ["analysis/rivals/simulate.py", "kernels_profile/e2e/methods.py"])
def test_the_dispatchers_look_the_family_up_and_branch_on_no_family_name(path):
    """The simulation and the e2e runner name no family: a new family is its own module."""
    tree = ast.parse((ROOT / path).read_text())
    compared = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Compare)
                and any(isinstance(side, ast.Attribute) and side.attr in ("family", "kind")
                        for side in (n.left, *n.comparators))]
    assert compared == []


# ---------------------------------------------------------------- one spelling, one parser

def test_every_member_round_trips_through_its_name():
    members = every_member()
    assert {"pld-earliest-kinf", "suffix-kinf", "suffix-k64-cache", "copy-token-jump", "search-replace"} <= {
        m.name for m in members}
    for m in members:
        assert parse_method(m.name) == m and parse_method(m.name).name == m.name


@pytest.mark.parametrize("old, new", sorted(OLD_E2E.items()))
def test_the_old_e2e_spelling_is_read_and_respelled(old, new):
    assert parse_method(old).name == new


def test_every_method_of_the_committed_frozen_runs_is_read():
    """The frozen e2e-wide run (and any other under reports/e2e/frozen) was written with the old e2e names."""
    folders = sorted((ROOT / "reports/e2e/frozen").glob("*/"))
    assert folders
    for folder in folders:
        for table in sorted(folder.glob("e2e_*.csv")):
            names = pl.read_csv(table, infer_schema_length=None)["method"].unique().to_list()
            respelled = canonical(pl.DataFrame({"method": names}))["method"].to_list()
            assert respelled == [parse_method(n).name for n in names], table
            assert all(parse_method(n).name == n for n in respelled) and set(respelled) >= {"ar", "copy-line-decoded"}


@pytest.mark.parametrize("name, message", [
    ("pld-nearest-k10", "policy must be one of earliest, latest"),
    ("pld-earliest-k0", r"is not spelled pld-<earliest\|latest>-k<1..4096\|inf>"),
    ("pld-earliest-k5000", r"k must be an integer in \[1, 4096\]"),
    ("suffix", "is not spelled suffix-k"),
    ("copy-char-ideal", "level must be one of line, token"),
    ("copy-line-decoded-x", "is not spelled copy-"),
    ("cad_char", "level must be one of line, token"),
    ("pld_latest_k0", "'pld_latest_k0'"),
    ("AR", "unknown method 'AR'"),
    ("", "unknown method ''"),
    (7, "unknown method 7"),
])
def test_an_unknown_or_out_of_range_name_is_refused_by_name(name, message):
    with pytest.raises(ParamsError, match=message):
        parse_method(name)


def test_a_method_refuses_fields_its_family_has_not():
    with pytest.raises(ParamsError, match="'ar' has no k"):
        Method("ar", k=3)
    with pytest.raises(ParamsError, match="policy must be one of"):
        Method("pld", k=3)
    with pytest.raises(ParamsError, match="directives must be one of"):
        Method("copy", level="line", directives="jumped")
    with pytest.raises(ParamsError, match=r"k must be an integer in \[1, 4096\]"):
        Method("suffix", k=0)
    with pytest.raises(ParamsError, match="unknown method family 'cad'"):
        Method("cad", level="line", directives="ideal")


def test_labels_say_which_variant_is_the_upper_bound():
    assert method_label("copy-line-ideal") == "Copy-as-Decode line, directives free (upper bound)"
    assert method_label("cad_token_overhead") == "Copy-as-Decode token, directives decoded"
    assert method_label("pld-earliest-kinf") == "prompt lookup (earliest, k=unbounded)"
    assert parse_method("copy-line-ideal").short == "Copy-as-Decode line, ideal (upper bound)"
    assert parse_method("copy-line-ideal").role == "bound" and parse_method("copy-line-jump").role == "copy"
    assert {parse_method(n).prompt for n in ("ar", "pld-earliest-k10", "suffix-k64")} == {"rewrite"}
    assert parse_method("copy-token-decoded").prompt == "program"


def test_the_orders_lead_as_their_readers_expect():
    names = ["ar", "pld-earliest-k10", "pld-latest-k64", "suffix-k64", "copy-line-ideal", "copy-token-ideal",
             "copy-line-decoded", "copy-token-decoded", "unified-diff", "pld-earliest-kinf", "pld-earliest-k5"]
    assert headline_order(reversed(names))[:2] == ["copy-line-decoded", "copy-token-decoded"]
    assert headline_order(names)[-3:] == ["copy-line-ideal", "copy-token-ideal", "ar"]
    assert table_order(names) == ["ar", "pld-earliest-k5", "pld-earliest-k10", "pld-earliest-kinf", "pld-latest-k64",
                                  "suffix-k64", "unified-diff", "copy-line-decoded", "copy-line-ideal",
                                  "copy-token-decoded", "copy-token-ideal"]


# ---------------------------------------------------------------- the members from params

def test_any_draft_budget_params_name_is_a_member():
    names = [m.name for m in stage_methods(params_with(**{"rivals.pld.k": [8, 3], "rivals.pld.unbounded": False,
                                                          "rivals.suffix.k": [16, 128]}), "rivals")]
    assert [n for n in names if n.startswith("pld-")] == ["pld-earliest-k3", "pld-earliest-k8", "pld-latest-k3",
                                                          "pld-latest-k8"]
    assert [n for n in names if n.startswith("suffix-")] == ["suffix-k16", "suffix-k128"]


@pytest.mark.parametrize("changes, message", [
    ({"rivals.pld.k": [0]}, r"'rivals.pld.k' must be a non-empty list of distinct integers in \[1, 4096\].*\(0 is out of range\)"),
    ({"rivals.pld.k": [-8]}, r"\(-8 is out of range\)"),
    ({"rivals.pld.k": [8, 8]}, "distinct integers"),
    ({"rivals.pld.k": [10_000]}, r"\(10000 is out of range\)"),
    ({"rivals.suffix.k": []}, "'rivals.suffix.k' must be a non-empty list"),
    ({"rivals.pld.policies": ["nearest"]}, "'rivals.pld.policies' has unknown values"),
    ({"rivals.pld.depth": 3}, "unknown setting 'rivals.pld.depth'"),
])
def test_a_bad_budget_or_key_is_refused_by_name(changes, message):
    with pytest.raises(ParamsError, match=message):
        stage_methods(params_with(**changes), "rivals")
