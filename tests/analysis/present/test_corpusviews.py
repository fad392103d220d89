"""analysis.present.corpusviews: the corpus report's frames (groups, cases per framing, case sizes, coverage and
bounds per corpus, the real-vs-benchmark sentence, the wide bounds tables). Inputs are small frames built here;
expected values are computed independently in the test, never typed from a run."""

from __future__ import annotations

import statistics

import polars as pl
import pytest
from fixtures import bound_rows, coverage_rows

from analysis.errors import ParamsError
from analysis.present import notebook as present


# ---------------------------------------------------------------- corpora


def _cases() -> pl.DataFrame:
    rows = [("HEvalFix-Py/0", "HEvalFix-Py", "python", "body", "a\nb\nc\n", "a\nB\nc\n"),
            ("HEvalFix-Py/0", "HEvalFix-Py", "python", "decl", "d\na\nb\nc\n", "d\na\nB\nc\n"),
            ("HEvalFix-Py/1", "HEvalFix-Py", "python", "body", "x\n", "y\n"),
            ("CommitEdits-click/1", "CommitEdits-click", "python", "file", "1\n2\n3\n4\n5\n", "1\n2\n3\n4\n6\n"),
            ("Mine/1", "Mine", "js", "pair", "p\nq\n", "p\nq\nr\n")]
    return pl.DataFrame(rows, schema=["case_id", "corpus", "language", "framing", "source", "target"], orient="row")


def _spans() -> pl.DataFrame:
    rows = [("HEvalFix-Py/0", "body", "line", "copy", 2, 1), ("HEvalFix-Py/0", "body", "line", "gen", 3, 1),
            ("HEvalFix-Py/1", "body", "line", "gen", 2, 1), ("HEvalFix-Py/1", "body", "line", "gen", 4, 2),
            ("HEvalFix-Py/1", "body", "token", "gen", 99, 0),  # token level: not an edit size
            ("CommitEdits-click/1", "file", "line", "copy", 8, 4)]  # no gen span: a zero-size edit
    return pl.DataFrame(rows, schema=["case_id", "framing", "level", "kind", "n_tokens", "n_lines"], orient="row")


def test_corpus_groups():
    assert present.corpus_group("HEvalFix-Py", "body") == present.BENCHMARK
    assert present.corpus_group("ProbeEdit-S", "unit") == present.BENCHMARK
    assert present.corpus_group("CommitEdits-click", "file") == present.GIT_HISTORY
    assert present.corpus_group("Mine", "pair") == present.USER_PAIRS


def test_corpus_cases_counts_cases_per_framing():
    table = present.corpus_cases(_cases())
    row = table.filter(pl.col("corpus") == "HEvalFix-Py").row(0, named=True)
    assert row["framings"] == "body, decl" and row["cases_per_framing"] == 2 and row["group"] == present.BENCHMARK
    assert set(table["corpus"]) == set(_cases()["corpus"])


def test_case_sizes_follow_the_framing_and_sum_line_level_gen_spans():
    counted = []

    def fake_counts(texts):
        counted.extend(texts)
        return [len(t) for t in texts]  # characters stand in for tokens: known values

    sizes = present.case_sizes(_cases(), _spans(), "body", token_counts=fake_counts)
    assert set(sizes["framing"]) == {"body", "file", "pair"}  # decl left out; single framings join
    one = sizes.filter(pl.col("case_id") == "HEvalFix-Py/1").row(0, named=True)
    assert (one["changed_lines"], one["gen_tokens"]) == (1 + 2, 2 + 4)  # the token-level span is not counted
    zero = sizes.filter(pl.col("case_id") == "CommitEdits-click/1").row(0, named=True)
    assert (zero["changed_lines"], zero["gen_tokens"], zero["source_lines"]) == (0, 0, 5)
    assert zero["source_tokens"] == len("1\n2\n3\n4\n5\n") and len(counted) == sizes.height
    with pytest.raises(ParamsError, match="framing"):
        present.case_sizes(_cases(), _spans(), "prompt", token_counts=fake_counts)


def test_size_distribution_and_its_narrow_table():
    values = [1, 2, 3, 4, 100]
    sizes = pl.DataFrame({"group": ["benchmark"] * 5, "corpus": ["A"] * 5, "source_lines": values,
                          "source_tokens": values, "changed_lines": values, "gen_tokens": values})
    dist = present.size_distribution(sizes)
    row = dist.filter(pl.col("measure") == "source_lines").row(0, named=True)
    assert row["median"] == statistics.median(values) and row["max"] == max(values) and row["cases"] == len(values)
    assert row["mean"] == pytest.approx(statistics.mean(values))
    table = present.size_table(dist)
    assert table.columns == ["group", "corpus", "cases", *present.SIZE_MEASURES.values()]
    assert table["source lines"][0].startswith(present.fmt_count(statistics.median(values)) + " [")


def test_corpus_coverage_pivots_levels_and_keeps_only_the_framings_pool():
    table = present.corpus_coverage(coverage_rows(), "body")
    assert table.filter(pl.col("corpus") == "pooled").height == 1
    assert table["corpus"].to_list()[-1] == "pooled"  # pools last
    py = table.filter(pl.col("corpus") == "HEvalFix-Py").row(0, named=True)
    assert (py["line_coverage"], py["token_coverage"]) == (0.74, 0.97)
    assert table.filter(pl.col("corpus") == "CommitEdits-click")["group"][0] == present.GIT_HISTORY


def test_real_vs_benchmarks_is_computed_from_the_tables():
    bounds = bound_rows({("paper", "HEvalFix-Py"): 3.4, ("paper", "ProbeEdit-S"): 60.0, ("paper", "CommitEdits-click"): 25.0})
    text = present.real_vs_benchmarks(coverage_rows(), bounds)
    assert "CommitEdits-click" in text and present.fmt_pct(0.96) in text and present.fmt_x(25.0) in text
    assert "above HEvalFix-Py, below ProbeEdit-S*" in text
    higher = coverage_rows().with_columns(coverage=pl.when(pl.col("corpus") == "CommitEdits-click").then(0.999)
                                      .otherwise(pl.col("coverage")))
    assert "above every benchmark" in present.real_vs_benchmarks(higher, bounds)
    benchmarks_only = coverage_rows().filter(pl.col("corpus") != "CommitEdits-click")
    assert "No real-edit corpus" in present.real_vs_benchmarks(benchmarks_only, bounds)


def test_the_field_benchmarks_are_placed_apart_from_the_real_edits():
    """CanItEdit and EditEval are published benchmarks, not real edits: their own sentence, placed among the
    paper's benchmarks, and never counted as real edits or as the paper's benchmarks."""
    field = pl.DataFrame([{"corpus": corpus, "framing": "pair", "level": level, "n_cases": 10, "coverage": value,
                           "ci_low": value - 0.01, "ci_high": value + 0.005}
                          for corpus, line in (("CanItEdit", 0.85), ("EditEval", 0.60))
                          for level, value in (("line", line), ("token", line + 0.05))])
    cov = pl.concat([coverage_rows(), field])
    bounds = bound_rows({("paper", "HEvalFix-Py"): 3.4, ("paper", "ProbeEdit-S"): 60.0, ("paper", "CommitEdits-click"): 25.0})
    text = present.real_vs_benchmarks(cov, bounds)
    real, _, theirs = text.partition("The field's benchmarks")
    assert "CanItEdit" not in real and "benchmarks span 74.0%-98.0%" in real  # the paper's benchmarks alone
    assert "(CanItEdit, EditEval; not in the paper's pool) reach 60.0%-85.0% line-level coverage: below " \
           "ProbeEdit-S*, level with HEvalFix-Py" in theirs
    # a range with a benchmark inside it is level with it, never "below every benchmark"
    level = present.real_vs_benchmarks(cov, bound_rows({("paper", "HEvalFix-Py"): 3.4, ("paper", "ProbeEdit-S"): 60.0,
                                                         ("paper", "CanItEdit"): 3.7, ("paper", "EditEval"): 1.7}))
    assert "their bound is 1.7x-3.7x: below ProbeEdit-S*, level with HEvalFix-Py" in level
    assert present.corpus_group("CanItEdit", "pair") == present.FIELD_BENCHMARK
    only_theirs = pl.concat([coverage_rows().filter(pl.col("corpus") != "CommitEdits-click"), field])
    assert "No real-edit corpus" in present.real_vs_benchmarks(only_theirs, bounds)
    assert "The field's benchmarks" in present.real_vs_benchmarks(only_theirs, bounds)


def test_the_data_checks_table_reads_the_corpora_metrics(tmp_path):
    import json

    from analysis.corpora.checks import DECISIONS

    counts = {problem: 0 for problem in DECISIONS}
    (tmp_path / "corpora.json").write_text(json.dumps({"data_checks": {"decisions": DECISIONS, "cases": {
        "CanItEdit/pair": {"cases": 105, **counts, "no_final_newline": 105},
        "HEvalFix-Py/body": {"cases": 164, **counts}}}}))
    table = present.data_checks_table(tmp_path)
    assert table.columns == ["group", "corpus", "framing", "cases", *DECISIONS]
    row = table.filter(pl.col("corpus") == "CanItEdit").row(0, named=True)
    assert (row["group"], row["framing"], row["no_final_newline"]) == (present.FIELD_BENCHMARK, "pair", 105)
    assert present.data_decisions(tmp_path)["problem"].to_list() == list(DECISIONS)
    (tmp_path / "corpora.json").write_text("{}")
    with pytest.raises(ParamsError, match="no data_checks; rerun `copydecode corpora`"):
        present.data_checks_table(tmp_path)


def test_corpus_bounds_has_one_column_per_kernel_and_labels_both_poolings():
    bounds = bound_rows({("paper", "HEvalFix-Py"): 3.4, ("fit", "HEvalFix-Py"): 2.9, ("paper", "pooled"): 12.0,
                          ("fit", "pooled"): 8.0})
    table = present.corpus_bounds(bounds, "body", "line", "ideal")
    assert {"paper kernel", "fitted, eager AR"} <= set(table.columns)
    assert {"pooled (ratio of sums)", "pooled (mean of corpora)"} <= set(table["corpus"])
    assert table.filter(pl.col("corpus") == "HEvalFix-Py")["paper kernel"][0].startswith(present.fmt_x(3.4))


def test_bounds_wide_and_tokenization_wide_are_narrow_and_put_pools_last():
    bounds = bound_rows({("paper", "HEvalFix-Py"): 3.4, ("paper", "pooled"): 12.0, ("paper", "ProbeEdit-S"): 60.0})
    wide = present.bounds_wide(bounds)
    assert wide.columns == ["corpus", "n_cases", "line ideal", "extrapolated_spans_line"]
    assert wide["corpus"].to_list()[-2:] == ["pooled (mean of corpora)", "pooled (ratio of sums)"]
    assert wide.filter(pl.col("corpus") == "ProbeEdit-S")["line ideal"][0] == (
        f"{present.fmt_x(60.0)} {present.fmt_ci(60.0 * 0.9, 60.0 * 1.1)}")
    tok = bounds.with_columns(bound_gold_prefill=pl.col("bound") * 1.1, rel_change=pl.lit(0.1))
    narrow = present.tokenization_wide(tok)
    assert narrow.height == bounds.height and narrow["line ideal"][0].endswith(f"(+{present.fmt_pct(0.1, 2)})")


def test_an_extrapolated_spans_column_is_named_by_what_it_counts():
    """C11: `extrapolated_spans_max` was 1,449 on the corpora page (line level, any kernel) and 5,120 on the
    bounds page (line and token, one kernel)."""
    from analysis.present.corpusviews import bounds_wide, corpus_bounds

    rows = []
    for source, extra in (("fit", {"line": 3, "token": 9}), ("paper", {"line": 5, "token": 0})):
        for level in ("line", "token"):
            for variant in ("ideal", "overhead"):
                rows.append({"kernel_source": source, "baseline": "eager", "corpus": "HEvalFix-Py", "framing": "body",
                             "pooling": "corpus", "level": level, "variant": variant, "n_cases": 4, "bound": 2.0,
                             "ci_low": 1.0, "ci_high": 3.0, "extrapolated_spans": extra[level]})
    frame = pl.DataFrame(rows)
    one = bounds_wide(frame.filter(pl.col("kernel_source") == "fit"))
    assert one["extrapolated_spans_line"].to_list() == [3] and one["extrapolated_spans_token"].to_list() == [9]
    every = corpus_bounds(frame, "body", "line", "ideal")
    assert every["extrapolated_spans_line_any_kernel"].to_list() == [5]
    assert not {c for c in one.columns if c.startswith("extrapolated")} & {c for c in every.columns if c.startswith("extrapolated")}


def test_a_tokenization_table_of_unchanged_rows_becomes_one_sentence():
    """P3: 56 rows that all read "(+0.00%)" say so in one sentence; a visible change keeps the table."""
    import polars as pl

    from analysis.present.corpusviews import tokenization_note

    rows = pl.DataFrame({"kernel_source": ["fit", "paper"], "corpus": ["A", "B"], "level": ["line", "token"],
                         "variant": ["ideal", "overhead"], "rel_change": [0.0, 4e-5]})
    text = tokenization_note(rows)
    assert "none of the 2 bounds shown changes by 0.005% or more" in text and "4.00e-05" in text and "paper, B" in text
    assert tokenization_note(rows.with_columns(rel_change=pl.Series([0.0, 0.002]))) is None
