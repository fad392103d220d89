"""The rivals page's views (analysis.present.rivalviews): the head-to-head said as the share of the rival's speedup
Copy-as-Decode reaches with its verdict, and the crossover table read back."""

from __future__ import annotations

import polars as pl

from analysis.present import rivalviews


def _fast(**extra) -> dict:
    row = {"kernel_source": "dev", "corpus": "pooled", "pool": "all", "n_cases": 10, "fastest": "pld-earliest-k64",
           "fastest_speedup": 20.0, "runner_up": "copy-line-jump", "margin_over_runner_up": 1.15,
           "best_rival": "pld-earliest-k64", "best_rival_speedup": 20.0, "best_copy": "copy-line-jump",
           "best_copy_speedup": 17.4, "copy_over_rival": 0.87, "copy_over_rival_ci_low": 0.83,
           "copy_over_rival_ci_high": 0.91, "copy_over_rival_band_low": 0.85, "copy_over_rival_band_high": 0.87,
           "copy_over_rival_marginal_ci_low": 0.83, "copy_over_rival_marginal_ci_high": 0.91,
           "copy_over_rival_linear_ci_low": 0.81, "copy_over_rival_linear_ci_high": 0.89}
    return {**row, **extra}


def test_the_fastest_rows_say_the_share_of_the_rivals_speedup_and_the_verdict():
    """Audit M7: the page said "Copy-as-Decode / best rival 0.87x", a ratio that reads as if Copy-as-Decode took 0.87x
    the time. It now says the share of the rival's speedup reached, its band over the prefill rules, and the verdict."""
    row = rivalviews.fastest_rows(pl.DataFrame([_fast()]), "dev").row(0, named=True)
    assert row["Copy-as-Decode's share of the best rival's speedup [paired 95% CI]"] == "87% [83%, 91%]"
    assert row["over the prefill rules past the profiled N"] == "85%-87%" and row["verdict"] == "the rival faster"
    assert not any("/ best rival" in c for c in rivalviews.fastest_rows(pl.DataFrame([_fast()]), "dev").columns)
    # slower under the judged rule, a tie under the other rule: the verdict depends on the pricing assumption
    tie_under_linear = _fast(copy_over_rival_linear_ci_low=0.95, copy_over_rival_linear_ci_high=1.02)
    assert rivalviews.verdict(tie_under_linear) == "depends on the pricing assumption"


def test_the_crossover_rows_name_where_each_rival_overtakes():
    flips = pl.DataFrame([{"kernel_source": "dev", "corpus": "A", "pool": "corpus", "rival_group": "pld-earliest",
                           "best_copy": "copy-line-jump", "best_copy_speedup": 17.4, "ks": "5, 10, 16, 32, 64",
                           "copy_wins_up_to": 32, "rival_wins_from": 64, "unbounded_passes": False,
                           "rival_speedup_at_cap": 19.1}])
    row = rivalviews.crossover_rows(flips, "dev").row(0, named=True)
    assert (row["Copy-as-Decode faster up to k"], row["the rival faster from k"]) == ("32", "64")
    assert row["unbounded drafts (a bound) pass it"] == "no" and row["rival"] == "pld-earliest"
    assert rivalviews.crossover_rows(flips, "other").is_empty()
