"""`copydecode report NAME`: one page rendered as the reports stage renders it, leaving reports/ alone."""

from __future__ import annotations

import shutil

import pytest
from fixtures import ROOT, params_with

from analysis.cli import main
from analysis.errors import ParamsError
from analysis.layout import LATENCY_MODEL
from analysis.tools.report import settings


def test_parameters_come_from_params_then_the_options():
    s = settings(params_with(), "coverage", corpus="HEvalFix-JS", pairs=["framing=decl"])
    assert s.parameters == {"corpus": "HEvalFix-JS", "framing": "decl", "level": "all"}
    assert str(s.html) == "runs/report/coverage-HEvalFix-JS.html"
    assert settings(params_with(), "explore", pairs=["widgets=false"]).parameters["widgets"] is False
    with pytest.raises(ParamsError, match="the kernel report has no corpus parameter; it declares model, context"):
        settings(params_with(), "kernel", corpus="HEvalFix-JS")
    with pytest.raises(ParamsError, match="unknown parameter 'x'"):
        settings(params_with(), "coverage", pairs=["x=1"])
    with pytest.raises(ParamsError, match="-p expects KEY=VALUE"):
        settings(params_with(), "coverage", pairs=["framing"])
    with pytest.raises(ParamsError, match="ending in .html"):
        settings(params_with(), "coverage", html="page.txt")


def test_an_unknown_report_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        main(["report", "covrage"])
    assert "invalid choice: 'covrage'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_page_is_the_stages_page(stage_scratch):
    """The explore page for one case, from the scratch run's outputs: the stage's page chrome and provenance,
    the case, and nothing written under reports/ (the committed pages stay as they are)."""
    (stage_scratch / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, stage_scratch / LATENCY_MODEL)
    before = sorted(p.relative_to(stage_scratch) for p in (stage_scratch / "reports").rglob("*"))
    assert main(["report", "--params", "params.yaml", "explore", "-p", "case_id=HEvalFix-Py/1",
                 "--html", "out/one.html", "--notebook", "out/one.ipynb"]) == 0
    page = (stage_scratch / "out/one.html").read_text()
    assert page.startswith("<!doctype html>") and "HEvalFix-Py/1" in page and "Provenance" in page
    assert "all reports</a>" in page and "<style>" in page
    notebook = (stage_scratch / "out/one.ipynb").read_text()
    assert str(stage_scratch) not in notebook and "root = \\\".\\\"" in notebook
    assert sorted(p.relative_to(stage_scratch) for p in (stage_scratch / "reports").rglob("*")) == before
    assert [p.name for p in (stage_scratch / "out").iterdir() if p.name.startswith(".")] == []  # temp folder gone
    assert main(["report", "--params", "params.yaml", "pilot", "--html", "out/pilot.html"]) == 2  # no pilot run here
