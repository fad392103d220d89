"""The papermill report templates: where they are (always the project's own notebooks/), their names, and
the parameters each declares in its `parameters` cell, checked before any runs (analysis.present.execution
runs one; analysis.present.reports renders the pages)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

from analysis.errors import ParamsError

REPORTS = ("summary", "kernel", "corpora", "coverage", "bounds", "distributions", "perturbation", "losslessness", "e2e",
           "rivals", "pilot", "serving", "engine", "explore")
# The report templates: always the project's own notebooks/ (beside this package), never a folder of the
# run (`--out DIR` holds outputs only: a downloaded run folder can carry notebooks, and they are not run).
TEMPLATES = Path(__file__).resolve().parents[2] / "notebooks"
# Parameters the stage sets itself (the output root every notebook moves into); not a user parameter.
INJECTED = ("root",)
# The value types a report parameter may take (papermill writes each as a Python literal).
PARAMETER_TYPES = (str, int, float, bool, type(None))


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
