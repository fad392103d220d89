"""Render the papermill report templates into reports/: executed notebooks, standalone HTML pages
and the reports/index.html dashboard.

Pages are read, not run: no code cells, no `In [ ]:`/`Out[4]:` prompts, and nothing loaded from
outside the file. nbconvert's default templates link MathJax, require.js and mermaid from a CDN,
so the notebook body is exported with the `basic` template (the cells only, no <head>) and wrapped
in this module's own page, whose stylesheet is inline. Charts are inline SVG (altair's svg renderer
in the notebooks) or data: URIs (figures on the index). `external_references` checks every page
before it is written.

Stage order: run_reports (notebooks -> html -> index). The README's Results block is written after
`dvc repro`, outside it, by `copydecode readme`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Mapping

from analysis.errors import CopyDecodeError, ParamsError
from analysis.pipeline.io import write_json, write_text
from analysis.layout import CLAIMS_JSON, EXECUTED, HTML, INDEX, METRICS, TABLES
from analysis.present.execution import execute_notebook
from analysis.present.index import stale_pages_reasons, write_index
from analysis.present.shell import Page, page, stale_banner
from analysis.present.templates import REPORTS, TEMPLATES, check_parameters
from analysis.claims.engine import claims, claims_document
from analysis.parallel.progress import progress_bar
from analysis.present.headline import claims_summary
from analysis.present.pages import anchor, esc
from analysis.present.provenance import PARAMS_ENV, provenance_block
from analysis.pipeline.commands import CORPUS_SETS

# The stages (with corpus records, analysis.pipeline.digest.record_corpus) whose outputs each page reads: a page is
# marked "stale: built from another corpus" when one of them ran on another cases table. The summary shows the
# claims, which read every stage's outputs (tests/pipeline/test_stale_records.py checks both against dvc.yaml).
CORPUS_STAGES = ("programs", "roundtrip", "spans", "bounds", "optimal", "perturb", "formats")
EVERY_RECORDED_STAGE = tuple(dict.fromkeys([*CORPUS_STAGES, *(s for s in CORPUS_SETS if s != "corpora")]))
REPORT_STAGES = {"summary": EVERY_RECORDED_STAGE, "kernel": (), "corpora": ("spans", "bounds"), "coverage": ("spans",),
                 "bounds": ("bounds", "optimal", "formats"), "distributions": ("bounds", "percase", "e2e"),
                 "perturbation": ("perturb",), "losslessness": ("programs", "roundtrip"), "e2e": ("e2e", "decode"),
                 "rivals": ("rivals",), "pilot": ("pilot", "decode"),
                 "serving": ("rivals", "serving simulate", "serving replay"), "engine": (),
                 "explore": ("programs", "spans")}
HEADLINE = METRICS / "headline.json"  # claim verdict counts and a few figures (a plain output; `dvc metrics show` prints analysis.present.headline's files)

# ---------------------------------------------------------------- one report


def title_of(notebook) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return "report"


def notebook_body(notebook) -> str:
    """The cells of an executed notebook as HTML: markdown and outputs only, no prompts."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="basic", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True, exclude_raw=True, exclude_anchor_links=True)
    body, _ = exporter.from_notebook_node(notebook)
    return with_heading_ids(body)


HEADING = re.compile(r"<h([12])>(.*?)</h\1>", flags=re.S)


def with_heading_ids(body: str) -> str:
    """Each h1/h2 of a page gets its anchor id (analysis.present.pages.anchor), so a claim links to its
    section (paper_claims.json `section`: page#anchor)."""
    return HEADING.sub(lambda m: f"<h{m[1]} id='{anchor(re.sub(r'<[^>]+>', '', m[2]))}'>{m[2]}</h{m[1]}>", body)


def page_stale_reasons(name: str, stale: Mapping[str, str]) -> list[str]:
    """The banner reasons of page `name`: those of `stale` (analysis.pipeline.digest.stale_stages, stage ->
    reason) for the stages whose outputs the page reads (REPORT_STAGES; the losslessness page: programs
    and the round trip, H5)."""
    return [stale[stage] for stage in REPORT_STAGES.get(name, CORPUS_STAGES) if stage in stale]


def render_html(executed: Path, root: Path, out_name: str, stale: list[str] | None = None) -> Page:
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    title = title_of(notebook)
    nav = "<nav class='cd-nav'><a href='../index.html'>all reports</a></nav>"
    target = root / HTML / f"{out_name}.html"
    write_text(page(title, stale_banner(stale or []) + notebook_body(notebook), nav), target)
    return Page(out_name, title, target)


def render_notebook(name: str, parameters: Mapping[str, Any], root: Path = Path("."), out_name: str | None = None,
                    templates: Path = TEMPLATES, stale: list[str] | None = None) -> Page:
    """Execute the project's notebooks/<name>.ipynb with `parameters` and write its standalone HTML page
    (with `stale`'s reasons on top when the outputs it reads came from another corpus)."""
    out_name = out_name or name
    executed = execute_notebook(name, parameters, Path(root), out_name, templates)
    return render_html(executed, Path(root), out_name, stale)


# ---------------------------------------------------------------- the stage


MISSING_INPUT = re.compile(r"not found; run `")
# The exceptions a notebook raises for an absent input, by name (papermill reports a cell's error by its class name).
MISSING_INPUT_ERRORS = ("ParamsError", "MissingOutputError")


def missing_input(exc: BaseException) -> str | None:
    """The message of a report that stopped because a stage output it reads is absent (a run that did
    not build it: a one-off root, a corpus selection without the paper's corpora), else None."""
    if getattr(exc, "ename", None) in MISSING_INPUT_ERRORS and MISSING_INPUT.search(str(getattr(exc, "evalue", ""))):
        return str(exc.evalue)
    return None


def not_run_page(name: str, missing: str, root: Path = Path(".")) -> Page:
    """A report page that says which input this run lacks, in place of a half-executed notebook."""
    (Path(root) / EXECUTED / f"{name}.ipynb").unlink(missing_ok=True)
    title = f"{name}: not run in this run"
    body = (f"<h1>{esc(title)}</h1><p>This report reads a stage output that this run did not build: "
            f"<code>{esc(missing)}</code>.</p>")
    target = Path(root) / HTML / f"{name}.html"
    write_text(page(title, body, "<nav class='cd-nav'><a href='../index.html'>all reports</a></nav>"), target)
    return Page(name, title, target)


class ReportError(CopyDecodeError):
    """A report page failed to render (the other pages and the index were written)."""


def failure_reason(exc: BaseException) -> str:
    """One line saying why a page failed: the notebook's exception (papermill's ename/evalue), else ours."""
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    text = f"{ename}: {evalue}" if ename else f"{type(exc).__name__}: {exc}"
    line = " ".join(text.split())
    return line if len(line) <= 400 else line[:399] + "…"


def failed_page(name: str, reason: str, root: Path = Path(".")) -> Page:
    """A report page that says it failed and why, in place of a half-executed notebook."""
    (Path(root) / EXECUTED / f"{name}.ipynb").unlink(missing_ok=True)
    title = f"{name}: failed"
    body = f"<h1>{esc(title)}</h1><p>failed: <code>{esc(reason)}</code></p>"
    target = Path(root) / HTML / f"{name}.html"
    write_text(page(title, body, "<nav class='cd-nav'><a href='../index.html'>all reports</a></nav>"), target)
    return Page(name, title, target)


def run_reports(per_report: Mapping[str, Mapping[str, Any]], root: Path = Path("."),
                params: Path | None = None, templates: Path = TEMPLATES, progress_to=None) -> dict[str, Any]:
    """Every report with its papermill parameters (`reports.parameters` of params.yaml), then the index;
    `params` (the file in use) is what every page's provenance hashes and what every page reads.
    Every parameter name is checked against its template before any notebook runs. A page that fails
    renders as "failed: <reason>"; the index is written all the same, then ReportError names the pages.
    A progress bar (one step per page, the page being rendered beside it) draws on `progress_to` (stderr)."""
    import os

    started = time.perf_counter()
    unknown = set(per_report) - set(REPORTS)
    if unknown:
        raise ParamsError(f"reports.parameters names unknown reports {sorted(unknown)}; known: {', '.join(REPORTS)}")
    checked = {name: check_parameters(name, per_report.get(name) or {}, templates) for name in REPORTS}
    stale = stale_pages_reasons(Path(root))
    before = os.environ.get(PARAMS_ENV)
    if params is not None:
        os.environ[PARAMS_ENV] = str(Path(params))  # relative to the root, where every notebook runs
    try:
        pages, timings, failed = [], {}, {}
        bar = progress_bar(len(REPORTS), "reports", unit="page", leave=True, file=progress_to)
        for name in REPORTS:
            bar.set_postfix_str(name)
            t0 = time.perf_counter()
            try:
                pages.append(render_notebook(name, checked[name], Path(root), templates=templates,
                                             stale=page_stale_reasons(name, stale)))
            except Exception as exc:  # papermill's PapermillExecutionError, or writing the page
                missing = missing_input(exc)
                if missing is not None:  # a stage output the report reads is absent from this run
                    pages.append(not_run_page(name, missing, Path(root)))
                else:
                    failed[name] = failure_reason(exc)
                    pages.append(failed_page(name, failed[name], Path(root)))
            timings[name] = round(time.perf_counter() - t0, 2)
            bar.update()
        bar.set_postfix_str("index")
        bar.close()
        items = write_claims(Path(root))
        write_headline(Path(root), items)  # before the index, which links every metrics file
        write_index(pages, Path(root), list(stale.values()), items)
    finally:
        if before is None:
            os.environ.pop(PARAMS_ENV, None)
        else:
            os.environ[PARAMS_ENV] = before
    if failed:
        raise ReportError("; ".join(f"report {name} failed: {reason}" for name, reason in failed.items())
                          + f" (the other pages and {INDEX} were written)")
    return {"reports": timings, "seconds": round(time.perf_counter() - started, 1)}


def write_claims(root: Path = Path(".")) -> list:
    """reports/claims.json: every claim and scope, evaluated once from the stage outputs under `root`
    (analysis.claims.engine.claims_document); the index, headline.json and the README read it back."""
    items = claims(Path(root) / TABLES, Path(root) / METRICS)
    write_json(claims_document(items, provenance_block(Path(root))), Path(root) / CLAIMS_JSON)
    return items


def write_headline(root: Path = Path("."), items: list | None = None) -> Path:
    """reports/metrics/headline.json from the other stages' metrics and tables and the claims
    (analysis.present.headline.claims_summary, the one producer of headline figures)."""
    target = Path(root) / HEADLINE
    write_json(claims_summary(Path(root) / TABLES, Path(root) / METRICS, items), target)
    return target
