"""Every table and chart a report template asks for reaches its page (B1 and B2 of the UX review: a cell shows only its
last expression, so `present.show(...)` before another one, or inside a loop, built a table nobody saw: the rivals
page's per-source comparison and the pilot page's before/after and per-run tables were dropped without an error).

Two checks: statically, a presenting call (`present.*`, `charts.*`) is the last statement of its cell or is passed to
`display(...)`; and on the committed pages, every title a template gives `present.show` (its constant text) is in
the rendered HTML."""

from __future__ import annotations

import ast
import html
import json
from pathlib import Path

import pytest

from fixtures import ROOT

from analysis.layout import HTML
from analysis.present.templates import REPORTS, TEMPLATES

PRESENTING = ("present", "charts")


def code_cells(name: str) -> list[tuple[int, str]]:
    doc = json.loads((TEMPLATES / f"{name}.ipynb").read_text())
    return [(i, "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
            for i, c in enumerate(doc["cells"]) if c["cell_type"] == "code"]


def _root(func: ast.AST) -> str:
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else ""


def dropped_calls(source: str) -> list[str]:
    """Presenting calls of one cell whose result no one displays: a bare call that is not the cell's last statement
    (a loop's body included)."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node is not last
                and _root(node.value.func) in PRESENTING):
            found.append(f"line {node.lineno}: {ast.unparse(node.value.func)}")
    return found


def shown_titles(source: str) -> list[str]:
    """The constant text of each `title=` a cell gives a `show` call it always makes (a call on one branch of an `if`
    is an alternative, e.g. a sentence in place of a table of unchanged rows): the whole string, or an f-string's
    longest constant part."""
    tree = ast.parse(source)
    branched = {id(n) for cond in ast.walk(tree) if isinstance(cond, (ast.If, ast.IfExp))
                for part in ((cond.body if isinstance(cond.body, list) else [cond.body])
                             + (cond.orelse if isinstance(cond.orelse, list) else [cond.orelse]))
                for n in ast.walk(part)}
    titles = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "show"):
            continue
        if id(node) in branched:
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg != "title":
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                titles.append(value.value)
            elif isinstance(value, ast.JoinedStr):
                parts = [v.value for v in value.values if isinstance(v, ast.Constant)]
                if parts:
                    titles.append(max(parts, key=len).strip())
    return [t for t in titles if len(t) >= 8]


@pytest.mark.parametrize("name", REPORTS)
def test_no_template_builds_a_table_or_chart_it_never_shows(name):
    dropped = {i: calls for i, source in code_cells(name) if (calls := dropped_calls(source))}
    assert dropped == {}, f"notebooks/{name}.ipynb: wrap these in display(...) or give each its own cell"


def test_the_check_finds_a_dropped_table():
    cell = "present.show(a, title='first')\npresent.show(b, title='second')"
    assert dropped_calls(cell) == ["line 1: present.show"]
    assert dropped_calls("for x in xs:\n    present.show(x, title='each')") == ["line 2: present.show"]
    assert dropped_calls("display(present.show(a, title='first'))\npresent.show(b, title='second')") == []
    assert shown_titles("present.show(a, title=f'The fastest per corpus under {k}')") == ["The fastest per corpus under"]


@pytest.mark.parametrize("name", REPORTS)
def test_every_title_a_template_shows_is_on_its_committed_page(name):
    page = ROOT / HTML / f"{name}.html"
    if not page.is_file():
        pytest.skip(f"no committed {HTML}/{name}.html")
    text = html.unescape(page.read_text(errors="replace"))
    if "not run in this run" in text[:5000]:
        pytest.skip(f"{name}: the committed page says its stage did not run")
    missing = [t for _, source in code_cells(name) for t in shown_titles(source) if t not in text]
    assert missing == [], f"{page.relative_to(ROOT)} lacks these titles its template shows"
