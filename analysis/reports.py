"""Render the papermill report templates into reports/: executed notebooks, self-contained HTML
(charts are static SVG inside the page, so nothing loads from a CDN), and reports/index.html."""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.io import write_text
from analysis.layout import EXECUTED, HTML, INDEX, NOTEBOOKS

REPORTS = ("summary", "kernel", "coverage", "bounds", "perturbation", "losslessness", "e2e", "explore")


def render_notebook(name: str, parameters: dict[str, Any], root: Path, out_name: str | None = None) -> Path:
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    source = NOTEBOOKS / f"{name}.ipynb"
    if not source.is_file():
        raise ParamsError(f"no report template {source}; known: {', '.join(REPORTS)}")
    out_name = out_name or name
    executed = EXECUTED / f"{out_name}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(
        str(source), str(executed), parameters={"root": str(root.resolve()), **parameters},
        kernel_name="python3", cwd=str(root), progress_bar=False, log_output=False,
    )
    exporter = HTMLExporter(exclude_input=True)
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    page = HTML / f"{out_name}.html"
    write_text(body, page)
    return page


def write_index(pages: list[Path]) -> None:
    def links(folder: str, suffixes: tuple[str, ...]) -> str:
        files = sorted(p for p in Path("reports", folder).glob("*") if p.suffix in suffixes)
        return "".join(f'<li><a href="{folder}/{html.escape(p.name)}">{html.escape(p.name)}</a></li>' for p in files)

    items = "".join(f'<li><a href="html/{p.name}">{p.stem}</a> (<a href="notebooks/{p.stem}.ipynb">notebook</a>)</li>'
                    for p in pages)
    write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>copydecode reports</title></head><body>"
        "<h1>copydecode: Copy-as-Decode reports</h1>"
        "<p>Every table and figure was computed by <code>dvc repro</code>. ProbeEdit-S is a stand-in for the paper's "
        "unpublished ProbeEdit corpus.</p>"
        f"<h2>Reports</h2><ul>{items}</ul>"
        f"<h2>Tables</h2><ul>{links('tables', ('.md', '.csv'))}</ul>"
        f"<h2>Figures</h2><ul>{links('figures', ('.png', '.svg'))}</ul>"
        f"<h2>Metrics</h2><ul>{links('metrics', ('.json',))}</ul>"
        "</body></html>\n",
        INDEX,
    )


def run_reports(per_report: dict[str, dict[str, Any]], root: Path) -> dict[str, Any]:
    pages, timings = [], {}
    for name in REPORTS:
        t0 = time.perf_counter()
        pages.append(render_notebook(name, per_report.get(name) or {}, root))
        timings[name] = round(time.perf_counter() - t0, 2)
    write_index(pages)
    return {"reports": timings}
