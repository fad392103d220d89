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

import ast
import base64
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from analysis.errors import CopyDecodeError, ParamsError
from analysis.pipeline.io import write_text
from analysis.layout import CLAIMS_JSON, EXECUTED, FIGURES, HTML, INDEX, METRICS, TABLES

REPORTS = ("summary", "kernel", "corpora", "coverage", "bounds", "perturbation", "losslessness", "e2e", "pilot", "serving", "explore")
# The stages (with output sets, analysis.pipeline.digest.record_corpus) whose outputs each page reads: a page is
# marked "stale: built from another corpus" when one of them ran on another cases table.
CORPUS_STAGES = ("programs", "spans", "bounds", "optimal", "perturb", "formats")
REPORT_STAGES = {"summary": CORPUS_STAGES, "kernel": (), "corpora": ("spans", "bounds"), "coverage": ("spans",),
                 "bounds": ("bounds", "optimal"), "perturbation": ("perturb",), "losslessness": ("programs",),
                 "e2e": (), "pilot": (), "serving": (), "explore": ("programs", "spans")}
# The report templates: always the project's own notebooks/ (beside this package), never a folder of the
# run (`--out DIR` holds outputs only: a downloaded run folder can carry notebooks, and they are not run).
TEMPLATES = Path(__file__).resolve().parents[2] / "notebooks"
# Parameters the stage sets itself (the output root every notebook moves into); not a user parameter.
INJECTED = ("root",)
# The value types a report parameter may take (papermill writes each as a Python literal).
PARAMETER_TYPES = (str, int, float, bool, type(None))
HEADLINE = METRICS / "headline.json"  # claim verdict counts and a few figures (a plain output; `dvc metrics show` prints analysis.present.headline's files)

# (figure stem under FIGURES, caption): the charts the dashboard shows inline.
KEY_FIGURES = (
    ("kernel_speedup_h200", "Claim 1 (key chart): copy by one prefill against N decode steps on one H200 (frozen run, "
                            "bf16), one line per model, AR loop and context"),
    ("kernel_speedup", "Claim 1 beside it: the same on this machine's fitted profile"),
    ("bounds", "Claims 3 and 4: the closed-form bound per corpus with this machine's fitted kernel, with 95% CIs"),
    ("span_histogram_line", "Claim 2: line-level copy and gen span lengths"),
    ("perturbation", "Claim 6: exact match under off-by-one span noise"),
    ("e2e_speedup", "Beyond the paper: measured end to end, pooled, with case-bootstrap CIs, against the prediction"),
    ("pilot_curve", "Claim 7: the fine-tuning pilot's held-out learning curve (teacher-forced, every seed)"),
)

PAGE_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --rule: #d0d7de; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
       font: 15px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 26px; margin: 8px 0 12px; } h2 { font-size: 20px; margin: 32px 0 8px; border-bottom: 1px solid var(--rule); }
h3 { font-size: 16px; margin: 20px 0 6px; }
a { color: var(--accent); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
pre, .cd-pre { background: #f6f8fa; padding: 10px 12px; border-radius: 6px; white-space: pre-wrap; word-break: break-word; }
svg, img { max-width: 100%; height: auto; }
.output_subarea, .output_area, .output { max-width: 100%; overflow-x: visible; }
.cell { margin: 6px 0; }
.gt_table { margin-left: 0 !important; }
.cd-lead { background: #f3f7fc; border-left: 4px solid var(--accent); padding: 10px 16px; margin: 8px 0 18px; }
.cd-lead p { margin: 0 0 8px; }
.cd-cards { display: flex; flex-wrap: wrap; gap: 12px; }
.cd-card { background: #fff; border: 1px solid var(--rule); border-radius: 6px; padding: 6px 12px; min-width: 150px; }
.cd-value { font-size: 22px; font-weight: 600; } .cd-label { color: var(--muted); font-size: 13px; }
.cd-provenance { margin-top: 36px; color: var(--muted); font-size: 13px; }
.cd-prov th { text-align: left; padding: 2px 16px 2px 0; font-weight: 600; } .cd-prov td { padding: 2px 0; word-break: break-all; }
.cd-copy { background: #c8f7c5; } .cd-gen { background: #ffd59e; }
.cd-figures { display: grid; grid-template-columns: 1fr; gap: 20px; }
.cd-figures-pair { grid-template-columns: 1fr 1fr; margin-bottom: 20px; } .cd-note { color: var(--muted); font-size: 13px; }
.cd-figures figure { margin: 0; } .cd-figures figcaption { color: var(--muted); font-size: 13px; }
.cd-links { columns: 3; } .cd-links li { break-inside: avoid; }
.cd-verdict-reproduced { color: #116329; font-weight: 600; } .cd-verdict-differs { color: #9a6700; font-weight: 600; }
.cd-verdict-not-run { color: var(--muted); font-weight: 600; }
nav.cd-nav { font-size: 13px; color: var(--muted); }
"""


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    path: Path


# ---------------------------------------------------------------- writing


_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|srcset|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]+)"""
    r"""|(?:url\(\s*["']?\s*(?:https?:)?//[^)]+\))|(?:@import\s+["']?(?:url\()?\s*["']?(?:https?:)?//[^"';)]+)""",
    re.IGNORECASE,
)


def external_references(text: str) -> list[str]:
    """Every attribute or stylesheet reference in `text` that would load something from outside the
    page. XML namespace declarations (xmlns=...) name, they do not load."""
    return [m.group(0) for m in _EXTERNAL.finditer(text)]


def page(title: str, body: str, nav: str = "") -> str:
    from analysis.present.pages import esc

    document = (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{PAGE_CSS}</style></head>"
        f"<body><main>{nav}{body}</main></body></html>\n"
    )
    outside = external_references(document)
    if outside:
        raise ParamsError(f"page {title!r} would load from outside itself: {outside[:3]}")
    return document


# ---------------------------------------------------------------- one report


def _title_of(notebook) -> str:
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
    from analysis.present.pages import anchor

    return HEADING.sub(lambda m: f"<h{m[1]} id='{anchor(re.sub(r'<[^>]+>', '', m[2]))}'>{m[2]}</h{m[1]}>", body)


def template_path(name: str, templates: Path = TEMPLATES) -> Path:
    source = Path(templates) / f"{name}.ipynb"
    if not source.is_file():
        raise ParamsError(f"no report template {source}; known: {', '.join(REPORTS)}")
    return source


def template_parameters(name: str, templates: Path = TEMPLATES) -> tuple[str, ...]:
    """The names a report template declares in its `parameters` cell (read from the template, the one
    place they are written), less the ones the stage injects itself (`root`)."""
    import nbformat

    source = template_path(name, templates)
    book = nbformat.read(source, as_version=4)
    cells = [c for c in book.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise ParamsError(f"report template {source} has no cell tagged 'parameters'")
    try:
        tree = ast.parse(cells[0].source)
    except SyntaxError as exc:
        raise ParamsError(f"report template {source}: the parameters cell is not valid Python ({exc.msg})") from None
    names = [target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
             for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
             if isinstance(target, ast.Name)]
    return tuple(dict.fromkeys(n for n in names if n not in INJECTED))


def check_parameters(name: str, parameters: Mapping[str, Any], templates: Path = TEMPLATES) -> dict[str, Any]:
    """`parameters` for report `name`, refused unless every name is one its template's parameters cell
    declares and every value a plain scalar: papermill writes each name as code into the notebook, so an
    unchecked name would run (`x = __import__('os').system(...); y`)."""
    if not isinstance(parameters, Mapping):
        raise ParamsError(f"params: reports.parameters.{name} must be a mapping, got {parameters!r}")
    known = template_parameters(name, templates)
    unknown = [k for k in parameters if not isinstance(k, str) or k not in known]
    if unknown:
        where = ", ".join(repr(k) for k in unknown)
        injected = [k for k in unknown if k in INJECTED]
        why = (f"; {', '.join(map(repr, injected))} is set by the stage (the run's output root), not by params"
               if injected else "")
        raise ParamsError(f"params: reports.parameters.{name} has unknown parameter{'s' if len(unknown) > 1 else ''} "
                          f"{where}; the {name} template declares {', '.join(known) or 'none'}{why}")
    for key, value in parameters.items():
        if not isinstance(value, PARAMETER_TYPES):
            raise ParamsError(f"params: reports.parameters.{name}.{key} must be a string, number, true/false or "
                              f"null, got {type(value).__name__}")
    return dict(parameters)


def execute_notebook(name: str, parameters: Mapping[str, Any], root: Path, out_name: str,
                     templates: Path = TEMPLATES) -> Path:
    """Run the template into reports/notebooks/<out_name>.ipynb. papermill writes into a temporary
    file beside it, renamed only once every cell ran: a failed run leaves no half-executed notebook."""
    import os
    import tempfile

    import papermill

    parameters = check_parameters(name, parameters, templates)
    source = template_path(name, templates)
    executed = root / EXECUTED / f"{out_name}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{out_name}.", suffix=".ipynb", dir=executed.parent)
    os.close(handle)
    try:
        papermill.execute_notebook(
            str(source), temp, parameters={**parameters, "root": str(root.resolve())},
            kernel_name="python3", cwd=str(root), progress_bar=False, log_output=False,
        )
        os.replace(temp, executed)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        executed.unlink(missing_ok=True)  # a previous run's notebook would no longer match this run's pages
        raise
    return executed


def stale_banner(reasons: list[str]) -> str:
    """The warning a page built from another corpus's outputs carries at its top."""
    from analysis.present.pages import esc

    if not reasons:
        return ""
    return ("<div class='cd-lead cd-stale'><p><strong>stale: built from another corpus.</strong> "
            + " ".join(f"{esc(r)}." for r in reasons) + "</p></div>")


def render_html(executed: Path, root: Path, out_name: str, stale: list[str] | None = None) -> Page:
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    title = _title_of(notebook)
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


# ---------------------------------------------------------------- the dashboard


def data_uri(path: Path) -> str:
    kind = {".svg": "image/svg+xml", ".png": "image/png"}[path.suffix]
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _figure(stem: str, caption: str, root: Path) -> str:
    from analysis.present.pages import esc

    for suffix in (".svg", ".png"):
        path = root / FIGURES / f"{stem}{suffix}"
        if path.is_file():
            return (f"<figure><img alt='{esc(caption)}' src='{data_uri(path)}'>"
                    f"<figcaption>{esc(caption)} (<a href='{esc((FIGURES / path.name).relative_to(INDEX.parent))}'>"
                    f"{esc(path.name)}</a>)</figcaption></figure>")
    return f"<figure><figcaption>{esc(caption)}: not produced by this run</figcaption></figure>"


def _links(root: Path, folder: Path, suffixes: tuple[str, ...]) -> str:
    from analysis.present.pages import esc

    files = sorted(p for p in (root / folder).glob("*") if p.suffix in suffixes)
    if not files:
        return "<p>none produced by this run</p>"
    rel = folder.relative_to(INDEX.parent)
    return "<ul class='cd-links'>" + "".join(
        f"<li><a href='{esc(rel / p.name)}'>{esc(p.name)}</a></li>" for p in files) + "</ul>"


def _claims_inputs(root: Path) -> tuple[set[str] | None, dict[str, int]]:
    """This run's corpora and each corpus's case count (line level, its reported framing), from the
    coverage table; (None, {}) when the table is absent."""
    import polars as pl

    from analysis.pooling import POOLED, framing_filter
    from analysis.results.outputs import table

    try:
        cov = table("coverage", root / TABLES)
    except ParamsError:
        return None, {}
    line = cov.filter((pl.col("level") == "line") & framing_filter("body"))
    return set(cov["corpus"].to_list()) - {POOLED}, {r["corpus"]: r["n_cases"] for r in line.iter_rows(named=True)}


def _own_corpora(root: Path, corpora: set[str]) -> str:
    """The run's own corpora table (coverage, bound, formats), or '' when the coverage table is absent."""
    from analysis.results.outputs import bounds_frame, table

    def optional(read):
        try:
            return read()
        except ParamsError:
            return None

    coverage = optional(lambda: table("coverage", root / TABLES))
    if coverage is None or not corpora:
        return ""
    from analysis.pooling import framing_filter
    from analysis.present.pages import corpus_table, show

    frame = corpus_table(coverage.filter(framing_filter("body")), optional(lambda: bounds_frame(root / TABLES)),
                         optional(lambda: table("edit_formats", root / TABLES)), sorted(corpora))
    return show(frame, lift_constants=False).as_raw_html()


def index_html(pages: list[Page], root: Path = Path("."), items: list | None = None) -> str:
    """The dashboard: a compact claims grid (one row per claim, or per corpus / kernel source where a claim
    has several; paper | ours | verdict chip | link), or, on a run without the paper's corpora, the run's
    own corpus table first; then key charts, report links, tables, metrics and provenance."""
    from analysis.claims.engine import claims, read_claims
    from analysis.claims.verdict import DIFFERS, NOT_RUN, REPRODUCED, counts as claim_counts
    from analysis.pooling import PAPER_CORPORA, STAND_IN
    from analysis.present.pages import STAND_IN_NOTE, claims_grid, esc, grid_rows, lead
    from analysis.present.provenance import provenance, provenance_html

    if items is None:  # the stage passes the claims it has just written to CLAIMS_JSON (write_claims)
        items = read_claims(root / CLAIMS_JSON) if (root / CLAIMS_JSON).is_file() else claims(root / TABLES, root / METRICS)
    counts = claim_counts(items)
    rel_html = HTML.relative_to(INDEX.parent)
    reports = "".join(f"<li><a href='{esc(rel_html / p.path.name)}'>{esc(p.title)}</a></li>" for p in pages)
    corpora, cases = _claims_inputs(root)
    paper_run = corpora is None or bool(corpora & set(PAPER_CORPORA))
    stand_in = corpora is None or bool(corpora & set(STAND_IN))  # the stand-in note only where one is shown (N19)
    grid = claims_grid(grid_rows(items, cases), lambda name: str(rel_html / f"{name}.html")).text
    claims_block = ("<h2>Paper versus ours</h2>" + grid
                    + f"<p class='cd-note'>{esc(STAND_IN_NOTE) + ' ' if stand_in else ''}Each row is one scope the "
                      "paper states a figure for, with its own verdict and why; a judged row is marked, and only "
                      "judged rows decide a claim's verdict. Each link opens the section with the method and caveats "
                      f"(every claim and scope, machine-readable: {esc(CLAIMS_JSON.name)}). The full claim table: "
                      f"<a href='{esc(rel_html / 'summary.html')}'>summary</a>.</p>")
    own = _own_corpora(root, (corpora or set()) - set(PAPER_CORPORA))
    if paper_run:
        opening = claims_block + (f"<h2>This run's other corpora</h2>{own}" if own else "")
    else:
        opening = (f"<h2>Your corpora</h2>{own or '<p>no coverage table in this run</p>'}"
                   + "<p>This run holds none of the paper's corpora, so the paper's claims below do not apply to it.</p>"
                   + claims_block)
    body = (
        "<h1>Copy-as-Decode: the paper's claims next to this suite's</h1>"
        + lead(
            "Each claim of arXiv 2604.18170 beside what this suite measured, with a verdict computed from the "
            "stage outputs under the thresholds stated in analysis/data/paper_claims.json. "
            + ("ProbeEdit-S* is a stand-in for the paper's unpublished ProbeEdit corpus. " if stand_in else "")
            + "Kernel timings come from the machine in the provenance below, not the paper's A100.",
            [(f"claims {'that differ' if v == DIFFERS else v}", str(n)) for v, n in counts.items()
             if n or v in (REPRODUCED, DIFFERS, NOT_RUN)]).text
        + opening
        + "<h2>Key charts</h2><div class='cd-figures cd-figures-pair'>"
        + "".join(_figure(stem, caption, root) for stem, caption in KEY_FIGURES[:2]) + "</div><div class='cd-figures'>"
        + "".join(_figure(stem, caption, root) for stem, caption in KEY_FIGURES[2:]) + "</div>"
        + f"<h2>Reports</h2><ul class='cd-links'>{reports}</ul>"
        + "<h2>Tables</h2>" + _links(root, TABLES, (".md", ".csv"))
        + "<h2>Metrics</h2>" + _links(root, METRICS, (".json",))
        + provenance_html(provenance(root)).text
    )
    return page("copydecode: Copy-as-Decode reports", body)


def write_index(pages: list[Page], root: Path = Path("."), stale: list[str] | None = None,
                items: list | None = None) -> Path:
    target = Path(root) / INDEX
    text = index_html(pages, Path(root), items)
    if stale:  # the claims combine every stage's outputs: say which were built from another corpus
        text = text.replace("<main>", "<main>" + stale_banner(stale), 1)
    write_text(text, target)
    return target


def stale_pages_reasons(root: Path) -> dict[str, str]:
    """analysis.pipeline.digest.stale_stages of the output root `root` (its records hold relative paths)."""
    import contextlib

    from analysis.pipeline.digest import stale_stages

    with contextlib.chdir(root):
        return stale_stages()


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
    from analysis.present.pages import esc

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
    from analysis.present.pages import esc

    (Path(root) / EXECUTED / f"{name}.ipynb").unlink(missing_ok=True)
    title = f"{name}: failed"
    body = f"<h1>{esc(title)}</h1><p>failed: <code>{esc(reason)}</code></p>"
    target = Path(root) / HTML / f"{name}.html"
    write_text(page(title, body, "<nav class='cd-nav'><a href='../index.html'>all reports</a></nav>"), target)
    return Page(name, title, target)


def run_reports(per_report: Mapping[str, Mapping[str, Any]], root: Path = Path("."),
                params: Path | None = None, templates: Path = TEMPLATES) -> dict[str, Any]:
    """Every report with its papermill parameters (`reports.parameters` of params.yaml), then the index;
    `params` (the file in use) is what every page's provenance hashes and what every page reads.
    Every parameter name is checked against its template before any notebook runs. A page that fails
    renders as "failed: <reason>"; the index is written all the same, then ReportError names the pages."""
    import os

    from analysis.present.provenance import PARAMS_ENV

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
        for name in REPORTS:
            t0 = time.perf_counter()
            try:
                reasons = [stale[stage] for stage in REPORT_STAGES.get(name, CORPUS_STAGES) if stage in stale]
                pages.append(render_notebook(name, checked[name], Path(root), templates=templates, stale=reasons))
            except Exception as exc:  # papermill's PapermillExecutionError, or writing the page
                missing = missing_input(exc)
                if missing is not None:  # a stage output the report reads is absent from this run
                    pages.append(not_run_page(name, missing, Path(root)))
                else:
                    failed[name] = failure_reason(exc)
                    pages.append(failed_page(name, failed[name], Path(root)))
            timings[name] = round(time.perf_counter() - t0, 2)
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
    from analysis.claims.engine import claims, claims_document
    from analysis.pipeline.io import write_json

    items = claims(Path(root) / TABLES, Path(root) / METRICS)
    write_json(claims_document(items), Path(root) / CLAIMS_JSON)
    return items


def write_headline(root: Path = Path("."), items: list | None = None) -> Path:
    """reports/metrics/headline.json from the other stages' metrics and tables and the claims
    (analysis.present.headline.claims_summary, the one producer of headline figures)."""
    from analysis.pipeline.io import write_json
    from analysis.present.headline import claims_summary

    target = Path(root) / HEADLINE
    write_json(claims_summary(Path(root) / TABLES, Path(root) / METRICS, items), target)
    return target
