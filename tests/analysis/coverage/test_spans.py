import polars as pl
import pytest

from analysis.oracle.covmax import line_oracle, token_oracle
from analysis.coverage.spans import (
    DirectiveCounter,
    coverage_table,
    per_case_coverage,
    program_spans,
    span_histogram,
)

SOURCE = "def f(x):\n    y = x + 1\n\n\n    return y\n"
TARGET = "def f(x):\n    y = x - 1\n\n\n    return y\n    # done\n"


@pytest.mark.parametrize("level", ["line", "token"])
def test_span_tokens_add_up_to_the_gold_output(qwen, level):
    src, tgt = qwen.encode(SOURCE), qwen.encode(TARGET)
    program = line_oracle(SOURCE, TARGET) if level == "line" else token_oracle(src, tgt)
    rows = program_spans(program, src, tgt, DirectiveCounter(qwen))
    assert sum(r.n_tokens for r in rows) == len(tgt)
    assert all(r.directive_tokens > 0 for r in rows)
    assert all(r.n_tokens_src > 0 for r in rows if r.kind == "copy")
    assert sum(r.n_tokens for r in rows if r.kind == "copy") < len(tgt)


def frame(rows):
    return pl.DataFrame(rows, orient="row", schema={
        "case_id": pl.String, "corpus": pl.String, "framing": pl.String, "level": pl.String,
        "kind": pl.String, "n_tokens": pl.Int64,
    })


def test_coverage_is_token_weighted_with_a_bootstrap_interval():
    rows = []
    for k, (copied, gen) in enumerate([(90, 10), (10, 90), (50, 50), (80, 20)]):
        rows += [(f"C/{k}", "C", "body", "line", "copy", copied), (f"C/{k}", "C", "body", "line", "gen", gen)]
    table = coverage_table(per_case_coverage(frame(rows)), resamples=500, seed=0, ci=0.9)
    row = table.filter(pl.col("corpus") == "C").row(0, named=True)
    assert row["coverage"] == pytest.approx(230 / 400)
    assert row["ci_low"] < row["coverage"] < row["ci_high"]
    again = coverage_table(per_case_coverage(frame(rows)), resamples=500, seed=0, ci=0.9)
    assert again.equals(table)  # seeded: same params, same table


def test_pooled_rows_include_the_unit_framing():
    rows = [("A/0", "A", "body", "line", "copy", 5), ("P/0", "P", "unit", "line", "copy", 5),
            ("P/0", "P", "unit", "line", "gen", 5)]
    table = coverage_table(per_case_coverage(frame(rows)), resamples=10, seed=0, ci=0.9)
    pooled = table.filter(pl.col("corpus") == "pooled").row(0, named=True)
    assert pooled["n_cases"] == 2 and pooled["coverage"] == pytest.approx(10 / 15)


def test_histogram_bins_are_log2():
    rows = [("A/0", "A", "body", "line", "copy", n) for n in (1, 2, 3, 4, 7, 8, 512)]
    hist = span_histogram(frame(rows))
    assert dict(zip(hist["range"], hist["count"])) == {"1-1": 1, "2-3": 2, "4-7": 2, "8-15": 1, "512-1023": 1}
