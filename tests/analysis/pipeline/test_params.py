"""analysis.pipeline.params: the one vocabulary for reading params values; every bad value is a ParamsError that
names the dotted key and the value."""

import math
import re

import pytest

from analysis.errors import ParamsError
from analysis.pipeline.params import (
    check_slack,
    check_threads,
    check_threshold,
    choice,
    choices,
    get,
    get_or,
    known_keys,
    load_params,
    merge_preset,
    number,
    number_list,
    positive_int,
)

P = {"a": {"n": 3, "x": 0.5, "flag": True, "seed": -1, "name": "fit", "names": ["fit", "paper"], "grid": [1, 2.5],
           "group": {"k": 1}}}


def test_get_names_a_missing_key_and_a_wrong_type():
    assert get(P, "a.n", int) == 3 and get(P, "a.group.k") == 1
    with pytest.raises(ParamsError, match="missing 'a.zz'"):
        get(P, "a.zz")
    with pytest.raises(ParamsError, match="missing 'a.n.deeper'"):
        get(P, "a.n.deeper")
    with pytest.raises(ParamsError, match=r"'a.name' must be int, got 'fit'"):
        get(P, "a.name", int)
    with pytest.raises(ParamsError, match="'a.flag' must be int or float, got True"):  # a bool is not a number
        get(P, "a.flag", (int, float))
    with pytest.raises(ParamsError, match="'a.seed' must be >= 0, got -1"):  # every seed feeds SeedSequence
        get(P, "a.seed", int)


def test_get_or_defaults_only_when_the_key_is_absent():
    assert get_or(P, "a.zz", 7, int) == 7
    with pytest.raises(ParamsError, match="must be int"):
        get_or(P, "a.name", 7, int)


def test_numbers_and_ranges():
    assert positive_int(P, "a.n") == 3 and number(P, "a.x", 0, 1) == 0.5
    with pytest.raises(ParamsError, match=r"'a.n' must be >= 4, got 3"):
        positive_int(P, "a.n", minimum=4)
    with pytest.raises(ParamsError, match=r"'a.x' must lie in \[1, inf\), got 0.5"):
        number(P, "a.x", lo=1)
    with pytest.raises(ParamsError, match=r"must lie in \(-inf, 0.1\]"):
        number(P, "a.x", hi=0.1)
    with pytest.raises(ParamsError, match="must be a finite number"):
        number({"a": {"x": math.inf}}, "a.x")
    assert number_list(P, "a.grid", lo=0) == (1.0, 2.5)
    with pytest.raises(ParamsError, match="must hold integers, got 2.5"):
        number_list(P, "a.grid", integer=True)
    with pytest.raises(ParamsError, match="lists a value twice"):
        number_list({"a": {"g": [1, 1]}}, "a.g", distinct=True)
    with pytest.raises(ParamsError, match="must not be empty"):
        number_list({"a": {"g": []}}, "a.g")


def test_choices_and_known_keys():
    assert choice(P, "a.name", ("fit", "paper")) == "fit"
    with pytest.raises(ParamsError, match="'a.name' must be one of paper, h200; got 'fit'"):
        choice(P, "a.name", ("paper", "h200"))
    assert choices(P, "a.names", ("fit", "paper")) == ("fit", "paper")
    with pytest.raises(ParamsError, match=r"has unknown values \['paper'\]"):
        choices(P, "a.names", ("fit",))
    with pytest.raises(ParamsError, match="lists a value twice"):
        choices({"a": {"c": ["fit", "fit"]}}, "a.c", ("fit",))
    assert known_keys(P, "a.group", ("k", "j")) == {"k": 1}
    with pytest.raises(ParamsError, match="unknown setting 'a.group.k'; 'a.group' knows j"):
        known_keys(P, "a.group", ("j",))


@pytest.mark.parametrize(("check", "bad"), [
    (check_slack, -0.5), (check_slack, True), (check_slack, math.inf),
    (check_threads, 0), (check_threads, 1.5), (check_threads, True),
    (check_threshold, 0), (check_threshold, "0.1"),
])
def test_single_values_are_checked(check, bad):
    with pytest.raises(ParamsError, match=f"got {re.escape(repr(bad))}$"):
        check(bad)


def test_single_values_pass_through():
    assert check_slack(0) == 0.0 and check_threads(None) is None and check_threads(4) == 4
    assert check_threshold(0.15) == 0.15


def test_a_preset_overlays_its_group_at_any_depth_without_touching_it():
    params = {"g": {"a": 1, "deep": {"x": 1, "y": 2}}, "presets": {"gpu": {"deep": {"y": 3}, "b": [1]}}}
    merged = merge_preset(params, "g", "presets", "gpu")
    assert merged == {"a": 1, "deep": {"x": 1, "y": 3}, "b": [1]}
    assert params["g"] == {"a": 1, "deep": {"x": 1, "y": 2}}  # the group itself is not changed
    assert merge_preset(params, "g", "presets", None) == params["g"]
    with pytest.raises(ParamsError, match="unknown preset 'cpu' in 'presets'; known: gpu"):
        merge_preset(params, "g", "presets", "cpu")
    with pytest.raises(ParamsError, match="preset 'presets.bad' must be a mapping"):
        merge_preset({**params, "presets": {"bad": 3}}, "g", "presets", "bad")


def test_load_params_names_a_duplicate_key_and_an_unknown_one(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("spans:\n  ci: 0.9\n  ci: 0.95\n")
    with pytest.raises(ParamsError, match=r"dup.yaml: the key 'ci' is given twice in one mapping \(lines 2 and 3\)"):
        load_params(dup, check_keys=False)
    typo = tmp_path / "typo.yaml"
    typo.write_text("spans:\n  cii: 0.9\n")
    assert load_params(typo, check_keys=False) == {"spans": {"cii": 0.9}}
    with pytest.raises(ParamsError, match=r"unknown setting \['spans.cii'\] .*did you mean 'spans.ci'\?"):
        load_params(typo)
    bad = tmp_path / "bad.yaml"
    bad.write_text("spans: [\n")
    with pytest.raises(ParamsError, match="bad.yaml: not valid YAML"):
        load_params(bad, check_keys=False)
