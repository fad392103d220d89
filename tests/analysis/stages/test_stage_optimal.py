"""The analysis-side stages of issue 10, end to end in a scratch folder on HumanEvalPack Python body
cases: `optimal` (cost-optimal oracle beside the coverage oracle, min_copy sweep), the perturbation
definitions and crossing table, and the bounds in running-context mode on a two-context model."""

import json
import shutil

import numpy as np
import polars as pl
import pytest
import yaml
from fixtures import (
    ROOT,
    SCRATCH_STAGE_PARAMS,
    one_context_model,
    params_model_key,
    params_with,
    write_model,
)

from analysis.cli import main
from analysis.config import Config
from analysis.errors import ParamsError
from analysis.latency import GridCurve, LatencyModel

pytestmark = pytest.mark.slow  # a corpora -> programs -> spans build in a scratch folder

BASE = yaml.safe_load((ROOT / "params.yaml").read_text())
SMALL = SCRATCH_STAGE_PARAMS


def write_params(folder, **changes) -> None:
    (folder / "params.yaml").write_text(yaml.safe_dump(params_with(**{**SMALL, **changes})))


def run(*args) -> int:
    return main(["--params", "params.yaml", *args])


# t_step = 1 ms; T_prefill(n) = 3 ms + 0.02 ms * n: a 1-token copy costs more than decoding it
ONE_CONTEXT = one_context_model()


def two_context_model() -> LatencyModel:
    """Interpolated over N in [1, 4096] and c in {0, 8192}: decode and prefill both slow down with c."""
    ar = GridCurve((1.0, 4096.0), (0.0, 8192.0), ((1e-3, 4.096), (3e-3, 12.288)))
    prefill = GridCurve((1.0, 4096.0), (0.0, 8192.0), ((2e-3, 0.4), (6e-3, 1.6)))
    return LatencyModel(params_model_key(), "interp", ar, prefill, (1.0, 4096.0), (0.0, 8192.0))


@pytest.fixture(scope="module")
def built(tmp_path_factory, hep_dir):
    """corpora, programs and spans once; each test copies the folder."""
    import os

    folder = tmp_path_factory.mktemp("built")
    here = os.getcwd()
    os.chdir(folder)
    try:
        write_params(folder, **{"corpora.humanevalpack.local_dir": str(hep_dir)})
        for stage in ("corpora", "programs", "spans"):
            assert run(stage) == 0, stage
    finally:
        os.chdir(here)
    return folder


@pytest.fixture()
def scratch(built, tmp_path, monkeypatch, hep_dir):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COPYDECODE_HUMANEVALPACK_DIR", raising=False)
    shutil.copytree(built / "data", tmp_path / "data")
    write_params(tmp_path, **{"corpora.humanevalpack.local_dir": str(hep_dir)})
    return tmp_path


# ---------------------------------------------------------------- optimal

def test_optimal_stage_floor_is_never_below_the_coverage_oracles(scratch):
    write_model(scratch, ONE_CONTEXT)
    assert run("optimal") == 0
    table = pl.read_csv(scratch / "reports/tables/optimal.csv")
    assert set(table["kernel_source"]) == {"fit", "paper"} and set(table["level"]) == {"line", "token"}
    assert set(table["pooling"]) == {"corpus", "ratio_of_sums", "mean_of_corpora"}
    # the DP minimises exactly the overhead variant's time, over a space holding the coverage oracle's program
    assert (table["optimal_bound"] >= table["covmax_bound"] * (1 - 1e-9)).all()
    assert (table["floor_gain"] > 0.01).any()  # with a 3 ms prefill, dropping short copies must pay
    assert (table["optimal_coverage"] <= table["covmax_coverage"] + 1e-12).all()
    # the paper's curve starts at N = 8: shorter copies are extrapolated and counted
    paper = table.filter((pl.col("kernel_source") == "paper") & (pl.col("pooling") == "corpus"))
    assert (paper["covmax_extrapolated_spans"] > 0).all()
    metrics = json.loads((scratch / "reports/metrics/optimal.json").read_text())
    assert "seconds" not in json.dumps(metrics)
    assert json.loads((scratch / "data/timings/optimal.json").read_text())["seconds"] > 0
    row = table.filter((pl.col("kernel_source") == "fit") & (pl.col("level") == "token")
                       & (pl.col("pooling") == "corpus")).row(0, named=True)
    assert metrics["optimal"][f"fit/eager/token/body/{row['corpus']}"]["optimal_bound"] == pytest.approx(
        row["optimal_bound"], rel=1e-3)


def test_min_copy_sweep_agrees_with_the_optimal_table(scratch):
    write_model(scratch, ONE_CONTEXT)
    assert run("optimal") == 0
    sweep = pl.read_csv(scratch / "reports/tables/min_copy_sweep.csv")
    table = pl.read_csv(scratch / "reports/tables/optimal.csv").filter(pl.col("level") == "token")
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


def test_optimal_programs_resolve_to_their_targets(scratch):
    from analysis.optimal import TokenizerDirectives, optimal_program
    from analysis.resolver import resolve
    from analysis.stages.optimal import cost_model, load_cases, settings
    from analysis.tokenization import load_tokenizer

    s = settings(Config.load("params.yaml").params)
    tokenizer = load_tokenizer(s.tokenizer)
    cases = load_cases(("body",), ("line", "token"), tokenizer)[:25]
    cost = cost_model(ONE_CONTEXT, s)
    directives = TokenizerDirectives(tokenizer)
    for case in cases:
        for level in ("line", "token"):
            program = optimal_program(level, case.source, case.target, cost, directives).program
            bounds = case.source.char_bounds if level == "token" else None
            assert resolve(program, case.source.text, bounds) == case.target.text, (case.case_id, level)


def test_extrapolation_is_refused_unless_allowed(scratch, capsys):
    write_model(scratch, ONE_CONTEXT)
    write_params(scratch, **{"optimal.kernel_sources": ["paper"], "bounds.extrapolate": False})
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
    write_params(tmp_path, **{dotted: value})
    with pytest.raises(ParamsError) as info:
        settings(Config.load(tmp_path / "params.yaml").params)
    assert message in str(info.value)
    assert not (tmp_path / "reports").exists()


# ---------------------------------------------------------------- perturbation definitions

def test_perturb_definitions_and_crossing_table(scratch):
    write_params(scratch, **{"perturb.definitions": ["strict"]})
    assert run("perturb") == 0
    strict_only = (scratch / "reports/tables/perturbation.csv").read_bytes()
    write_params(scratch, **{"perturb.definitions": ["strict", "clip", "one_span"]})
    assert run("perturb") == 0
    tables = scratch / "reports/tables"
    assert (tables / "perturbation.csv").read_bytes() == strict_only  # strict is unchanged by the others
    for definition in ("clip", "one_span"):
        other = pl.read_csv(tables / f"perturbation_{definition}.csv")
        assert other.filter(pl.col("rate") == 0.0)["em"].to_list() == [1.0] * other.filter(pl.col("rate") == 0.0).height
        assert other["invalid"].max() == 0  # line spans projected into range always resolve
    crossing = pl.read_csv(tables / "perturbation_crossing.csv")
    assert set(crossing["definition"]) == {"strict", "clip", "one_span", "paper"}
    assert crossing.filter(pl.col("definition") == "paper")["note"][0].startswith("underdetermined")
    measured = crossing.filter(pl.col("definition") != "paper")
    assert "paper" in set(measured["pool"])  # the paper's three corpora are the default pool
    assert measured.height == 3 * 2 * measured["pool"].n_unique()  # definitions x kinds (one level), per pool
    metrics = json.loads((scratch / "reports/metrics/perturbation.json").read_text())
    strict = measured.filter((pl.col("definition") == "strict") & (pl.col("kind") == "start")
                             & (pl.col("pool") == "paper")).row(0, named=True)
    assert metrics["crossing"]["strict/line/start/body"]["crossing_rate"] == pytest.approx(strict["crossing_rate"], abs=1e-4)
    assert set(metrics["definitions"]) == {"clip", "one_span"} and "paper" in metrics["crossing"]


def test_perturb_definitions_must_keep_strict(scratch):
    from analysis.stages.perturb import settings

    write_params(scratch, **{"perturb.definitions": ["clip"]})
    with pytest.raises(ParamsError, match="must include 'strict'"):
        settings(Config.load(scratch / "params.yaml").params)


# ---------------------------------------------------------------- running context

def test_spans_carry_the_prompt_length(scratch):
    from analysis.tokenization import load_tokenizer

    spans = pl.read_parquet(scratch / "data/spans/spans.parquet")
    cases = pl.read_parquet(scratch / "data/corpora/cases.parquet")
    overhead = BASE["spans"]["prompt_overhead_tokens"]
    per_case = spans.group_by("case_id", "framing").agg(pl.col("prompt_tokens").unique())
    assert (per_case["prompt_tokens"].list.len() == 1).all()  # one prompt length per case
    tokenizer = load_tokenizer()
    for row in cases.head(5).iter_rows(named=True):
        got = per_case.filter(pl.col("case_id") == row["case_id"])["prompt_tokens"][0][0]
        assert got == tokenizer.count(row["source"]) + overhead


def test_bounds_in_running_mode_cost_each_op_at_its_context(scratch):
    model = two_context_model()
    write_model(scratch, model)
    write_params(scratch, **{"bounds.context_mode": "running", "kernel.latency_form": "interp",
                             "bounds.extrapolate": False, "kernel.sources": ["fit"],
                             "bounds.kernel_repeats": False,
                             "bounds.step_cost": "first_step"})
    assert run("bounds") == 0
    running = pl.read_csv(scratch / "reports/tables/bounds.csv")
    assert set(running["context_mode"]) == {"running"} and running["context"].null_count() == running.height
    assert (running["extrapolated_spans"] == 0).all() and running["bound"].is_finite().all() and (running["bound"] > 0).all()
    costs = pl.read_parquet(scratch / "data/bounds/case_costs.parquet")
    spans = pl.read_parquet(scratch / "data/spans/spans.parquet")
    # regeneration of one case: a decode step at every context from its prompt to prompt + G - 1
    case = costs.filter(pl.col("level") == "line").row(0, named=True)
    prompt = spans.filter((pl.col("case_id") == case["case_id"]) & (pl.col("level") == "line"))["prompt_tokens"][0]
    steps = model.t_step(np.arange(prompt, prompt + case["gold_tokens"], dtype=float)).seconds
    assert case["regen"] == pytest.approx(float(steps.sum()), rel=1e-9)

    write_params(scratch, **{"bounds.context_mode": "fixed", "bounds.context": 256, "kernel.latency_form": "interp",
                             "kernel.sources": ["fit"], "bounds.kernel_repeats": False,
                             "bounds.step_cost": "first_step"})
    assert run("bounds") == 0
    fixed = pl.read_csv(scratch / "reports/tables/bounds.csv")
    keys = ["level", "corpus", "framing", "variant", "pooling"]
    both = running.select(*keys, "bound").join(fixed.select(*keys, pl.col("bound").alias("fixed")), on=keys)
    assert both.height == running.height and (both["bound"] != both["fixed"]).all()
