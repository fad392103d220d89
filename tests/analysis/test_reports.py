"""The report layer: number formats, escaped and index-free tables, verdicts computed from the
metrics under the stated thresholds, provenance, pages that load nothing from outside themselves."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys

import nbformat
import polars as pl
import pytest
from fixtures import ATTACK, ROOT

from analysis.errors import ParamsError
from analysis.layout import EXECUTED, FIGURES, HTML, INDEX, LATENCY_MODEL, METRICS, NOTEBOOKS, TABLES
from analysis.present import notebook as present
from analysis.present.reports import REPORTS, Page, external_references, index_html, notebook_body, page



# ---------------------------------------------------------------- formats


def test_number_formats():
    assert present.fmt_x(12.345) == "12.3x"
    assert present.fmt_x(0.8237, 2) == "0.82x"
    assert present.fmt_pct(0.74324) == "74.3%"
    assert present.fmt_ci(0.70211, 0.77396, pct=True) == "[70.2, 77.4]"
    assert present.fmt_ci(2.6005, 3.1552) == "[2.6, 3.2]"
    assert present.fmt_int(2276) == "2,276"
    assert [present.fmt_num(v) for v in (215.31, 1.234, 0.0234, 151669.0)] == ["215", "1.23", "0.0234", "151,669"]
    for fmt in (present.fmt_x, present.fmt_pct, present.fmt_int, present.fmt_num):
        assert fmt(None) == present.MISSING and fmt(float("nan")) == present.MISSING


def test_pick_framing_follows_the_pooling_rule_and_rejects_unknown_framings():
    frame = pl.DataFrame({"framing": ["body", "decl", "unit"], "v": [1, 2, 3]})
    assert present.pick_framing(frame, "body")["v"].to_list() == [1, 3]
    with pytest.raises(ParamsError, match="bogus"):
        present.pick_framing(frame, "bogus")


# ---------------------------------------------------------------- verdicts


@pytest.fixture
def outputs(tmp_path):
    """A private copy of the committed stage outputs that a test may edit."""
    for folder in (TABLES, METRICS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def _verdicts(root, paper=present.PAPER):
    return {c.claim.split(".")[0] if c.claim[0].isdigit() else c.claim: c
            for c in present.claims(root / TABLES, root / METRICS, paper)}


def test_every_claim_of_the_paper_gets_a_verdict():
    paper = present.paper_claims()
    verdicts = present.claims(ROOT / TABLES, ROOT / METRICS)
    assert {c.verdict for c in verdicts} <= set(present.VERDICTS)
    assert len([k for k, c in paper.items() if not k.startswith("_") and not c.get("extension")]) == len(
        [c for c in verdicts if c.claim[0].isdigit()])
    assert all(c.verdict == present.BEYOND for c in verdicts if not c.claim[0].isdigit())  # extensions only
    assert all(c.why for c in verdicts if c.verdict in (present.DIFFERS, present.NOT_RUN))


def test_a_round_trip_failure_turns_the_verdict(outputs):
    assert _verdicts(outputs)["5"].verdict == present.REPRODUCED
    rt = json.loads((outputs / METRICS / "roundtrip.json").read_text())
    rt["failed"], rt["passed"] = 3, rt["passed"] - 3
    (outputs / METRICS / "roundtrip.json").write_text(json.dumps(rt))
    claim = _verdicts(outputs)["5"]
    assert claim.verdict == present.DIFFERS and "3 programs" in claim.why


def test_the_threshold_in_paper_claims_decides_the_verdict(outputs, tmp_path):
    paper = present.paper_claims()
    cov = pl.read_csv(outputs / TABLES / "coverage.csv")
    line = cov.filter((pl.col("level") == "line") & pl.col("framing").is_in(["body", "unit"]) & (pl.col("corpus") != "pooled"))
    gap_pp = 100 * max(abs(line["coverage"].min() - paper["copy_ceiling"]["low"]),
                       abs(line["coverage"].max() - paper["copy_ceiling"]["high"]))
    for tolerance, verdict in ((gap_pp + 0.5, present.REPRODUCED), (gap_pp / 2, present.DIFFERS)):
        paper["copy_ceiling"]["tolerance_pp"] = tolerance
        path = tmp_path / f"claims_{verdict.replace(' ', '_')}.json"
        path.write_text(json.dumps(paper))
        assert _verdicts(outputs, path)["2"].verdict == verdict


def test_a_missing_stage_output_is_not_run_not_dropped(outputs):
    (outputs / TABLES / "perturbation.csv").unlink()
    verdicts = present.claims(outputs / TABLES, outputs / METRICS)
    missing = [c for c in verdicts if c.verdict == present.NOT_RUN and "perturbation.csv" in c.why]
    assert len(missing) == 1 and len(verdicts) == len(present.claims(ROOT / TABLES, ROOT / METRICS))


# ---------------------------------------------------------------- provenance


def test_cpu_model_comes_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n\nprocessor\t: 1\nmodel name\t: Test CPU 9000\n")
    assert present.cpu_model(info) == "Test CPU 9000, 2 logical cores"


def test_provenance_reads_recorded_versions_and_hashes_params(tmp_path):
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    model = tmp_path / "latency_model.json"
    model.write_text(json.dumps({"environment": [{"torch_version": "9.9", "transformers_version": "8.8"}]}))
    prov = present.provenance(tmp_path, params=present.DEFAULT_PARAMS, model_path=model.relative_to(tmp_path))
    assert (prov.torch, prov.transformers) == ("9.9", "8.8")
    assert prov.params_sha256 == hashlib.sha256(b"seed: 1\n").hexdigest()
    assert prov.commit.startswith("unknown") and prov.machine
    model.unlink()
    assert "installed packages" in present.provenance(tmp_path, model_path=model.relative_to(tmp_path)).versions_from


def test_provenance_hashes_the_params_file_in_use(tmp_path, monkeypatch):
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    other = tmp_path / "other.yaml"
    other.write_text("seed: 2\n")
    monkeypatch.setenv(present.PARAMS_ENV, str(other))
    prov = present.provenance(tmp_path)
    assert prov.params_sha256 == hashlib.sha256(b"seed: 2\n").hexdigest() and prov.params_file == str(other)
    assert "seed: 2" not in present.provenance_html(prov).text and str(other) in present.provenance_html(prov).text
    monkeypatch.delenv(present.PARAMS_ENV)
    assert present.provenance(tmp_path).params_sha256 == hashlib.sha256(b"seed: 1\n").hexdigest()


def test_provenance_names_the_commit_and_what_differs_from_it():
    from analysis.present.provenance import commit_text

    assert commit_text("abc", []) == "abc"
    outputs_only = commit_text("abc", ["reports/tables/bounds.csv", "dvc.lock", "README.md"])
    assert "uncommitted changes" not in outputs_only and "outputs" in outputs_only
    changed = commit_text("abc", ["reports/index.html", "analysis/bounds.py"])
    assert "1 source file(s): analysis/bounds.py" in changed


def test_provenance_never_imports_torch():
    code = ("import sys; from analysis.present import provenance; provenance.provenance(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- pages


def test_external_references_are_found_and_namespaces_are_not():
    bad = ["<script src='https://cdnjs.cloudflare.com/x.js'></script>", "<link href=//fonts.example/a.css>",
           "<style>@import url('https://fonts.googleapis.com/css2')</style>", "<div style=\"background:url(http://x/y.png)\">"]
    for text in bad:
        assert external_references(text), text
    ok = "<svg xmlns='http://www.w3.org/2000/svg'><a href='html/summary.html'>x</a><img src='data:image/png;base64,AA'></svg>"
    assert external_references(ok) == []
    with pytest.raises(ParamsError, match="outside"):
        page("t", bad[0])


def test_notebook_body_has_outputs_without_code_or_prompts():
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("secret_code_line = 1")]
    book.cells[1].execution_count = 4
    book.cells[1].outputs = [nbformat.v4.new_output("execute_result", data={"text/html": "<table><tr><td>v</td></tr></table>"},
                                                    execution_count=4)]
    body = notebook_body(book)
    assert "<table>" in body and "Title" in body
    assert "secret_code_line" not in body and "Out[" not in body and "In&nbsp;[" not in body
    assert external_references(page("t", body)) == []


def test_index_embeds_figures_and_links_every_report(tmp_path):
    for folder in (TABLES, METRICS, FIGURES):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, tmp_path / LATENCY_MODEL)
    pages = [Page(name, name.title(), tmp_path / HTML / f"{name}.html") for name in REPORTS]
    text = index_html(pages, tmp_path)
    assert external_references(text) == []
    assert text.count("src='data:image/") >= 4
    for name in REPORTS:
        assert f"href='html/{name}.html'" in text
    for verdict in (present.REPRODUCED, present.DIFFERS, present.NOT_RUN):
        assert verdict in text


def test_committed_pages_are_standalone_and_show_no_code():
    pages = sorted((ROOT / HTML).glob("*.html")) + [ROOT / INDEX]
    assert len(pages) == len(REPORTS) + 1
    for path in pages:
        text = path.read_text()
        assert external_references(text) == [], path
        assert not re.search(r"\b(In|Out)\s*(&nbsp;)?\[\s*\d*\s*\]:", text), path
        assert "<table" in text, path
        assert ATTACK not in text


def test_notebooks_keep_parameters_and_read_paths_only_through_layout():
    for name in REPORTS:
        book = nbformat.read(ROOT / NOTEBOOKS / f"{name}.ipynb", as_version=4)
        assert any("parameters" in c.metadata.get("tags", []) for c in book.cells), name
        code = "\n".join(c.source for c in book.cells if c.cell_type == "code")
        assert not re.search(r"(?<![\w/])(reports|data)/[\w/]+\.(csv|json|parquet)", code), name
        assert "Markdown(f" not in code, name  # values reach the page only escaped (present.note/lead/show)
        last_lines = [c.source.strip().splitlines()[-1] for c in book.cells if c.cell_type == "code" and c.source.strip()]
        assert not any(line.endswith((".to_pandas()", ".style")) for line in last_lines), name  # tables via present.show
        assert "'unit'" not in code and '"unit"' not in code, name  # pooling via analysis.layout


@pytest.mark.slow
def test_an_injected_case_id_is_escaped_in_a_rendered_report(tmp_path, monkeypatch):
    """Render a tiny report through papermill and nbconvert with a hostile parameter."""
    from analysis.present.reports import render_notebook

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel runs in tmp_path: import this checkout's package

    book = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('case_id = "x"')
    params.metadata["tags"] = ["parameters"]
    book.cells = [nbformat.v4.new_markdown_cell("# Probe"), params, nbformat.v4.new_code_cell(
        "import polars as pl\nfrom analysis.present import notebook as present\n"
        "display(present.note('<b>{c}</b>', c=case_id))\npresent.show(pl.DataFrame({'case_id': [case_id]}))")]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / NOTEBOOKS).mkdir(parents=True)
    nbformat.write(book, tmp_path / NOTEBOOKS / "probe.ipynb")
    rendered = render_notebook("probe", {"case_id": ATTACK}, tmp_path, templates=tmp_path / NOTEBOOKS)
    text = rendered.path.read_text()
    assert ATTACK not in text and text.count("&lt;img src=x onerror=alert(1)&gt;") >= 2
    assert (tmp_path / EXECUTED / "probe.ipynb").is_file() and rendered.title == "Probe"


# ---------------------------------------------------------------- headline metrics


def test_write_headline_writes_the_short_summary_file_dvc_declares(tmp_path):
    import yaml

    from analysis.present.headline import claims_summary
    from analysis.present.reports import HEADLINE, write_headline

    for folder in (TABLES, METRICS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / HEADLINE).unlink(missing_ok=True)
    path = write_headline(tmp_path)
    assert json.loads(path.read_text()) == json.loads(json.dumps(claims_summary(tmp_path / TABLES, tmp_path / METRICS)))
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["reports"]
    declared = {k: v for entry in stage["outs"] if isinstance(entry, dict) for k, v in entry.items()}
    assert declared[str(HEADLINE)] == {"cache": False}  # a plain output: `dvc metrics show` prints the headline stage's files
    assert "metrics" not in stage


def test_reports_params_name_every_report_with_its_notebook_parameters():
    import yaml

    per_report = yaml.safe_load((ROOT / "params.yaml").read_text())["reports"]["parameters"]
    assert set(per_report) == set(REPORTS)
    for name, values in per_report.items():
        book = nbformat.read(ROOT / NOTEBOOKS / f"{name}.ipynb", as_version=4)
        params = next(c.source for c in book.cells if "parameters" in c.metadata.get("tags", []))
        for key in values or {}:
            assert re.search(rf"^{key} = ", params, flags=re.M), (name, key)


# ---------------------------------------------------------------- the index's claims grid


def _grid_cells(text: str) -> list[str]:
    import html as htmllib

    grid = re.search(r"<table class='cd-grid'>(.*?)</table>", text, flags=re.S)
    assert grid, "no claims grid on the index"
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", grid.group(1), flags=re.S)]


def _outputs_copy(tmp_path):
    for folder in (TABLES, METRICS, FIGURES):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    (tmp_path / LATENCY_MODEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / LATENCY_MODEL, tmp_path / LATENCY_MODEL)
    return [Page(name, name.title(), tmp_path / HTML / f"{name}.html") for name in REPORTS]


def test_index_opens_with_a_compact_claims_grid(tmp_path):
    """One row per claim (per corpus where it has several): paper | ours | verdict chip | link, no cell
    over ~200 characters, before the charts; every claim and verdict of the run is in it."""
    pages = _outputs_copy(tmp_path)
    text = index_html(pages, tmp_path)
    cells = _grid_cells(text)
    assert max(len(c) for c in cells) <= 200, max(cells, key=len)
    assert text.index("cd-grid") < text.index("Key charts")
    items = present.claims(tmp_path / TABLES, tmp_path / METRICS)
    for item in items:
        assert item.claim[:60] in " ".join(cells), item.claim
        assert f"cd-chip" in text and f">{item.verdict}</span>" in text
    assert re.search(r"<a href='html/(\w+)\.html'>\1 →</a>", text)
    links = set(re.findall(r"<a href='html/(\w+)\.html'>\w+ →</a>", text))
    assert links <= set(REPORTS) and {"coverage", "bounds", "perturbation"} <= links


def test_an_index_without_the_papers_corpora_leads_with_the_users_corpora(tmp_path):
    pages = _outputs_copy(tmp_path)
    mine = "CommitEdits-express"
    for name in ("coverage", "bounds", "edit_formats"):
        path = tmp_path / TABLES / f"{name}.csv"
        frame = pl.read_csv(path, infer_schema_length=10000)
        frame.filter(pl.col("corpus") == mine).write_csv(path)
    text = index_html(pages, tmp_path)
    assert "Your corpora" in text and text.index("Your corpora") < text.index("cd-grid")
    own = text[text.index("Your corpora"):text.index("cd-grid")]
    cov = pl.read_csv(tmp_path / TABLES / "coverage.csv").filter(pl.col("level") == "line").row(0, named=True)
    assert mine in own and present.fmt_pct(cov["coverage"]) in own
    assert "none of the paper's corpora" in own
    assert "stand-in" not in text  # N19: no ProbeEdit-S on this run, so no note about it
    assert "ProbeEdit-S* is a stand-in" in index_html(_outputs_copy(tmp_path / "paper"), tmp_path / "paper")
