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


def _bootstrap(path) -> str:
    """The notebook's code up to and including its `os.chdir` line: the parameters and the move to the root."""
    code = code_of(path).splitlines()
    last = max(i for i, line in enumerate(code) if "os.chdir(" in line)
    return "\n".join(line for line in code[:last + 1] if line.startswith(("root =", "import os", "notebook_dir", "os.chdir")))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_running_the_cells_again_lands_in_the_same_root(path, monkeypatch):
    """B5: a second "Run All" in the same kernel used to climb two more folders (`os.chdir('../..')` again)."""
    import os

    monkeypatch.chdir(path.parent)  # JupyterLab starts the kernel in the notebook's folder
    namespace: dict = {}
    for _ in range(3):
        exec(_bootstrap(path), namespace)  # noqa: S102 (the repository's own notebook code)
        assert os.getcwd() == str(ROOT), f"{path.name}: run {_ + 1} landed in {os.getcwd()}"


HTML_TAGS = {"b", "i", "em", "strong", "code", "br", "sup", "sub", "a", "p", "ul", "ol", "li", "details", "summary",
             "span", "div", "table", "tr", "td", "th", "small", "kbd", "hr"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_cells_escape_angle_brackets(path):
    """B8: a markdown cell's `<name>` outside a code span is swallowed by the browser as a tag ('Fix bugs in .')."""
    import re

    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = re.sub(r"`[^`]*`", "", "".join(cell["source"]))
        tags = {t.lower() for t in re.findall(r"</?([A-Za-z][\w-]*)", text)}
        assert tags <= HTML_TAGS, f"{path.name}: unescaped {sorted(tags - HTML_TAGS)} (write &lt;name&gt;)"
