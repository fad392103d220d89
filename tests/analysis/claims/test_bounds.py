"""Claim 3 (analysis.claims.bounds) on small bounds.csv / coverage.csv written here: a verdict per corpus;
the ProbeEdit-S stand-in and any pool holding it are "not comparable"; only judged rows count."""

from __future__ import annotations

import polars as pl
from fixtures import bound_rows, coverage_rows, write_bound_tables

from analysis.claims import bounds
from analysis.claims import verdict as v
from analysis.layout import METRICS, TABLES
from analysis.pooling import ALL_POOL, PAPER_POOL, pool_label
from analysis.results.numbers import fmt_pct, fmt_x

SPEC = v.paper_claims()["bounds"]
PAPER_POOL_SCOPE = f"{pool_label(PAPER_POOL)} (ratio of sums)"
ALL_POOL_SCOPE = f"{pool_label(ALL_POOL)} (ratio of sums)"


def _bounds(py: float, js: float, probe: float, pooled: float, extra: bool) -> pl.DataFrame:
    values = {("paper", "HEvalFix-Py"): py, ("paper", "HEvalFix-JS"): js, ("paper", "ProbeEdit-S"): probe,
              ("paper", "pooled"): pooled, ("fit", "HEvalFix-Py"): 2.0}
    cases = {"HEvalFix-Py": 164, "HEvalFix-JS": 164, "ProbeEdit-S": 154, "pooled": 482 + (300 if extra else 0)}
    if extra:
        values[("paper", "CommitEdits-click")] = 20.0
        cases["CommitEdits-click"] = 300
    return bound_rows(values, cases)


def _scopes(claim) -> dict:
    return {s.scope: s for s in claim.scopes}


def test_claim_3_has_a_verdict_per_corpus_and_the_stand_in_is_not_comparable(tmp_path):
    tables = write_bound_tables(tmp_path, _bounds(SPEC["HEvalFix-Py"], SPEC["HEvalFix-JS"], SPEC["ProbeEdit"],
                                                  SPEC["pooled"], extra=False))
    claim = bounds.bounds_claim(SPEC, tables, tmp_path / METRICS)
    scopes = _scopes(claim)
    assert scopes["HEvalFix-Py"].verdict == scopes["HEvalFix-JS"].verdict == v.REPRODUCED
    # the stand-in matches the paper's figure here, and is still not judged: it is not the paper's corpus
    assert scopes["ProbeEdit-S*"].verdict == v.NOT_COMPARABLE and "stand-in" in scopes["ProbeEdit-S*"].reason
    assert scopes[PAPER_POOL_SCOPE].verdict == v.NOT_COMPARABLE and "holds the stand-in" in scopes[PAPER_POOL_SCOPE].reason
    assert claim.verdict == v.REPRODUCED and claim.reason.startswith("2 of 2 judged reproduced")


def test_only_judged_rows_turn_claim_3(tmp_path):
    far = 3 * SPEC["ProbeEdit"]  # the stand-in and its pool far off: not comparable, the verdict stands
    tables = write_bound_tables(tmp_path, _bounds(SPEC["HEvalFix-Py"], SPEC["HEvalFix-JS"], far, 3 * SPEC["pooled"], False))
    assert bounds.bounds_claim(SPEC, tables, tmp_path / METRICS).verdict == v.REPRODUCED
    tables = write_bound_tables(tmp_path, _bounds(2 * SPEC["HEvalFix-Py"], SPEC["HEvalFix-JS"], SPEC["ProbeEdit"],
                                                  SPEC["pooled"], False))
    claim = bounds.bounds_claim(SPEC, tables, tmp_path / METRICS)
    assert claim.verdict == v.DIFFERS and _scopes(claim)["HEvalFix-Py"].verdict == v.DIFFERS
    assert claim.reason.startswith("1 of 2 judged reproduced")


def test_the_pool_of_every_corpus_is_shown_and_never_judged(tmp_path):
    tables = write_bound_tables(tmp_path, _bounds(SPEC["HEvalFix-Py"], SPEC["HEvalFix-JS"], SPEC["ProbeEdit"],
                                                  SPEC["pooled"], extra=True))
    scopes = _scopes(bounds.bounds_claim(SPEC, tables, tmp_path / METRICS))
    assert scopes[ALL_POOL_SCOPE].verdict == v.NOT_COMPARABLE
    assert "CommitEdits-click" in scopes[ALL_POOL_SCOPE].reason and "782 cases against 482" in scopes[ALL_POOL_SCOPE].reason
    assert PAPER_POOL_SCOPE not in scopes  # no paper-pool row in this table and the run holds more: not invented


def test_the_paper_pool_is_read_from_the_table_and_every_source_shows_both_pools(tmp_path):
    corpora = {"HEvalFix-Py": ("body", 164), "HEvalFix-JS": ("body", 164), "ProbeEdit-S": ("unit", 154),
               "CommitEdits-click": ("file", 600)}
    names = {"HEvalFix-Py": "HEvalFix-Py", "HEvalFix-JS": "HEvalFix-JS", "ProbeEdit-S": "ProbeEdit"}
    rows = []
    for source, baseline, scale in (("paper", "paper (A100, bf16)", 1.0), ("h200/q/static_compiled", "static_compiled", 0.7)):
        def row(corpus, framing, n, bound, pooling="corpus", pool="all"):
            return {"level": "line", "corpus": corpus, "framing": framing, "variant": "ideal", "n_cases": n,
                    "bound": bound, "ci_low": bound * 0.95, "ci_high": bound * 1.05, "pooling": pooling, "pool": pool,
                    "extrapolated_spans": 0, "kernel_source": source, "baseline": baseline}
        for corpus, (framing, n) in corpora.items():
            rows.append(row(corpus, framing, n, scale * SPEC.get(names.get(corpus, ""), 40.0)))
        rows.append(row("pooled", "body", 1082, scale * 2 * SPEC["pooled"], "ratio_of_sums", "all"))
        rows.append(row("pooled", "body", 482, scale * SPEC["pooled"], "ratio_of_sums", "paper"))
    tables = write_bound_tables(tmp_path, pl.DataFrame(rows))
    claim = bounds.bounds_claim(SPEC, tables, tmp_path / METRICS)
    paper = _scopes(claim)[PAPER_POOL_SCOPE]
    assert paper.cases == 482 and paper.value == SPEC["pooled"] and paper.verdict == v.NOT_COMPARABLE
    beside = claim.ours.split("Beside it, ")[1]
    assert f"{pool_label(PAPER_POOL)} {fmt_x(0.7 * SPEC['pooled'])} (ratio of sums) (482 cases)" in beside
    assert f"{pool_label(ALL_POOL)} {fmt_x(1.4 * SPEC['pooled'])} (ratio of sums) (1,082 cases)" in beside
    compare = bounds.paper_comparison(tables)
    assert {"scope", "verdict", "h200/q/static_compiled kernel"} <= set(compare.columns)
    assert compare.filter(pl.col("scope") == PAPER_POOL_SCOPE)["h200/q/static_compiled kernel"][0].startswith(
        fmt_x(0.7 * SPEC["pooled"]))


def test_the_stand_ins_reason_explains_a_bound_above_the_papers_from_the_generated_share(tmp_path):
    coverage = coverage_rows().with_columns(coverage=pl.when(pl.col("corpus") == "ProbeEdit-S").then(0.99)
                                            .otherwise(pl.col("coverage")))
    tables = write_bound_tables(tmp_path, _bounds(SPEC["HEvalFix-Py"], SPEC["HEvalFix-JS"], 3 * SPEC["ProbeEdit"],
                                                  SPEC["pooled"], False), coverage)
    reason = _scopes(bounds.bounds_claim(SPEC, tables, tmp_path / METRICS))["ProbeEdit-S*"].reason
    assert fmt_pct(1 / SPEC["ProbeEdit"]) in reason and fmt_pct(1 - 0.99) in reason


def test_every_kernel_source_is_shown_beside_the_judged_paper_kernel(tmp_path):
    tables = write_bound_tables(tmp_path, _bounds(SPEC["HEvalFix-Py"], SPEC["HEvalFix-JS"], SPEC["ProbeEdit"],
                                                  SPEC["pooled"], False))
    claim = bounds.bounds_claim(SPEC, tables, tmp_path / METRICS)
    assert "fit (eager AR" in claim.ours and all(s.scope != "fit" for s in claim.scopes)
    assert "fitted kernel" in bounds.paper_comparison(tables).columns
    assert (tmp_path / TABLES).is_dir()
