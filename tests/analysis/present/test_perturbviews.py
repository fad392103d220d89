"""analysis.present.perturbviews: the perturbation report's tables (EM by rate per definition, the paper-corpora
pool of claim 6, where EM crosses the paper's figure) and its lead tiles. Inputs are small perturbation tables
built here; expected values are computed from them in the test, never typed from a run."""

from __future__ import annotations

import polars as pl
import pytest
from fixtures import perturbation_rows

from analysis.claims import verdict as claims
from analysis.errors import ParamsError
from analysis.layout import TABLES
from analysis.perturb import PerturbCase, em_table, run_perturbation
from analysis.present import perturbviews
from analysis.grammar.program import Copy, Gen, Program

PAPER = claims.paper_claims()
SOURCE = "a\nb\nc\nd\n"


def case(cid, program, source, target, corpus="T"):
    return PerturbCase(cid, corpus, "body", "line", program, source, target, None)


def tables_dir(tmp_path):
    path = tmp_path / TABLES
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_the_perturbation_tiles_pool_the_papers_corpora_unless_told_and_say_which():
    paper = [case(f"P/{i}", Program((Copy(2, 2),)), SOURCE, "b\n", corpus="HEvalFix-Py") for i in range(3)]
    paper += [case("P/nocopy", Program((Gen("z\n"),)), SOURCE, "z\n", corpus="HEvalFix-Py")]
    others = [case(f"C/{i}", Program((Copy(2, 2),)), SOURCE, "b\n", corpus="CommitEdits-click") for i in range(4)]
    table = em_table(run_perturbation(paper + others, ["start"], [0.0, 1.0], [0], definition="strict"))
    tiles = dict(perturbviews.lead_figures(table))
    assert tiles["EM at rate 1, start, pooled over the paper's three corpora (4 cases)"] == "25.00%"
    tiles = dict(perturbviews.lead_figures(table, "all"))
    assert tiles["EM at rate 1, start, pooled over every corpus of this run (8 cases)"] == "12.50%"
    with pytest.raises(ParamsError, match="unknown perturbation pool 'some'"):
        perturbviews.lead_figures(table, "some")


def test_perturbation_page_tables_cover_every_definition_written(tmp_path):
    em_of = {k: (lambda r: 1 - r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S", "CommitEdits-click")}
    tables = tables_dir(tmp_path)
    perturbation_rows(em_of).write_csv(tables / "perturbation.csv")
    perturbation_rows(em_of).write_csv(tables / "perturbation_clip.csv")
    pooled = perturbviews.paper_pool_table("line", tables)
    assert set(pooled["definition"]) == {"strict", "clip"} and set(pooled["n_cases"]) == {482}
    assert set(perturbviews.definition_tables("line", "body", tables=tables)) == {"strict", "clip"}
    crossings = perturbviews.crossings_table(PAPER["perturbation"]["em_pct"] / 100, tables)
    assert crossings.height == 4 and crossings["crossing, paper's corpora"].null_count() == 0


def test_pooled_em_names_an_unknown_pool_and_labels_the_pool_with_its_cases():
    rows = perturbation_rows({k: (lambda r: 1 - r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S", "CommitEdits-click")})
    body = rows.filter(pl.col("framing").is_in(["body", "unit", "file"]))
    with pytest.raises(ParamsError, match="unknown perturbation pool 'nope'"):
        perturbviews.pooled_em(body, "nope")
    every = perturbviews.pooled_em(body, "all")
    pooled_cases = body.filter(pl.col("corpus") == "pooled")["n_cases"][0]
    assert every.height == 1 and every["pool"][0].endswith(f"({pooled_cases} cases)")


def test_lead_figures_fall_back_to_the_corpus_rows_when_no_pool_is_in_the_slice():
    one = pl.DataFrame({"level": ["line"] * 2, "corpus": ["Mine"] * 2, "framing": ["pair"] * 2, "kind": ["start", "end"],
                        "rate": [1.0, 1.0], "em": [0.25, 0.5], "no_copy": [0.125, 0.125], "n_cases": [8, 8]})
    tiles = dict(perturbviews.lead_figures(one, "all"))
    assert tiles == {"EM at rate 1, Mine, end": "50.00%", "EM at rate 1, Mine, start": "25.00%",
                     "programs with no copy span": "12.50%"}


def test_em_wide_has_one_row_per_kind_with_em_at_each_rate_and_the_shares_at_rate_one():
    rows = perturbation_rows({k: (lambda r: 1 - r / 2) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S", "CommitEdits-click")})
    rows = rows.filter((pl.col("corpus") == "HEvalFix-Py") & (pl.col("framing") == "body"))
    wide = perturbviews.em_wide(rows)
    assert wide.height == rows.select("kind").n_unique()
    assert [c for c in wide.columns if c.startswith("EM at")] == ["EM at 0.0", "EM at 0.5", "EM at 1.0"]
    start = wide.filter(pl.col("kind") == "start").row(0, named=True)
    assert (start["EM at 0.5"], start["EM at 1.0"], start["no_copy"], start["invalid_at_1"]) == (0.75, 0.5, 0.5, 0.0)


def test_crossings_table_without_the_stage_crossing_file_has_only_the_papers_pool(tmp_path):
    tables = tables_dir(tmp_path)
    perturbation_rows({k: (lambda r: 1 - r) for k in ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S", "CommitEdits-click")}
                      ).write_csv(tables / "perturbation.csv")
    crossings = perturbviews.crossings_table(0.5, tables)
    assert "crossing, every corpus" not in crossings.columns
    assert crossings["crossing, paper's corpora"].to_list() == pytest.approx([0.5] * crossings.height)


def test_every_pooled_row_names_its_pool_and_case_count():
    """C3: the tiles' 7.68% (the paper's three corpora) and the table's 3.4% (every corpus) were both 'pooled'."""
    rows = perturbation_rows({"HEvalFix-Py": lambda r: 1 - r / 2, "HEvalFix-JS": lambda r: 1 - r / 2,
                              "ProbeEdit-S": lambda r: 1 - r / 2, "CommitEdits-click": lambda r: 1 - r})
    pooled_all = rows.filter((pl.col("corpus") != "pooled") & (pl.col("framing").is_in(["body", "unit", "file"])))
    n_all = pooled_all.filter((pl.col("rate") == 1.0) & (pl.col("kind") == "start"))["n_cases"].sum()
    rows = pl.concat([rows.filter(pl.col("corpus") != "pooled"),
                      pooled_all.group_by("level", "kind", "rate").agg(
                          pl.col("em").mean(), pl.col("em_min").min(), pl.col("em_max").max(), pl.col("invalid").mean(),
                          pl.col("no_copy").mean(), pl.col("n_cases").sum(), pl.col("seeds").first())
                      .with_columns(corpus=pl.lit("pooled"), framing=pl.lit("body"))], how="diagonal_relaxed")
    view = rows.filter(pl.col("framing").is_in(["body", "unit", "file"]))
    names = set(perturbviews.em_wide(view)["corpus"])
    assert "pooled" not in names
    assert f"pooled over every corpus of this run ({n_all:,} cases)" in names
    assert any(n.startswith("pooled over the paper's three corpora (") for n in names)
