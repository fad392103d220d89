import numpy as np
import polars as pl
import pytest

from analysis.bounds import KernelModel, bounds_table, case_costs

# t_step = 1 ms at any context; T_prefill(n) = 2 ms + 0.01 ms * n
KERNEL = KernelModel(a=1e-3, b=0.0, p0=2e-3, p1=1e-5, p2=0.0, p3=0.0)


def spans(rows):
    return pl.DataFrame(rows, orient="row", schema={
        "case_id": pl.String, "corpus": pl.String, "framing": pl.String, "level": pl.String,
        "kind": pl.String, "n_tokens": pl.Int64, "n_tokens_src": pl.Int64, "directive_tokens": pl.Int64,
    })


def test_bound_matches_a_hand_computed_histogram():
    # one case: copy 100 tokens, gen 10 tokens, copy 50 tokens; directives 7 + 2 + 7 tokens
    table = spans([
        ("A/0", "A", "body", "line", "copy", 100, 100, 7),
        ("A/0", "A", "body", "line", "gen", 10, 0, 2),
        ("A/0", "A", "body", "line", "copy", 50, 50, 7),
    ])
    costs = case_costs(table, KERNEL, context=0).row(0, named=True)
    g, t = 160, 1e-3
    prefill = (2e-3 + 100e-5) + (2e-3 + 50e-5)
    assert costs["regen"] == pytest.approx(g * t)
    assert costs["program_ideal"] == pytest.approx(prefill + 10 * t)
    assert costs["program_overhead"] == pytest.approx(prefill + 10 * t + 16 * t)
    bounds = bounds_table(case_costs(table, KERNEL, 0), resamples=0, seed=0, ci=0.95)
    ideal = bounds.filter((pl.col("corpus") == "A") & (pl.col("variant") == "ideal"))["bound"][0]
    assert ideal == pytest.approx(0.160 / (prefill + 0.010))
    overhead = bounds.filter((pl.col("corpus") == "A") & (pl.col("variant") == "overhead"))["bound"][0]
    assert overhead == pytest.approx(0.160 / (prefill + 0.026))


def test_all_gen_program_has_bound_one_and_empty_copies_are_free():
    table = spans([
        ("A/0", "A", "body", "line", "gen", 40, 0, 2),
        ("A/0", "A", "body", "line", "copy", 0, 0, 7),  # a blank line glued to the previous token
    ])
    costs = case_costs(table, KERNEL, 0).row(0, named=True)
    assert costs["program_ideal"] == pytest.approx(costs["regen"])


def test_corpus_bound_is_a_ratio_of_sums_with_an_interval():
    rows = []
    for k in range(20):
        rows += [(f"A/{k}", "A", "body", "line", "copy", 10 * (k + 1), 10 * (k + 1), 7),
                 (f"A/{k}", "A", "body", "line", "gen", 5, 0, 2)]
    costs = case_costs(spans(rows), KERNEL, 0)
    table = bounds_table(costs, resamples=500, seed=1, ci=0.95).filter(pl.col("corpus") == "A")
    ideal = table.filter(pl.col("variant") == "ideal").row(0, named=True)
    assert ideal["bound"] == pytest.approx(costs["regen"].sum() / costs["program_ideal"].sum())
    assert ideal["ci_low"] < ideal["bound"] < ideal["ci_high"]
    over = table.filter(pl.col("variant") == "overhead").row(0, named=True)
    assert over["bound"] < ideal["bound"]


def test_kernel_model_from_fit_record():
    fit = {"ar": {"terms": {"a": 1.0, "b": 0.5}}, "prefill": {"terms": {"p0": 1, "p1": 2, "p2": 3, "p3": 4}}}
    km = KernelModel.from_fit(fit)
    assert km.t_step(2) == 2.0
    assert float(km.t_prefill(np.array([2]), 1)[0]) == 1 + 4 + 6 + 16
