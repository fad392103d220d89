"""analysis.stages.optimal, end to end in a scratch folder on HumanEvalPack Python body cases (the
`stage_scratch` fixture): the cost-optimal oracle beside the coverage oracle, the min_copy sweep, and
the refusals of extrapolation and bad params."""

import json

import polars as pl
import pytest
from fixtures import one_context_model, write_model, write_scratch_params

from analysis.cli import main
from analysis.pipeline.config import Config
from analysis.errors import ParamsError

pytestmark = pytest.mark.slow  # a corpora -> programs -> spans build in a scratch folder


def run(*args) -> int:
    return main(["--params", "params.yaml", *args])


# t_step = 1 ms; T_prefill(n) = 3 ms + 0.02 ms * n: a 1-token copy costs more than decoding it
ONE_CONTEXT = one_context_model()


# ---------------------------------------------------------------- optimal

def test_optimal_stage_floor_is_never_below_the_coverage_oracles(stage_scratch):
    write_model(stage_scratch, ONE_CONTEXT)
    assert run("optimal") == 0
    table = pl.read_csv(stage_scratch / "reports/tables/optimal.csv")
    assert set(table["kernel_source"]) == {"fit", "paper"} and set(table["level"]) == {"line", "token"}
    assert set(table["pooling"]) == {"corpus", "ratio_of_sums", "mean_of_corpora"}
    # the DP minimises exactly the overhead variant's time, over a space holding the coverage oracle's program
    assert (table["optimal_bound"] >= table["covmax_bound"] * (1 - 1e-9)).all()
    assert (table["floor_gain"] > 0.01).any()  # with a 3 ms prefill, dropping short copies must pay
    assert (table["optimal_coverage"] <= table["covmax_coverage"] + 1e-12).all()
    # the paper's curve starts at N = 8: shorter copies are extrapolated and counted
    paper = table.filter((pl.col("kernel_source") == "paper") & (pl.col("pooling") == "corpus"))
    assert (paper["covmax_extrapolated_spans"] > 0).all()
    metrics = json.loads((stage_scratch / "reports/metrics/optimal.json").read_text())
    assert "seconds" not in json.dumps(metrics)
    assert json.loads((stage_scratch / "data/timings/optimal.json").read_text())["seconds"] > 0
    row = table.filter((pl.col("kernel_source") == "fit") & (pl.col("level") == "token")
                       & (pl.col("pooling") == "corpus")).row(0, named=True)
    assert metrics["optimal"][f"fit/eager/token/body/{row['corpus']}"]["optimal_bound"] == pytest.approx(
        row["optimal_bound"], rel=1e-3)


def test_the_coverage_oracles_floor_is_the_bounds_own_price_of_its_programs(stage_scratch):
    """One price (review D11): optimal.csv's coverage-oracle floor is the bound of the programs stage's
    programs (spans.parquet) under the bounds' pricing at bounds.context (bounds.step_cost,
    bounds.steady_max_n): analysis.bounds' case_costs and bounds_table, nothing of the stage's own."""
    from analysis.bounds import bounds_table, case_costs, fixed_cost_settings
    from analysis.latency.model import LatencyModel
    from analysis.pooling import framing_filter
    from analysis.stages.optimal import settings

    write_model(stage_scratch, ONE_CONTEXT)
    assert run("optimal") == 0
    s = settings(Config.load("params.yaml").params)
    assert s.cost == fixed_cost_settings(Config.load("params.yaml").params) and s.cost.step_cost == "steady"
    spans = pl.read_parquet(stage_scratch / "data/spans/spans.parquet").filter(framing_filter("body"))
    bounds = bounds_table(case_costs(spans, ONE_CONTEXT, s.cost), 0, 0, 0.95).filter(pl.col("variant") == "overhead")
    table = pl.read_csv(stage_scratch / "reports/tables/optimal.csv").filter(pl.col("kernel_source") == "fit")
    joined = table.join(bounds, on=["level", "corpus", "framing", "pooling"])
    assert joined.height == table.height > 0 and isinstance(ONE_CONTEXT, LatencyModel)
    assert joined["covmax_bound"].to_list() == pytest.approx(joined["bound"].to_list(), rel=1e-3)  # 4 digits in the csv
    assert set(table["step_cost"]) == {"steady"} and set(table["context"]) == {s.cost.context}


def test_min_copy_sweep_agrees_with_the_optimal_table(stage_scratch):
    write_model(stage_scratch, ONE_CONTEXT)
    assert run("optimal") == 0
    sweep = pl.read_csv(stage_scratch / "reports/tables/min_copy_sweep.csv")
    table = pl.read_csv(stage_scratch / "reports/tables/optimal.csv").filter(pl.col("level") == "token")
    assert sorted(sweep["min_copy"].drop_nulls().unique().to_list()) == [1, 2, 4, 8, 16]
    for (source, corpus, pooling), rows in sweep.group_by("kernel_source", "corpus", "pooling"):
        best = rows.filter(pl.col("oracle") == "optimal")
        coverage = rows.filter(pl.col("oracle") == "coverage")
        assert best.height == 1 and coverage.height == 5
        assert best["bound"][0] >= coverage["bound"].max() * (1 - 1e-9), (source, corpus, pooling)
        beside = table.filter((pl.col("kernel_source") == source) & (pl.col("corpus") == corpus)
                              & (pl.col("pooling") == pooling))
        # programs.token_min_copy = 1: the sweep's min_copy 1 row is the coverage oracle of optimal.csv
        one = coverage.filter(pl.col("min_copy") == 1)
        assert one["coverage"][0] == pytest.approx(beside["covmax_coverage"][0], rel=1e-6)
        assert one["bound"][0] == pytest.approx(beside["covmax_bound"][0], rel=1e-6)
        assert best["bound"][0] == pytest.approx(beside["optimal_bound"][0], rel=1e-6)


def test_optimal_programs_resolve_to_their_targets(stage_scratch):
    from analysis.oracle.optimal import TokenizerDirectives, optimal_program
    from analysis.grammar.resolver import resolve
    from analysis.oracle.optimal import dp_cost
    from analysis.oracle.settings import settings
    from analysis.oracle.span_frames import oracle_cases
    from analysis.parallel.tables import joined_programs
    from analysis.text.tokens import load_tokenizer

    s = settings(Config.load("params.yaml").params)
    tokenizer = load_tokenizer(s.tokenizer)
    cases = oracle_cases(joined_programs(), ("body",), ("line", "token"), tokenizer)[:25]
    cost = dp_cost(ONE_CONTEXT, s.cost)
    directives = TokenizerDirectives(tokenizer)
    for case in cases:
        for level in ("line", "token"):
            program = optimal_program(level, case.source, case.target, cost, directives).program
            bounds = case.source.char_bounds if level == "token" else None
            assert resolve(program, case.source.text, bounds) == case.target.text, (case.case_id, level)


def test_extrapolation_is_refused_unless_allowed(stage_scratch, capsys):
    write_model(stage_scratch, ONE_CONTEXT)
    write_scratch_params(stage_scratch, **{"optimal.kernel_sources": ["paper"], "bounds.extrapolate": False})
    assert run("optimal") == 2
    err = capsys.readouterr().err
    assert "outside the profiled range" in err and "extrapolate" in err and "Traceback" not in err


@pytest.mark.parametrize("dotted, value, message", [
    ("optimal.min_copies", [0, 2], "'optimal.min_copies' values must lie in"),
    ("optimal.min_copies", [2, 2], "'optimal.min_copies' lists a value twice"),
    ("optimal.baseline", "bogus", "'optimal.baseline' must be one of"),
    ("optimal.kernel_sources", ["fit", "measured"], "'optimal.kernel_sources' has unknown kernel sources ['measured']"),
    ("optimal.framings", [], "'optimal.framings' must not be empty"),
])
def test_bad_optimal_params_are_named_before_anything_is_written(tmp_path, monkeypatch, dotted, value, message):
    from analysis.stages.optimal import settings

    monkeypatch.chdir(tmp_path)
    write_scratch_params(tmp_path, **{dotted: value})
    with pytest.raises(ParamsError) as info:
        settings(Config.load(tmp_path / "params.yaml").params)
    assert message in str(info.value)
    assert not (tmp_path / "reports").exists()
