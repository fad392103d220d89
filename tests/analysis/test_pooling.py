"""analysis.pooling: the framing rule, the pools (the one paper pool), the corpus groups and the names shown;
analysis.layout's context label."""

import polars as pl

from analysis.layout import context_label
from analysis.pooling import (
    BENCHMARK,
    GIT_HISTORY,
    MEAN_OF_CORPORA,
    PAPER_POOL,
    POOLED,
    POOLING_LABELS,
    RATIO_OF_SUMS,
    USER_PAIRS,
    corpus_group,
    group_expr,
    paper_cases,
    paper_pool,
    paper_view,
    pool_framings,
    pooled_groups,
    pool_rows,
    pooling_label,
    star,
)


def test_single_framing_corpora_join_every_multi_framing_pool():
    assert pool_framings(["decl", "unit", "body", "pair"]) == ["body", "decl"]
    assert pool_framings(["pair", "file"]) == ["file", "pair"]  # alone, the single framings get their own pool
    frame = pl.DataFrame({"corpus": ["a", "a", "b", "c"], "framing": ["body", "decl", "unit", "file"]})
    assert pool_rows(frame, "body")["corpus"].to_list() == ["a", "b", "c"]


def test_the_paper_view_keeps_the_papers_corpora_of_one_framing():
    frame = pl.DataFrame({"corpus": ["HEvalFix-Py", "HEvalFix-Py", "ProbeEdit-S", "CommitEdits-x", POOLED],
                          "framing": ["body", "decl", "unit", "file", "body"]})
    assert paper_view(frame).rows() == [("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit")]


def test_corpus_groups_agree_with_their_polars_expression():
    rows = [("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("CommitEdits-click", "file"), ("mine", "pair")]
    expected = [BENCHMARK, BENCHMARK, GIT_HISTORY, USER_PAIRS]
    assert [corpus_group(c, f) for c, f in rows] == expected
    frame = pl.DataFrame(rows, schema=["corpus", "framing"], orient="row")
    assert frame.select(group_expr()).to_series().to_list() == expected


def test_names_and_labels_shown():
    assert star("ProbeEdit-S") == "ProbeEdit-S*" and star("HEvalFix-Py") == "HEvalFix-Py"
    assert context_label("fixed", 256) == "c=256"
    assert context_label("running", None) == "c = prompt + output so far"
    frame = pl.DataFrame({"corpus": [POOLED, POOLED, "a"], "pooling": [RATIO_OF_SUMS, MEAN_OF_CORPORA, "corpus"]})
    assert pooling_label(frame)["corpus"].to_list() == [POOLING_LABELS[RATIO_OF_SUMS],
                                                        POOLING_LABELS[MEAN_OF_CORPORA], "a"]
    assert pooling_label(frame.drop("pooling")).equals(frame.drop("pooling"))


def test_the_paper_pool_weights_the_papers_corpora_only_at_each_pool_framing():
    rows = pl.DataFrame({
        "corpus": ["HEvalFix-Py", "HEvalFix-JS", "HEvalFix-Py", "ProbeEdit-S", "CommitEdits-x", POOLED],
        "framing": ["body", "body", "decl", "unit", "file", "body"],
        "kind": ["k"] * 6, "em": [0.2, 0.0, 0.9, 0.5, 1.0, 0.7], "n_cases": [164, 164, 164, 154, 600, 1082]})
    pooled = paper_pool(rows, "n_cases", ["em"], by=["kind"])
    body = pooled.filter(pl.col("framing") == "body").row(0, named=True)
    # by hand: (164 * 0.2 + 164 * 0.0 + 154 * 0.5) / 482; CommitEdits, the decl row and the pooled row left out
    assert body["em"] == (164 * 0.2 + 154 * 0.5) / 482 and body["n_cases"] == 482 and body["corpora"] == 3
    decl = pooled.filter(pl.col("framing") == "decl").row(0, named=True)
    assert decl["em"] == (164 * 0.9 + 154 * 0.5) / 318 and decl["pool"] == PAPER_POOL
    assert paper_pool(rows.filter(pl.col("corpus") == "CommitEdits-x"), "n_cases", ["em"]).height == 0


def test_the_paper_pools_cases_exist_only_beside_other_corpora():
    cases = pl.DataFrame({"corpus": ["HEvalFix-Py", "ProbeEdit-S", "CommitEdits-x"], "framing": ["body", "unit", "file"]})
    assert paper_cases(cases)["corpus"].to_list() == ["HEvalFix-Py", "ProbeEdit-S"]
    assert paper_cases(cases.head(2)).height == 0  # only the paper's corpora: the pool of every corpus is the paper's
    assert paper_cases(cases.tail(1)).height == 0


def test_pooled_groups_add_one_pool_per_multi_framing_with_the_single_framing_corpora():
    cases = pl.DataFrame({"corpus": ["a", "a", "b"], "framing": ["body", "decl", "unit"], "x": [1, 2, 3]})
    groups = {(corpus, framing): rows["x"].to_list() for corpus, framing, rows in pooled_groups(cases)}
    assert groups == {("a", "body"): [1], ("a", "decl"): [2], ("b", "unit"): [3],
                      (POOLED, "body"): [1, 3], (POOLED, "decl"): [2, 3]}
