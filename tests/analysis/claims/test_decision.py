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


@pytest.mark.parametrize(("ci", "rule_intervals", "expected"), [
    ((0.85, 0.95), ((0.82, 0.93),), d.SLOWER),          # slower under every rule of the band
    ((0.85, 0.95), ((0.93, 1.04),), d.DEPENDS),         # slower under the judged rule, a tie under the other
    ((1.02, 1.10), ((0.90, 0.98),), d.DEPENDS),         # the rules disagree on who is faster
    ((0.93, 1.11), ((0.91, 1.09),), d.TIE),             # a tie under every rule
])
def test_the_decision_reads_the_interval_under_every_rule_of_the_band(ci, rule_intervals, expected):
    """Issue 46 section 2: the verdict is computed over the case bootstrap and over the extrapolation band. A point
    band inside (0, 1) is not enough: the judged rule's interval may clear 1 where another rule's does not."""
    point_band = tuple(sorted((sum(ci) / 2, sum(rule_intervals[0]) / 2)))
    assert d.decide(ci, point_band, rule_intervals) == expected


def test_the_band_reads_each_rules_interval_from_the_row():
    row = {"r_band_low": 0.9, "r_band_high": 0.95, "r_ci_low": 0.8, "r_ci_high": 0.99, "r_linear": 0.9,
           "r_linear_ci_low": 0.85, "r_linear_ci_high": 1.01, "r_marginal_ci_low": 0.8, "r_marginal_ci_high": 0.99}
    band = d.Band.of(row, "r")
    assert band.pair == (0.9, 0.95) and band.intervals == ((0.85, 1.01), (0.8, 0.99))
    assert d.decide((0.8, 0.99), band.pair, band.intervals) == d.DEPENDS


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
