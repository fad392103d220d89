"""analysis.present.notebook, the notebooks' facade: every `present.X` (and `charts.X`, `perturbviews.X`, ...)
that a notebook under notebooks/ uses exists in the module the notebook imports it from. The notebooks' code
cells are read from the .ipynb JSON and parsed; a name missing from the facade would fail only at render time."""

from __future__ import annotations

import ast
import importlib
import json

import pytest
from fixtures import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))


def code_of(path) -> str:
    """The notebook's code cells as one Python source, IPython magics and shell lines left out."""
    cells = json.loads(path.read_text())["cells"]
    lines = []
    for cell in cells:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            lines += [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def present_aliases(tree: ast.AST) -> dict[str, str]:
    """alias -> module for every `from analysis.present import a, b as c` in the code."""
    return {(a.asname or a.name): f"analysis.present.{a.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "analysis.present" for a in node.names}


def missing_names(source: str) -> list[str]:
    """`alias.name` for each attribute the code reads from an analysis.present module that the module lacks."""
    tree = ast.parse(source)
    aliases = present_aliases(tree)
    used = {(n.value.id, n.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases}
    return sorted(f"{alias}.{name}" for alias, name in used
                  if not hasattr(importlib.import_module(aliases[alias]), name))


def test_the_notebooks_import_the_facade():
    assert NOTEBOOKS, "no notebooks under notebooks/"
    assert any("notebook" in present_aliases(ast.parse(code_of(p))).get("present", "") for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_present_name_a_notebook_uses_exists(path):
    assert missing_names(code_of(path)) == []


def test_a_name_missing_from_the_facade_is_found():
    code = "from analysis.present import charts, notebook as present\npresent.show(1)\npresent.no_such_view()\ncharts.nope\n"
    assert missing_names(code) == ["charts.nope", "present.no_such_view"]


def test_the_facade_only_gathers_names_it_does_not_define():
    from analysis.present import notebook

    defined_here = [name for name, value in vars(notebook).items() if not name.startswith("_")
                    and getattr(value, "__module__", None) == notebook.__name__]
    assert defined_here == []
