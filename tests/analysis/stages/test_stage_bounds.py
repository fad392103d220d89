"""analysis.stages.bounds: the two pools (the paper's corpora, all corpora) of the pooled rows, the
metric keys, the commit-level table's columns when no corpus is multi-file, and (slow, in a scratch
folder) the bounds in running-context mode on a two-context latency model."""

import numpy as np
import polars as pl
import pytest
from fixtures import params_model_key, params_with, write_model, write_scratch_params

from analysis.cli import main
from analysis.bounds import SUMMED_COSTS
from analysis.latency.model import GridCurve, LatencyModel
from analysis.pooling import ALL_POOL, MEAN_OF_CORPORA, PAPER_CORPORA, PAPER_POOL, POOLED
from analysis.stages.bounds import KEYS, both_pools, bound_metrics, commit_bounds, settings


def run(*args) -> int:
    return main(["--params", "params.yaml", *args])


def bound_rows(corpora: list[str], bound: float = 1.0) -> pl.DataFrame:
    """Per-corpus rows and one pooled row of one kernel source (the bounds table's key columns)."""
    names = [*corpora, POOLED]
    return pl.DataFrame({"kernel_source": "fit", "level": "line", "corpus": names, "framing": "body",
                         "variant": "ideal", "baseline": "eager", "pooling": "ratio_of_sums",
                         "bound": [bound + k for k in range(len(names))]})


def test_a_run_of_only_the_papers_corpora_labels_its_pooled_rows_both_pools():
    pools = both_pools(bound_rows(list(PAPER_CORPORA[:2])), pl.DataFrame())
    assert pools["pool"].to_list() == [PAPER_POOL, ALL_POOL]
    assert pools.columns[: len(KEYS) + 1] == ["pool", *KEYS]
    assert pools["bound"].n_unique() == 1 and set(pools["corpus"]) == {POOLED}


def test_a_run_without_the_papers_corpora_has_no_paper_pool():
    pools = both_pools(bound_rows(["Pairs-mine"]), pl.DataFrame())
    assert pools["pool"].to_list() == [ALL_POOL]


def test_a_computed_paper_pool_is_kept_beside_the_all_pool():
    table = bound_rows([PAPER_CORPORA[0], "Pairs-mine"])
    paper = bound_rows([PAPER_CORPORA[0]], bound=10.0).filter(pl.col("corpus") == POOLED).with_columns(
        pool=pl.lit(PAPER_POOL), extra=pl.lit(1))
    pools = both_pools(table, paper)
    assert pools.select("pool", "bound").rows() == [(PAPER_POOL, 11.0), (ALL_POOL, 3.0)]
    assert "extra" not in pools.columns  # only the columns both tables have


def test_bound_metric_keys_mark_the_mean_of_corpora_pooling():
    table = pl.DataFrame({"kernel_source": ["fit", "fit"], "baseline": ["eager"] * 2, "level": ["line"] * 2,
                          "variant": ["ideal"] * 2, "framing": ["body"] * 2, "corpus": [POOLED] * 2,
                          "pooling": ["ratio_of_sums", MEAN_OF_CORPORA], "bound": [2.0, 3.0],
                          "ci_low": [1.0, 2.0], "ci_high": [3.0, 4.0], "extrapolated_spans": [0, 1]})
    metrics = bound_metrics(table)
    assert list(metrics) == ["fit/eager/line/ideal/body/pooled", f"fit/eager/line/ideal/body/pooled/{MEAN_OF_CORPORA}"]
    assert metrics[f"fit/eager/line/ideal/body/pooled/{MEAN_OF_CORPORA}"]["extrapolated_spans"] == 1


def test_without_a_multi_file_corpus_the_commit_table_is_its_columns_alone():
    costs = pl.DataFrame({"case_id": ["Pairs-mine/1"], "corpus": ["Pairs-mine"], "level": ["line"],
                          "framing": ["pair"], "kernel_source": ["fit"], "baseline": ["eager"],
                          **{c: [1.0] for c in SUMMED_COSTS}, "extrapolated_regen": [False]})
    table = commit_bounds(costs, settings(params_with()))
    assert table.height == 0 and table.columns[: len(KEYS)] == KEYS
    assert {"n_files", "unit", "bound"} <= set(table.columns)


def two_context_model() -> LatencyModel:
    """Interpolated over N in [1, 4096] and c in {0, 8192}: decode and prefill both slow down with c."""
    ar = GridCurve((1.0, 4096.0), (0.0, 8192.0), ((1e-3, 4.096), (3e-3, 12.288)))
    prefill = GridCurve((1.0, 4096.0), (0.0, 8192.0), ((2e-3, 0.4), (6e-3, 1.6)))
    return LatencyModel(params_model_key(), "interp", ar, prefill, (1.0, 4096.0), (0.0, 8192.0))


@pytest.mark.slow  # a corpora -> programs -> spans build in a scratch folder
def test_bounds_in_running_mode_cost_each_op_at_its_context(stage_scratch):
    model = two_context_model()
    write_model(stage_scratch, model)
    write_scratch_params(stage_scratch, **{"bounds.context_mode": "running", "kernel.latency_form": "interp",
                             "bounds.extrapolate": False, "kernel.sources": ["fit"],
                             "bounds.kernel_repeats": False,
                             "bounds.step_cost": "first_step"})
    assert run("bounds") == 0
    running = pl.read_csv(stage_scratch / "reports/tables/bounds.csv")
    assert set(running["context_mode"]) == {"running"} and running["context"].null_count() == running.height
    assert (running["extrapolated_spans"] == 0).all() and running["bound"].is_finite().all() and (running["bound"] > 0).all()
    costs = pl.read_parquet(stage_scratch / "data/bounds/case_costs.parquet")
    spans = pl.read_parquet(stage_scratch / "data/spans/spans.parquet")
    # regeneration of one case: a decode step at every context from its prompt to prompt + G - 1
    case = costs.filter(pl.col("level") == "line").row(0, named=True)
    prompt = spans.filter((pl.col("case_id") == case["case_id"]) & (pl.col("level") == "line"))["prompt_tokens"][0]
    steps = model.t_step(np.arange(prompt, prompt + case["gold_tokens"], dtype=float)).seconds
    assert case["regen"] == pytest.approx(float(steps.sum()), rel=1e-9)

    write_scratch_params(stage_scratch, **{"bounds.context_mode": "fixed", "bounds.context": 256, "kernel.latency_form": "interp",
                             "kernel.sources": ["fit"], "bounds.kernel_repeats": False,
                             "bounds.step_cost": "first_step"})
    assert run("bounds") == 0
    fixed = pl.read_csv(stage_scratch / "reports/tables/bounds.csv")
    keys = ["level", "corpus", "framing", "variant", "pooling"]
    both = running.select(*keys, "bound").join(fixed.select(*keys, pl.col("bound").alias("fixed")), on=keys)
    assert both.height == running.height and (both["bound"] != both["fixed"]).all()
