"""The decision a deployment makes (analysis.claims.decision): a verdict word from the paired interval against 1,
"depends on the pricing assumption" where the extrapolation band crosses 1, the basis of a figure, and the
prompt-lookup k at which the ranking flips."""

from __future__ import annotations

import pytest

from analysis.claims import decision as d
from analysis.errors import ParamsError


@pytest.mark.parametrize(("ci", "band", "expected"), [
    ((1.1, 1.3), None, d.FASTER),
    ((0.5, 0.6), None, d.SLOWER),
    ((0.9, 1.1), None, d.TIE),
    ((0.5, 0.6), (0.4, 1.2), d.DEPENDS),   # the data says slower, the pricing rule could say otherwise
    ((1.1, 1.3), (1.05, 1.4), d.FASTER),   # a band that stays above 1 changes nothing
    ((0.9, 1.1), (0.5, 1.5), d.TIE),       # a tie stays a tie
])
def test_the_decision_reads_the_interval_against_one_and_the_band(ci, band, expected):
    assert d.decide(ci, band) == expected


def test_an_interval_upside_down_is_refused():
    with pytest.raises(ParamsError, match="low to high"):
        d.decide((1.2, 1.1))


def test_a_figure_mostly_priced_outside_the_profile_is_extrapolated():
    assert d.basis_of([0.1, 0.2]) == d.PRICED
    assert d.basis_of([0.1, 0.9]) == d.EXTRAPOLATED
    assert d.basis_of([None, None]) == d.PRICED
    assert d.basis_of([0.9], measured=True) == d.MEASURED


def test_the_flip_names_the_last_k_copy_as_decode_beats_and_the_first_that_beats_it():
    speedups = {5: 3.7, 10: 5.9, 16: 8.0, 32: 12.7, 64: 19.1, None: 26.3}
    found = d.flip("earliest", speedups, 16.8)
    assert (found.wins_up_to, found.loses_from, found.unbounded_wins) == (32, 64, True)
    assert found.sentence() == "against prompt lookup (earliest) it wins up to k = 32, loses from k = 64"
    never = d.flip("earliest", {5: 1.0, None: 2.0}, 16.8)
    assert never.sentence() == "prompt lookup (earliest) never passes it"
    only_unbounded = d.flip("latest", {5: 1.0, 64: 3.0, None: 30.0}, 16.8)
    assert only_unbounded.sentence() == "against prompt lookup (latest) it wins up to k = 64, loses only to unbounded drafts"
