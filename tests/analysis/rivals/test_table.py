"""The rivals tables on made-up per-case prices: the pooled figure is the ratio of sums, the pools are the paper's
three corpora and every corpus, an ideal program is never the fastest, the runner-up is another family's best, and
Copy-as-Decode's ratio to the best rival is paired case by case."""

import numpy as np
import polars as pl
import pytest

from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED
from analysis.rivals.table import fastest, percase_speedups, pooled_rows

SECONDS = {"ar": 10.0, "copy-line-decoded": 4.0, "copy-line-ideal": 1.0, "pld-earliest-k10": 5.0,
           "pld-earliest-k64": 2.0, "suffix-k64": 2.5}


def percase(cases_per_corpus: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for corpus, framing in (("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("CommitEdits-click", "file")):
        for i in range(cases_per_corpus):
            scale = float(rng.uniform(0.5, 2.0))
            for method, seconds in SECONDS.items():
                rows.append({"kernel_source": "paper", "case_id": f"{corpus}/{i}", "corpus": corpus, "framing": framing,
                             "method": method, "gold_tokens": 100, "forwards": 10, "decode_steps": 5,
                             "seconds": seconds * scale * (1.1 if i % 2 and method == "suffix-k64" else 1.0),
                             "extrapolated_forwards": 0})
    return percase_speedups(pl.DataFrame(rows))


def test_pooled_rows_are_ratios_of_sums_per_corpus_and_pool():
    cases = percase()
    table = pooled_rows(cases, 50, 0, 0.95)
    assert set(zip(table["corpus"], table["pool"])) >= {("HEvalFix-Py", "corpus"), (POOLED, PAPER_POOL), (POOLED, ALL_POOL)}
    paper = table.filter((pl.col("pool") == PAPER_POOL) & (pl.col("method") == "suffix-k64")).row(0, named=True)
    rows = cases.filter(pl.col("corpus").is_in(["HEvalFix-Py", "ProbeEdit-S"]) & (pl.col("method") == "suffix-k64"))
    assert paper["n_cases"] == 10
    assert paper["speedup"] == pytest.approx(rows["ar_seconds"].sum() / rows["seconds"].sum())
    assert table.filter(pl.col("method") == "ar")["speedup"].to_list() == [1.0] * 5
    assert table.filter(pl.col("method") == "copy-line-ideal")["role"].unique().to_list() == ["bound"]


def test_the_fastest_is_deployable_and_its_runner_up_another_family():
    cases = percase()
    fast = fastest(pooled_rows(cases, 50, 0, 0.95), cases, 50, 0, 0.95)
    row = fast.filter(pl.col("pool") == ALL_POOL).row(0, named=True)
    assert row["fastest"] == "pld-earliest-k64"          # the ideal program (10x) is faster but never a candidate
    assert row["runner_up"] == "suffix-k64"                   # not pld-earliest-k10, a sibling setting
    assert row["best_copy"] == "copy-line-decoded" and row["best_rival"] == "pld-earliest-k64"
    assert row["copy_over_rival"] == pytest.approx(0.5)   # 2 s against 4 s on every case
    assert row["copy_over_rival_ci_low"] == pytest.approx(0.5) and row["copy_over_rival_ci_high"] == pytest.approx(0.5)


def test_samples_lines_give_each_case_the_pooled_pair_and_its_own_ratio():
    """M5 of the UX review: samples.jsonl held no rivals rows; now one line per case names, per kernel source, the
    pooled head-to-head's pair (fastest deployable Copy-as-Decode and fastest rival over every case, never an ideal
    program) and this case's ratio, so "which edits does Copy-as-Decode win?" has a per-case answer."""
    import json

    import polars as pl

    from analysis.results.percase import rivals_sample_lines as sample_lines

    rows = []
    for case, copy_s in (("c/1", 1.0), ("c/2", 4.0)):
        for method, seconds in (("ar", 10.0), ("copy-line-decoded", copy_s), ("copy-line-ideal", 0.5),
                                ("pld-earliest-k5", 2.0), ("suffix-k64", 3.0)):
            rows.append({"kernel_source": "fit", "case_id": case, "corpus": "C", "framing": "body", "method": method,
                         "seconds": seconds, "speedup": 10.0 / seconds})
    lines = [json.loads(line) for line in sample_lines(pl.DataFrame(rows))]
    assert [(x["task"], x["case_id"]) for x in lines] == [("rivals", "c/1"), ("rivals", "c/2")]
    first, second = (x["by_kernel_source"]["fit"] for x in lines)
    assert (first["copy"], first["rival"]) == ("copy-line-decoded", "pld-earliest-k5")
    assert first["copy_over_rival"] == 2.0 and second["copy_over_rival"] == 0.5
