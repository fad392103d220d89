"""analysis.layout: the pooling rules of framings and corpora, the corpus groups and the names shown."""

import polars as pl

from analysis.layout import context_label
from analysis.pooling import (
    BENCHMARK,
    GIT_HISTORY,
    MEAN_OF_CORPORA,
    POOLED,
    POOLING_LABELS,
    RATIO_OF_SUMS,
    USER_PAIRS,
    corpus_group,
    group_expr,
    paper_view,
    pool_framings,
    pool_rows,
    pooled_share,
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


def test_pooled_shares_are_case_weighted():
    rows = pl.DataFrame({"em": [1.0, 0.0], "n_cases": [3, 1]})
    assert pooled_share(rows, "em") == 0.75
    assert pooled_share(rows.head(0), "em") is None
    assert pooled_share(pl.DataFrame({"em": [0.5], "n_cases": [0]}), "em") is None


def test_names_and_labels_shown():
    assert star("ProbeEdit-S") == "ProbeEdit-S*" and star("HEvalFix-Py") == "HEvalFix-Py"
    assert context_label("fixed", 256) == "c=256"
    assert context_label("running", None) == "c = prompt + output so far"
    frame = pl.DataFrame({"corpus": [POOLED, POOLED, "a"], "pooling": [RATIO_OF_SUMS, MEAN_OF_CORPORA, "corpus"]})
    assert pooling_label(frame)["corpus"].to_list() == [POOLING_LABELS[RATIO_OF_SUMS],
                                                        POOLING_LABELS[MEAN_OF_CORPORA], "a"]
    assert pooling_label(frame.drop("pooling")).equals(frame.drop("pooling"))
