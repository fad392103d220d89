"""analysis.stages.perturb: the perturbation stage's settings (strict is always kept), the cases it
builds per level, the table paths and metric keys of each definition, and (slow, in a scratch folder)
the definitions' tables and the crossing table end to end."""

import json

import polars as pl
import pytest
from fixtures import params_with, toy_program_table, write_scratch_params

from analysis.cli import main
from analysis.errors import ParamsError
from analysis.layout import TABLES
from analysis.pooling import ALL_POOL, PAPER_POOL
from analysis.stages.perturb import (
    crossing_metrics,
    em_metrics,
    perturb_cases,
    selected_programs,
    settings,
    table_path,
)


def run(*args) -> int:
    return main(["--params", "params.yaml", *args])


def test_definitions_must_keep_strict():
    with pytest.raises(ParamsError, match="'perturb.definitions' must include 'strict'.*\\['clip'\\]"):
        settings(params_with(**{"perturb.definitions": ["clip"]}))
    with pytest.raises(ParamsError, match="perturb.definitions"):
        settings(params_with(**{"perturb.definitions": ["strict", "loose"]}))
    s = settings(params_with(**{"perturb.seed": 7, "perturb.seeds": 3}))
    assert s.seeds == (7, 8, 9)


def test_cases_of_the_chosen_levels_carry_token_bounds_only_at_the_token_level(qwen):
    table = toy_program_table(qwen)
    both = perturb_cases(table, qwen, ("line", "token"))
    assert [(c.case_id, c.level) for c in both] == table.select("case_id", "level").rows()
    for case in both:
        expected = qwen.encode(case.source).char_bounds if case.level == "token" else None
        assert case.token_bounds == expected

    class NoEncoding:
        def encode_many(self, texts):
            raise AssertionError("line programs need no tokens")

    lines = perturb_cases(table, NoEncoding(), ("line",))
    assert {c.level for c in lines} == {"line"} and len(lines) == 3


def test_selected_programs_keep_single_framing_corpora_beside_the_chosen_framing():
    table = pl.DataFrame({"case_id": ["a", "b", "c", "d"], "framing": ["body", "decl", "unit", "pair"]})
    assert selected_programs(("body",), table)["case_id"].to_list() == ["a", "c", "d"]
    assert selected_programs(("body", "decl"), table)["case_id"].to_list() == ["a", "b", "c", "d"]


def test_table_paths_keep_strict_at_the_reference_path():
    assert table_path("strict") == TABLES / "perturbation"
    assert table_path("clip") == TABLES / "perturbation_clip"


def test_em_metrics_hold_the_rate_one_rows_only():
    table = pl.DataFrame({"level": ["line"] * 3, "kind": ["start"] * 3, "framing": ["body"] * 3,
                          "corpus": ["C", "C", "D"], "rate": [0.0, 1.0, 1.0], "em": [1.0, 0.25, 0.5],
                          "invalid": [0, 2, 0], "no_copy": [0, 1, 0]})
    assert em_metrics(table) == {
        "line/start/body/C": {"em_at_rate_1": 0.25, "invalid": 2, "no_copy": 1},
        "line/start/body/D": {"em_at_rate_1": 0.5, "invalid": 0, "no_copy": 0},
    }


def test_crossing_metric_keys_name_the_pool_unless_it_is_the_papers():
    rows = [("strict", PAPER_POOL, 0.3), ("strict", ALL_POOL, 0.4), ("paper", PAPER_POOL, None)]
    crossing = pl.DataFrame({
        "definition": [d for d, _, _ in rows], "pool": [p for _, p, _ in rows], "level": ["line", "line", None],
        "kind": ["start", "start", None], "framing": ["body", "body", None],
        "crossing_rate": [r for _, _, r in rows], "em_at_max_rate": [0.1, 0.2, None],
        "note": ["", "", "underdetermined"], "n_cases": [10, 12, None]})
    metrics = crossing_metrics(crossing)
    assert list(metrics) == ["strict/line/start/body", f"strict/line/start/body/{ALL_POOL}", "paper"]
    assert metrics[f"strict/line/start/body/{ALL_POOL}"]["crossing_rate"] == 0.4
    assert metrics["paper"]["note"] == "underdetermined"


@pytest.mark.slow  # a corpora -> programs -> spans build in a scratch folder
def test_perturb_definitions_and_crossing_table(stage_scratch):
    write_scratch_params(stage_scratch, **{"perturb.definitions": ["strict"]})
    assert run("perturb") == 0
    strict_only = (stage_scratch / "reports/tables/perturbation.csv").read_bytes()
    write_scratch_params(stage_scratch, **{"perturb.definitions": ["strict", "clip", "one_span"]})
    assert run("perturb") == 0
    tables = stage_scratch / "reports/tables"
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
    metrics = json.loads((stage_scratch / "reports/metrics/perturbation.json").read_text())
    strict = measured.filter((pl.col("definition") == "strict") & (pl.col("kind") == "start")
                             & (pl.col("pool") == "paper")).row(0, named=True)
    assert metrics["crossing"]["strict/line/start/body"]["crossing_rate"] == pytest.approx(strict["crossing_rate"], abs=1e-4)
    assert set(metrics["definitions"]) == {"clip", "one_span"} and "paper" in metrics["crossing"]
