"""analysis.results.methods: one typed Method, spelled and parsed in one place, labelled and ordered for
a headline in one place."""

import pytest

from analysis.errors import ParamsError
from analysis.results.methods import DECODED, IDEAL, Method, headline_order, method_label

NAMES = ["ar", "pld_earliest_k10", "pld_latest_k64", "suffix_k64", "cad_line", "cad_token", "cad_line_overhead",
         "cad_token_overhead"]


@pytest.mark.parametrize("name", NAMES)
def test_every_name_round_trips(name):
    method = Method.parse(name)
    assert method.name == name and Method.parse(method.name) == method


def test_the_fields_are_what_the_name_says():
    assert Method.parse("pld_earliest_k32") == Method("pld", policy="earliest", k=32) == Method.pld("earliest", 32)
    assert Method.parse("cad_token_overhead") == Method.cad("token", DECODED)
    assert Method.parse("cad_line").directives == IDEAL and Method.parse("suffix_k16").k == 16
    assert Method.parse("pld_latest_k5").speculative and Method.parse("suffix_k64").speculative
    assert not Method.parse("cad_line").speculative and not Method.ar().speculative
    # the prompt each is timed on: the rewrite prompt, unless it writes a program
    assert {n: Method.parse(n).prompt for n in ("ar", "pld_earliest_k10", "suffix_k64", "cad_line_overhead")} == {
        "ar": "rewrite", "pld_earliest_k10": "rewrite", "suffix_k64": "rewrite", "cad_line_overhead": "program"}


@pytest.mark.parametrize("name", ["pld_nearest_k10", "pld_latest_k0", "cad_char", "suffix", "AR", "cad_line_decoded", 7])
def test_an_unknown_or_invalid_name_is_named(name):
    with pytest.raises(ParamsError, match="e2e"):
        Method.parse(name)


def test_a_method_refuses_fields_its_kind_has_not():
    with pytest.raises(ParamsError, match="k must be unset"):
        Method("ar", k=3)
    with pytest.raises(ParamsError, match="policy must be set"):
        Method("pld", k=3)
    with pytest.raises(ParamsError, match="directives must be one of"):
        Method("cad", level="line", directives="jumped")
    with pytest.raises(ParamsError, match="integer >= 1"):
        Method.suffix(0)


def test_labels_say_which_variant_is_the_upper_bound_and_which_policy_is_standard():
    assert method_label("cad_line") == "Copy-as-Decode, line level, directives free (upper bound)"
    assert method_label("cad_token_overhead") == "Copy-as-Decode, token level, directive tokens decoded"
    assert method_label("pld_earliest_k64") == "PLD (earliest, the standard policy) with gold acceptance, k=64"
    assert method_label("pld_latest_k10") == "PLD (latest) with gold acceptance, k=10"
    assert Method.parse("cad_line").short == "Copy-as-Decode line, ideal (upper bound)"


def test_the_headline_order_leads_with_directives_decoded_and_ends_with_the_upper_bounds():
    order = headline_order(reversed(NAMES))
    assert order == ["cad_line_overhead", "cad_token_overhead", "pld_earliest_k10", "pld_latest_k64", "suffix_k64",
                     "cad_line", "cad_token", "ar"]
