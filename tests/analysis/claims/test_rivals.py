"""The head-to-head extension (analysis.claims.rivals): the rivals stage's fastest-method table read back as decision
scopes: every corpus and pool under the judged source, the pool of every corpus under the others; each with a
number, its paired interval, a decision, a basis and the prompt-lookup k at which the ranking flips."""

from __future__ import annotations

import json

import polars as pl

from analysis.claims import decision as d
from analysis.claims import verdict as v
from analysis.claims.rivals import rivals_claim
from analysis.layout import METRICS, TABLES

SPEC = v.paper_claims()["rivals"]


def _fast(source, corpus, pool, ratio, low, high, **extra):
    return {"kernel_source": source, "corpus": corpus, "pool": pool, "n_cases": 10, "fastest": "pld-earliest-kinf",
            "fastest_label": "x", "fastest_speedup": 20.0, "runner_up": "copy-line-jump", "margin_over_runner_up": 1.2,
            "best_rival": "pld-earliest-kinf", "best_rival_speedup": 20.0, "best_copy": "copy-line-jump",
            "best_copy_speedup": 20.0 * ratio, "copy_over_rival": ratio, "copy_over_rival_ci_low": low,
            "copy_over_rival_ci_high": high, **extra}


def _speed(source, corpus, pool, method, speedup, share=0.1):
    return {"kernel_source": source, "corpus": corpus, "pool": pool, "method": method, "speedup": speedup,
            "extrapolated_share": share}


def _write(tmp_path, fast, speeds=None):
    tables, metrics = tmp_path / TABLES, tmp_path / METRICS
    tables.mkdir(parents=True)
    metrics.mkdir(parents=True)
    (metrics / "rivals.json").write_text(json.dumps({"judged_source": "dev"}))
    pl.DataFrame(fast).write_csv(tables / "rivals_fastest.csv")
    if speeds is not None:
        pl.DataFrame(speeds).write_csv(tables / "rivals.csv")
    return tables, metrics


def test_every_scope_is_a_decision_with_a_number_and_its_interval(tmp_path):
    fast = [_fast("dev", "pooled", "all", 0.5, 0.45, 0.55), _fast("dev", "HEvalFix-Py", "corpus", 1.2, 1.1, 1.3),
            _fast("dev", "pooled", "paper", 0.95, 0.9, 1.05), _fast("fit", "pooled", "all", 0.7, 0.6, 0.8),
            _fast("fit", "HEvalFix-Py", "corpus", 0.7, 0.6, 0.8)]
    speeds = [_speed("dev", "pooled", "all", m, x) for m, x in
              (("copy-line-jump", 10.0), ("pld-earliest-k16", 8.0), ("pld-earliest-k32", 12.0),
               ("pld-earliest-kinf", 20.0))]
    claim = rivals_claim(SPEC, *_write(tmp_path, fast, speeds))
    names = [s.scope for s in claim.scopes]
    assert names == ["dev (judged), every corpus", "dev (judged), the paper's pool", "dev (judged), HEvalFix-Py",
                     "fit, every corpus"]  # the headline pool first; the other source: its pool of every corpus only
    assert [s.decision for s in claim.scopes] == [d.SLOWER, d.TIE, d.FASTER, d.SLOWER]
    pooled = claim.scopes[0]
    assert (pooled.value, pooled.ci, pooled.cases, pooled.basis) == (0.5, (0.45, 0.55), 10, d.PRICED)
    assert pooled.detail["flips"] == [{"policy": "earliest", "wins_up_to": 16, "loses_from": 32, "unbounded_wins": True}]
    assert "wins up to k = 16, loses from k = 32" in pooled.ours
    assert claim.ours.startswith("under dev, Copy-as-Decode's best deployable variant against the fastest deployable "
                                 "rival, the share of the rival's speedup it reaches: every corpus 50% [45%, 55%] (slower)")


def test_the_wording_says_what_share_of_the_rivals_speedup_copy_as_decode_reaches(tmp_path):
    """Audit M7: "takes 0.53x the best rival's time ratio" read as if Copy-as-Decode took 0.53x the time (faster);
    it meant the rival was 1.87x faster. Every scope now says the share of the fastest rival's speedup Copy-as-Decode
    reaches, with its paired interval and which side is faster, and never a time ratio."""
    fast = [_fast("dev", "pooled", "all", 0.535, 0.51, 0.56)]
    claim = rivals_claim(SPEC, *_write(tmp_path, fast))
    (scope,) = claim.scopes
    assert ("reaches 54% of the fastest rival's speedup (paired 95% CI [51%, 56%]; the rival is 1.87x faster)"
            in scope.ours)
    assert "time ratio" not in scope.ours + claim.ours and "0.53x" not in scope.ours
    assert d.reach(1.25, 1.1, 1.4).endswith("Copy-as-Decode is 1.25x faster)")


def test_an_extrapolation_band_across_one_makes_the_decision_depend_on_pricing(tmp_path):
    fast = [_fast("dev", "pooled", "all", 0.5, 0.45, 0.55, copy_over_rival_band_low=0.4,
                  copy_over_rival_band_high=1.3)]
    speeds = [_speed("dev", "pooled", "all", "copy-line-jump", 10.0, share=0.9)]
    (scope,) = rivals_claim(SPEC, *_write(tmp_path, fast, speeds)).scopes
    assert scope.decision == d.DEPENDS and scope.detail["band"] == [0.4, 1.3] and scope.basis == d.EXTRAPOLATED
