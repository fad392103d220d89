"""analysis.results.outputs: the stages' outputs read back for the reports; an absent output is a ParamsError
naming the command that writes it; `pick`/`pick_framing`/`pick_view` filter as a notebook parameter does."""

import json

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.pooling import POOLED
from analysis.results.outputs import (
    bounds_frame,
    latency_model,
    metrics,
    pick,
    pick_framing,
    pick_view,
    read_parquet_output,
    table,
)
from analysis.present import notebook as present


def test_absent_outputs_name_the_command_that_writes_them(tmp_path):
    with pytest.raises(ParamsError, match=r"coverage.csv not found; run `dvc repro` first"):
        table("coverage", tmp_path)
    with pytest.raises(ParamsError, match=r"spans.json not found; run `dvc repro` first"):
        metrics("spans", tmp_path)
    with pytest.raises(ParamsError, match=r"latency_model.json not found; run `copydecode kernels fit` first"):
        latency_model(tmp_path / "latency_model.json")
    with pytest.raises(ParamsError, match=r"spans.parquet not found; run `copydecode spans`"):
        read_parquet_output(tmp_path / "spans.parquet", "copydecode spans")


def test_present_outputs_are_read(tmp_path):
    pl.DataFrame({"corpus": ["a"], "coverage": [0.5]}).write_csv(tmp_path / "coverage.csv")
    (tmp_path / "spans.json").write_text(json.dumps({"n": 3}))
    assert table("coverage", tmp_path).to_dicts() == [{"corpus": "a", "coverage": 0.5}]
    assert metrics("spans", tmp_path) == {"n": 3}


def test_a_bounds_table_before_kernel_sources_is_refused(tmp_path):
    pl.DataFrame({"corpus": ["a"], "bound": [2.0]}).write_csv(tmp_path / "bounds.csv")
    with pytest.raises(ParamsError, match="has no kernel_source, pooling, extrapolated_spans column"):
        bounds_frame(tmp_path)
    pl.DataFrame({"corpus": ["a"], "bound": [2.0], "kernel_source": ["fit"], "pooling": ["x"],
                  "extrapolated_spans": [0]}).write_csv(tmp_path / "bounds.csv")
    assert bounds_frame(tmp_path).height == 1


FRAME = pl.DataFrame({
    "corpus": ["HEvalFix-Py", "HEvalFix-Py", "ProbeEdit-S", "mine", POOLED, POOLED, POOLED],
    "framing": ["body", "decl", "unit", "pair", "body", "decl", "unit"],
    "level": [1, 1, 1, 2, 1, 1, 1],
})


def test_pick_filters_each_column_and_all_keeps_everything():
    assert pick(FRAME, corpus="all", framing=None).height == FRAME.height
    assert pick(FRAME, corpus="HEvalFix-Py", framing="decl").height == 1
    assert pick(FRAME, level=2)["corpus"].to_list() == ["mine"]  # compared as text
    with pytest.raises(ParamsError, match="unknown corpus 'nope'; known: HEvalFix-Py, ProbeEdit-S, mine, pooled"):
        pick(FRAME, corpus="nope")


def test_a_framing_view_adds_the_single_framing_corpora():
    body = pick_framing(FRAME, "body")
    assert sorted(zip(body["corpus"], body["framing"])) == [
        ("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("mine", "pair"), (POOLED, "body"), (POOLED, "unit")]
    view = pick_view(FRAME, "body")  # only the framing's own pooled row
    assert sorted(zip(view["corpus"], view["framing"])) == [
        ("HEvalFix-Py", "body"), ("ProbeEdit-S", "unit"), ("mine", "pair"), (POOLED, "body")]
    assert pick_framing(FRAME, "all").height == pick_view(FRAME, None).height == FRAME.height
    with pytest.raises(ParamsError, match="unknown framing 'prompt'"):
        pick_framing(FRAME, "prompt")


def test_a_run_of_single_framing_corpora_joins_every_framing_view():
    only_pairs = pl.DataFrame({"corpus": ["mine", POOLED], "framing": ["pair", "pair"]})
    assert pick_framing(only_pairs, "body").height == 2


def test_a_table_a_stage_wrote_empty_reads_as_empty(tmp_path):
    """A stage writes a frame with no rows and no columns as an empty file (bounds_paper_pool on a run
    without the paper's corpora); the report pages read it as an empty table, not a NoDataError."""
    pl.DataFrame().write_csv(tmp_path / "bounds_paper_pool.csv")
    assert table("bounds_paper_pool", tmp_path).is_empty()


def test_require_outputs_refuses_an_empty_root(tmp_path, monkeypatch):
    from analysis.errors import CorpusError
    from analysis.layout import CASES, TABLES
    from analysis.results.outputs import require_outputs

    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError, match="nothing to report: .* before `copydecode headline`"):
        require_outputs("headline")
    TABLES.mkdir(parents=True)
    (TABLES / "coverage.csv").write_text("a\n1\n")
    require_outputs("headline")
    (TABLES / "coverage.csv").unlink()
    CASES.parent.mkdir(parents=True)
    CASES.write_bytes(b"")
    require_outputs("reports")


def test_table_is_the_one_report_table_reader(tmp_path):
    """Absent: `table` names it (a MissingOutputError, still a ParamsError), `optional_table` is None;
    an empty file is an empty frame; `infer_all_rows` types a column that is empty in its first rows."""
    from analysis.errors import MissingOutputError
    from analysis.results.outputs import optional_table, table

    with pytest.raises(MissingOutputError, match="absent.csv not found; run `dvc repro` first"):
        table("absent", tmp_path)
    assert optional_table("absent", tmp_path) is None
    (tmp_path / "empty.csv").write_text("")
    assert table("empty", tmp_path).shape == (0, 0)
    (tmp_path / "late.csv").write_text("a,b\n" + "1,\n" * 150 + "2,0.5\n")
    late = optional_table("late", tmp_path, infer_all_rows=True)
    assert late.schema["b"] == pl.Float64 and late["b"][-1] == 0.5


def test_pick_framing_follows_the_pooling_rule_and_rejects_unknown_framings():
    frame = pl.DataFrame({"framing": ["body", "decl", "unit"], "v": [1, 2, 3]})
    assert present.pick_framing(frame, "body")["v"].to_list() == [1, 3]
    with pytest.raises(ParamsError, match="bogus"):
        present.pick_framing(frame, "bogus")
