"""`copydecode report NAME [--corpus C] [-p KEY=VALUE] [--html FILE]`: one report page, rendered as the
reports stage renders it (the same template, the same parameter checks, the same page and provenance),
from the outputs in the current folder, without touching reports/.

Its parameters are params `reports.parameters.NAME`, then `--corpus` (for a template that declares
`corpus`), then each `-p KEY=VALUE` (VALUE read as a YAML scalar); every name is checked against the
template's own parameters cell (papermill writes names as code). The notebook runs in a temporary
folder beside the page (--html FILE), which is removed afterwards unless `--notebook FILE` keeps the executed
notebook.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.parallel.progress import kernel_noise_filtered
from analysis.pipeline.io import write_text
from analysis.pipeline.params import get_or
from analysis.pipeline.scratch import owned_temp_dir
from analysis.present.execution import kernel_environment, normalise_executed
from analysis.present.provenance import PARAMS_ENV
from analysis.present.reports import (CORPUS_STAGES, REPORT_STAGES, title_of, missing_input, notebook_body, page,
                                      stale_banner, stale_pages_reasons)
from analysis.present.templates import REPORTS, check_parameters, template_parameters, template_path

DEFAULT_DIR = Path("runs/report")


@dataclass(frozen=True)
class ReportCommand:
    name: str
    parameters: dict[str, Any]
    html: Path
    notebook: Path | None
    params_path: Path


# `copydecode report`: its help line and what it reads and writes (the CLI's --help)
HELP = "render one report page as the reports stage does, from this folder's outputs (--corpus C, -p KEY=VALUE)"
READS_WRITES = ("reads params reports.parameters and the outputs the report reads; it writes "
                "runs/report/NAME[-CORPUS].html (or --html FILE) and, with --notebook FILE, the executed notebook")


def add_arguments(parser) -> None:
    parser.add_argument("name", metavar="NAME", choices=REPORTS, help="the report: " + ", ".join(REPORTS))
    parser.add_argument("--corpus", default=None, help="the corpus to show (reports whose template has a corpus "
                                                       "parameter; default: params reports.parameters)")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="KEY=VALUE", dest="parameters",
                        help="another template parameter, e.g. -p framing=decl or -p case_id=HEvalFix-JS/3 "
                             "(repeatable; names from the template's parameters cell)")
    parser.add_argument("--html", default=None, metavar="FILE",
                        help="the page to write (default runs/report/NAME[-CORPUS].html)")
    parser.add_argument("--notebook", default=None, metavar="FILE", help="also keep the executed notebook here")


def _scalar(key: str, raw: str) -> Any:
    import yaml

    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ParamsError(f"-p {key}: the value {raw!r} is not a YAML scalar ({exc})".replace("\n", " ")) from None
    return value


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(text)).strip("-.") or "report"


def settings(params: dict, name: str, corpus: str | None = None, pairs: list[str] = (), html: str | None = None,
             notebook: str | None = None, params_path: Path = Path("params.yaml")) -> ReportCommand:
    chosen = dict(get_or(params, f"reports.parameters.{name}", {}, dict) or {})
    if corpus is not None:
        if "corpus" not in template_parameters(name):
            raise ParamsError(f"--corpus: the {name} report has no corpus parameter; it declares "
                              f"{', '.join(template_parameters(name)) or 'none'}")
        chosen["corpus"] = corpus
    for item in pairs:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"-p expects KEY=VALUE (e.g. -p framing=decl), got {item!r}")
        chosen[key.strip()] = _scalar(key.strip(), raw)
    chosen = check_parameters(name, chosen)
    stem = name + (f"-{_slug(chosen['corpus'])}" if corpus is not None else "")
    out = Path(html) if html else DEFAULT_DIR / f"{stem}.html"
    if out.suffix != ".html":
        raise ParamsError(f"--html {out}: give a file name ending in .html")
    if out.is_dir():
        raise ParamsError(f"--html {out}: is a folder; give the page's file name")
    return ReportCommand(name, chosen, out, Path(notebook) if notebook else None, params_path)


def render(s: ReportCommand, root: Path = Path(".")) -> Path:
    """Execute the template with the chosen parameters against `root`'s outputs and write the page."""
    import shutil

    import nbformat
    import papermill

    s.html.parent.mkdir(parents=True, exist_ok=True)
    before = os.environ.get(PARAMS_ENV)
    os.environ[PARAMS_ENV] = str(s.params_path)
    try:
        with owned_temp_dir(".copydecode-report-", s.html.parent) as tmp:
            executed = tmp / f"{s.name}.ipynb"
            try:
                with kernel_environment():  # the folder's modules are data, never imported
                    papermill.execute_notebook(str(template_path(s.name)), str(executed),
                                               parameters={**s.parameters, "root": "."}, kernel_name="python3",
                                               cwd=str(root), progress_bar=False, log_output=False)
            except Exception as exc:  # papermill's PapermillExecutionError carries the cell's exception
                missing = missing_input(exc)
                if missing is not None:
                    raise ParamsError(f"the {s.name} report reads an output this folder lacks: {missing}") from None
                if getattr(exc, "ename", None):
                    raise ParamsError(f"the {s.name} report failed: {exc.ename}: {exc.evalue}") from None
                raise
            normalise_executed(executed, s.name, s.name)
            book = nbformat.read(executed, as_version=4)
            stale = stale_pages_reasons(root)
            reasons = [stale[st] for st in REPORT_STAGES.get(s.name, CORPUS_STAGES) if st in stale]
            index = os.path.relpath((root / "reports/index.html").resolve(), s.html.parent.resolve())
            nav = f"<nav class='cd-nav'><a href='{Path(index).as_posix()}'>all reports</a></nav>"
            write_text(page(title_of(book), stale_banner(reasons) + notebook_body(book), nav), s.html)
            if s.notebook is not None:
                s.notebook.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(executed, s.notebook)
    finally:
        if before is None:
            os.environ.pop(PARAMS_ENV, None)
        else:
            os.environ[PARAMS_ENV] = before
    return s.html


def command(args) -> int:
    """`args.config`: the --params file with every --set applied (analysis.cli), read before the report's
    defaults are."""
    cfg = args.config
    s = settings(cfg.params, args.name, args.corpus, args.parameters, args.html, args.notebook, Path(cfg.path))
    shown = ", ".join(f"{k}={v}" for k, v in s.parameters.items()) or "no parameters"
    print(f"copydecode report {s.name}: rendering ({shown}) ...", file=sys.stderr)

    with kernel_noise_filtered():
        path = render(s)
    print(f"copydecode report {s.name}: wrote {path}", file=sys.stderr)
    return 0
