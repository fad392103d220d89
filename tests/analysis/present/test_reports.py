"""The report layer: number formats, escaped and index-free tables, verdicts computed from the
metrics under the stated thresholds, provenance, pages that load nothing from outside themselves."""

from __future__ import annotations

import json
import re
import shutil

import nbformat
import polars as pl
import pytest
from fixtures import ATTACK, ROOT

from analysis.errors import ParamsError
from analysis.layout import EXECUTED, FIGURES, HTML, INDEX, LATENCY_MODEL, METRICS, TABLES
from analysis.present.templates import TEMPLATES
from analysis.present import notebook as present
from analysis.present.index import index_html
from analysis.present.reports import REPORTS, notebook_body
from analysis.present.shell import Page, external_references, page



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
        book = nbformat.read(TEMPLATES / f"{name}.ipynb", as_version=4)
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
    (tmp_path / "notebooks").mkdir(parents=True)
    nbformat.write(book, tmp_path / "notebooks" / "probe.ipynb")
    rendered = render_notebook("probe", {"case_id": ATTACK}, tmp_path, templates=tmp_path / "notebooks")
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
        book = nbformat.read(TEMPLATES / f"{name}.ipynb", as_version=4)
        params = next(c.source for c in book.cells if "parameters" in c.metadata.get("tags", []))
        for key in values or {}:
            assert re.search(rf"^{key} = ", params, flags=re.M), (name, key)


# ---------------------------------------------------------------- the index's claims grid


def _grid_cells(text: str) -> list[str]:
    import html as htmllib

    grid = re.search(r"<table class='cd-grid'>.*?<tbody>(.*?)</table>", text, flags=re.S)
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
    """One row per scope of a claim: claim | scope | paper | ours | verdict chip | why | section link, no cell
    over ~300 characters, before the charts; every claim and verdict of the run is in it."""
    pages = _outputs_copy(tmp_path)
    text = index_html(pages, tmp_path)
    cells = _grid_cells(text)
    assert max(len(c) for c in cells) <= 300, max(cells, key=len)
    assert text.index("cd-grid") < text.index("Key charts")
    items = present.claims(tmp_path / TABLES, tmp_path / METRICS)
    for item in items:
        assert item.claim[:60] in " ".join(cells), item.claim
        assert f"cd-chip" in text and f">{item.verdict}</span>" in text
    assert re.search(r"<a href='html/(\w+)\.html#[\w-]+'>\1 →</a>", text)  # each row links its section
    links = set(re.findall(r"<a href='html/(\w+)\.html#[\w-]+'>\w+ →</a>", text))
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


def test_a_notebook_stopped_by_an_absent_stage_output_becomes_a_not_run_page():
    from types import SimpleNamespace

    from analysis.errors import MissingOutputError, ParamsError
    from analysis.present.reports import MISSING_INPUT_ERRORS, missing_input

    message = "reports/tables/e2e_speedup.csv not found; run `dvc repro` first"
    for error in (ParamsError, MissingOutputError):  # outputs.table raises the subclass
        assert error.__name__ in MISSING_INPUT_ERRORS
        assert missing_input(SimpleNamespace(ename=error.__name__, evalue=message)) == message
    assert missing_input(SimpleNamespace(ename="ValueError", evalue=message)) is None


# ---------------------------------------------------------------- issue 39: H2, L1


def test_the_report_kernel_never_has_the_run_folder_on_its_path(tmp_path, monkeypatch):
    """H2: papermill starts the kernel in the output root and ipykernel put the working folder first on
    sys.path, so a planted DIR/altair.py replaced altair. Under kernel_environment a Python started in a
    folder holding planted modules imports none of them (PYTHONSAFEPATH; relative PYTHONPATH entries dropped)."""
    import subprocess
    import sys

    from analysis.present.execution import PROJECT, kernel_environment

    (tmp_path / "json.py").write_text("raise SystemExit('planted json imported')\n")
    (tmp_path / "plantedmod.py").write_text("raise SystemExit('planted module imported')\n")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{':'}.{':'}")  # a relative and an empty entry: both the working folder
    with kernel_environment():
        import os

        env = dict(os.environ)
    assert env["PYTHONSAFEPATH"] == "1" and env["PYTHONPATH"].split(":") == [str(PROJECT)] + (
        [] if str(ROOT) == str(PROJECT) else [str(ROOT)])
    code = "import json, sys\ntry:\n    import plantedmod\nexcept ImportError:\n    print('clean', json.dumps(sys.path[:1]))\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("clean"), done.stderr
    assert os.environ.get("PYTHONPATH") == f"{ROOT}:.:"  # restored after the block


def test_an_executed_notebook_holds_no_machine_path_and_a_fixed_injected_cell_id(tmp_path):
    """L1: the injected parameters cell had a random id (every page differed between two renders), and the
    notebook held the absolute root and papermill's temporary output name."""
    from analysis.present.execution import INJECTED_CELL_ID, normalise_executed

    book = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('root = "."', metadata={"tags": ["injected-parameters"]})
    book.cells = [nbformat.v4.new_markdown_cell("# t"), cell]
    book.metadata["papermill"] = {"input_path": "/home/me/copydecode/notebooks/summary.ipynb",
                                  "output_path": "/home/me/runs/x/reports/notebooks/.summary.ab12cd34.ipynb",
                                  "parameters": {"root": "."}}
    path = tmp_path / "summary.ipynb"
    nbformat.write(book, path)
    normalise_executed(path, "summary", "summary")
    text = path.read_text()
    again = nbformat.read(path, as_version=4)
    assert again.cells[1]["id"] == INJECTED_CELL_ID and "/home/me" not in text and ".ab12cd34" not in text
    assert again.metadata["papermill"]["input_path"] == "notebooks/summary.ipynb"
    assert again.metadata["papermill"]["output_path"] == "reports/notebooks/summary.ipynb"


def test_the_index_says_when_a_timed_stage_ran_noisy(tmp_path):
    """Section 4: NOISY was shown on the kernel and e2e pages only; the index carries it too, with what tripped it."""
    from analysis.present.index import noise_banner

    (tmp_path / METRICS).mkdir(parents=True)
    assert noise_banner(tmp_path) == ""
    (tmp_path / METRICS / "kernels.json").write_text(json.dumps(
        {"run_environment": {"noisy": True, "noisy_reasons": ["run r1: reference drift 22% > 15% <x>"]}}))
    (tmp_path / METRICS / "e2e.json").write_text(json.dumps({"environment": {"noisy": False}}))
    banner = noise_banner(tmp_path)
    assert "NOISY timings" in banner and "run r1: reference drift 22% &gt; 15% &lt;x&gt;" in banner
    assert "kernel.html" in banner and "e2e.html" not in banner
    (tmp_path / METRICS / "e2e.json").write_text(json.dumps({"environment": {"noisy": True, "noisy_reasons": ["busy"]}}))
    assert "e2e.html" in noise_banner(tmp_path) and "busy" in noise_banner(tmp_path)
    assert "NOISY timings" in index_html([], tmp_path)


def test_the_index_file_lists_are_grouped_by_claim_one_line_per_table(tmp_path):
    """P10: each table stem is one line (its csv and md links), under the claim it belongs to."""
    import re

    from analysis.layout import TABLES
    from analysis.present.index import FILE_GROUPS, _links, file_group

    (tmp_path / TABLES).mkdir(parents=True)
    for stem in ("kernel_speedup", "bounds", "perturbation_clip", "pilot_em", "mystery"):
        for suffix in (".csv", ".md"):
            (tmp_path / TABLES / f"{stem}{suffix}").write_text("x")
    html = _links(tmp_path, TABLES, (".md", ".csv"))
    groups = re.findall(r"<h3>([^<]+)</h3>", html)
    assert groups == [FILE_GROUPS[0][0], FILE_GROUPS[2][0], FILE_GROUPS[4][0], FILE_GROUPS[5][0], "other"]
    lines = re.findall(r"<li>(.*?)</li>", html)
    assert len(lines) == 5 and all(line.count("<a ") == 2 for line in lines)
    assert file_group("e2e_cases") == FILE_GROUPS[6][0] and file_group("coverage") == FILE_GROUPS[1][0]


def _round_trip_root(tmp_path):
    """An output root whose round trip ran on cases table "Mine" (its record, as the CLI writes it)."""
    import contextlib

    from analysis.pipeline.digest import record_corpus

    (tmp_path / METRICS).mkdir(parents=True)
    (tmp_path / METRICS / "roundtrip.json").write_text(json.dumps({"programs": 2, "passed": 2, "failed": 0}))
    (tmp_path / "data/corpora").mkdir(parents=True)
    (tmp_path / "data/corpora/cases.parquet").write_text("Mine")
    with contextlib.chdir(tmp_path):
        record_corpus("roundtrip", [METRICS / "roundtrip.json"])
    return tmp_path


def test_the_losslessness_page_carries_the_stale_banner_when_its_round_trip_ran_on_another_corpus(tmp_path):
    """H5: the losslessness page showed an earlier corpus's round trip as fresh (only headline and claim 5 were
    tested). The round trip's record makes the page, and the pages that read it, carry the banner; the
    others do not; the rendered page shows it above the report."""
    from analysis.present.index import stale_pages_reasons
    from analysis.present.reports import page_stale_reasons, render_html

    root = _round_trip_root(tmp_path)
    assert page_stale_reasons("losslessness", stale_pages_reasons(root)) == []
    (root / "data/corpora/cases.parquet").write_text("Other")  # corpora rebuilt; the round trip not rerun
    stale = stale_pages_reasons(root)
    assert list(stale) == ["roundtrip"]
    reasons = page_stale_reasons("losslessness", stale)
    assert len(reasons) == 1 and "`roundtrip` ran on a different data/corpora/cases.parquet" in reasons[0]
    assert page_stale_reasons("summary", stale) == reasons  # the claims grid reads it too
    assert page_stale_reasons("kernel", stale) == page_stale_reasons("coverage", stale) == []
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_markdown_cell("# Losslessness\n\nEvery program round-trips.")]
    executed = root / EXECUTED / "losslessness.ipynb"
    executed.parent.mkdir(parents=True)
    nbformat.write(book, executed)
    text = render_html(executed, root, "losslessness", reasons).path.read_text()
    assert "stale: built from another corpus" in text and "ran on a different data/corpora/cases.parquet" in text
    assert text.index("cd-stale") < text.index("Every program round-trips")
    fresh = render_html(executed, root, "losslessness", page_stale_reasons("losslessness", {})).path.read_text()
    assert "cd-stale" not in fresh


def test_an_executed_notebook_holds_no_memory_address():
    """L1: a table's text/plain output is its object's repr (`<great_tables._gt_data.Body object at 0x7fad...>`):
    a different address on every render."""
    from analysis.present.execution import _without_addresses

    text = ["GT(_body=<great_tables._gt_data.Body object at 0x7fadc753a5d0>, f=<function f at 0x7f00aa>)\n", "x"]
    assert _without_addresses(text) == ["GT(_body=<great_tables._gt_data.Body object at 0x…>, f=<function f at "
                                        "0x…>)\n", "x"]


@pytest.mark.slow
def test_two_renders_of_the_same_outputs_give_identical_pages_and_notebooks_but_for_timings(tmp_path, monkeypatch):
    """L1: two renders of one page, from two copies of the same outputs in two folders: the HTML pages are
    byte for byte the same (SOURCE_DATE_EPOCH set), and the executed notebooks differ only in the timings
    papermill and the kernel record (docs/run-folders.md, byte-reproducible pages)."""
    from analysis.present.reports import render_notebook

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    files = {}
    for name in ("a", "b"):
        root = tmp_path / name / "run"
        for folder in (TABLES, METRICS):
            shutil.copytree(ROOT / folder, root / folder)
        render_notebook("losslessness", {}, root)
        files[name] = {rel: (root / rel).read_bytes() for rel in (HTML / "losslessness.html",
                                                                   EXECUTED / "losslessness.ipynb")}
    assert files["a"][HTML / "losslessness.html"] == files["b"][HTML / "losslessness.html"]

    def untimed(data: bytes) -> dict:
        book = json.loads(data)
        for record in [book["metadata"], *(cell["metadata"] for cell in book["cells"])]:
            record.pop("execution", None)  # the kernel's iopub timestamps
            for key in ("start_time", "end_time", "duration"):
                record.get("papermill", {}).pop(key, None)
        return book

    first, second = (untimed(files[n][EXECUTED / "losslessness.ipynb"]) for n in ("a", "b"))
    assert first == second
    assert str(tmp_path) not in files["a"][EXECUTED / "losslessness.ipynb"].decode()
