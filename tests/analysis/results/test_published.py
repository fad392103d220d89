"""analysis.results.published: the published figures beside this run's rows, read back checked; and where they
show: the rivals claims row (a not-comparable scope with the measured family) and the rivals page's tables."""

from __future__ import annotations

import json

import polars as pl
import pytest
from fixtures import ROOT

from analysis.errors import ParamsError
from analysis.results.published import PUBLISHED_FIGURES, PublishedFigure, published_figures, published_for

SPEC = {"title": "beyond the paper: against the alternatives", "text": "none",
        "metric": ["tables/rivals_fastest.csv:fastest", "metrics/rivals.json:judged_source"]}


def test_efficientedit_on_canitedit_as_the_anchors_state_it():
    (figure,) = published_for("CanItEdit")
    assert (figure.method, figure.speedup, figure.qualifier) == ("EfficientEdit", 10.38, "up to")
    assert figure.figure() == "up to 10.38x" and "2506.02780" in figure.source
    assert "32-33B" in figure.models and "GPU" in figure.device and "end to end" in figure.measured
    assert figure.beside() == "EfficientEdit's published up to 10.38x (32-33B models on a GPU, measured end to end): " \
                              "not comparable"
    assert published_for("HEvalFix-Py") == ()


@pytest.mark.parametrize("change, message", [
    (lambda e: e.pop("models"), "missing keys \\['models'\\]"),
    (lambda e: e.update(speedup="10.38"), "speedup: must be a positive number"),
    (lambda e: e.update(speedup=0), "speedup: must be a positive number"),
    (lambda e: e.update(extra="x"), "unknown keys \\['extra'\\]"),
    (lambda e: e.update(models=32), "\\['models'\\] must be text"),
])
def test_a_bad_entry_is_named(tmp_path, change, message):
    document = json.loads(PUBLISHED_FIGURES.read_text())
    change(document["figures"][0])
    path = tmp_path / "published.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ParamsError, match=message):
        published_figures(path)
    path.write_text("[1, 2]")
    with pytest.raises(ParamsError, match="a list `figures`"):
        published_figures(path)


def fastest_with_canitedit() -> pl.DataFrame:
    """The committed rivals_fastest table with one CanItEdit corpus (HEvalFix-Py's rows renamed, in place of any the
    run holds, so the figures the test reads are known)."""
    fast = pl.read_csv(ROOT / "reports/tables/rivals_fastest.csv", infer_schema_length=None)
    fast = fast.filter(pl.col("corpus") != "CanItEdit")
    return pl.concat([fast, fast.filter(pl.col("corpus") == "HEvalFix-Py").with_columns(corpus=pl.lit("CanItEdit"))])


def judged() -> str:
    return json.loads((ROOT / "reports/metrics/rivals.json").read_text())["judged_source"]


def test_the_claims_row_names_the_figure_beside_canitedit(tmp_path):
    from analysis.claims.rivals import rivals_claim
    from analysis.claims.verdict import NOT_COMPARABLE

    (tmp_path / "tables").mkdir()
    (tmp_path / "metrics").mkdir()
    fast = fastest_with_canitedit()
    fast.write_csv(tmp_path / "tables/rivals_fastest.csv")
    source = judged()
    mine = fast.filter(pl.col("corpus") == "CanItEdit")
    lead = mine.filter(pl.col("kernel_source") == source).row(0, named=True)
    pl.DataFrame([{"kernel_source": source, "corpus": "CanItEdit", "pool": "corpus", "method": lead["best_copy"],
                   "speedup": lead["best_copy_speedup"], "ci_low": lead["best_copy_speedup"] * 0.9,
                   "ci_high": lead["best_copy_speedup"] * 1.1}]).write_csv(tmp_path / "tables/rivals.csv")
    (tmp_path / "metrics/rivals.json").write_text(json.dumps({"judged_source": source}))
    claim = rivals_claim(SPEC, tmp_path / "tables", tmp_path / "metrics")
    beside = "beside EfficientEdit's published up to 10.38x (32-33B models on a GPU, measured end to end): not comparable"
    assert "CanItEdit " in claim.ours and beside in claim.ours
    assert claim.ours.count("EfficientEdit") == 1  # beside CanItEdit only
    (canitedit,) = [s for s in claim.scopes if s.detail and s.detail["judged"] and s.detail["corpus"] == "CanItEdit"]
    assert beside in canitedit.ours
    assert all("EfficientEdit" not in s.ours for s in claim.scopes if s.detail and s.detail["corpus"] != "CanItEdit")
    (scope,) = [s for s in claim.scopes if s.verdict == NOT_COMPARABLE]
    assert scope.scope == "CanItEdit beside EfficientEdit's published up to 10.38x" and scope.paper == "not in the paper"
    # a number with an interval, never a null scope: this run's Copy-as-Decode speedup there under the judged source
    assert scope.value == lead["best_copy_speedup"] and scope.ci == (lead["best_copy_speedup"] * 0.9, lead["best_copy_speedup"] * 1.1)
    low, high = mine["best_copy_speedup"].min(), mine["best_copy_speedup"].max()
    assert f"Copy-as-Decode's best {low:.1f}x-{high:.1f}x" in scope.ours and f"across {mine.height} kernel sources" in scope.ours
    assert "32-33B" in scope.reason and "not comparable" in scope.reason and scope.cases == mine["n_cases"][0]
    fast.filter(pl.col("corpus") != "CanItEdit").write_csv(tmp_path / "tables/rivals_fastest.csv")
    without = rivals_claim(SPEC, tmp_path / "tables", tmp_path / "metrics")
    assert "EfficientEdit" not in without.ours and not [s for s in without.scopes if s.verdict == NOT_COMPARABLE]


def test_the_rivals_page_sets_the_figure_beside_canitedits_rows():
    from analysis.present import rivalviews

    frame = pl.read_csv(ROOT / "reports/tables/rivals.csv", infer_schema_length=None)
    frame = frame.filter(pl.col("corpus") != "CanItEdit")
    frame = pl.concat([frame, frame.filter(pl.col("corpus") == "HEvalFix-Py").with_columns(corpus=pl.lit("CanItEdit"))])
    source = judged()
    wide = rivalviews.with_published(rivalviews.by_corpus(frame, source))
    row = wide.filter(pl.col("role") == "published").row(0, named=True)
    assert row["CanItEdit"] == "up to 10.38x" and "not comparable" in row["label"]
    assert all(row[c] is None for c in wide.columns if c not in ("label", "role", "CanItEdit"))
    assert wide.height == rivalviews.by_corpus(frame, source).height + 1
    table = rivalviews.published_rows(fastest_with_canitedit(), source)
    assert table["corpus"].to_list() == ["CanItEdit"] and table["verdict"][0].startswith("not comparable")
    assert "10.38x" in table["published"][0] and "32-33B" in table["its conditions"][0]
    no_canitedit = rivalviews.by_corpus(frame.filter(pl.col("corpus") != "CanItEdit"), source)
    assert rivalviews.with_published(no_canitedit).equals(no_canitedit)


def test_the_figure_is_a_dependency_of_every_stage_that_shows_it():
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        if "analysis/results/published.py" in stage.get("deps", []):
            assert "analysis/data/published_figures.json" in stage["deps"], name
    assert isinstance(published_figures()[0], PublishedFigure)


def test_the_readme_names_the_figure_beside_canitedit(tmp_path):
    from analysis.layout import METRICS, TABLES
    from analysis.present.readme import _rivals_sentence

    (tmp_path / TABLES).mkdir(parents=True)
    (tmp_path / METRICS).mkdir(parents=True)
    fastest_with_canitedit().write_csv(tmp_path / TABLES / "rivals_fastest.csv")
    (tmp_path / METRICS / "rivals.json").write_text(json.dumps({"judged_source": judged()}))
    sentence = _rivals_sentence(tmp_path)
    canitedit = sentence.split("CanItEdit: ", 1)[1].split(";", 1)[0]
    assert canitedit.endswith("(beside EfficientEdit's published up to 10.38x (32-33B models on a GPU, measured end "
                              "to end): not comparable)")
    assert sentence.count("EfficientEdit") == 1
