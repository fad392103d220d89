"""Prose that resolves (review round 6, item 4): every dotted project name in the code's docstrings and
comments, in docs/ and in params.yaml names a module, or a name a module defines; docs/layout.md names every
module; and no production comment or docstring points at a tracker id (an issue number, a review item such
as D7, H4 or N15) instead of saying the reason in words. Tests may name the review item in their docstrings."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

from fixtures import ROOT

PACKAGES = ("analysis", "kernels_profile")
DOTTED = re.compile(r"(?<![\w./-])(?:analysis|kernels_profile)(?:\.[A-Za-z_]\w*)+")
TRACKER = re.compile(r"\b[Ii]ssues? \d+|\b[Rr]eview (?:item )?[A-Z]{0,2}\d+|(?<!\w)\(\s*[A-Z]{1,2}\d{1,2}(?:\s*[,;/]\s*[A-Z]{1,2}\d{1,2})*\s*\)"
                     r"|\b[A-Z]{1,2}\d{1,2}:|\([A-Z]: section \d+\)|\bround \d+\b")


def python_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def prose_of(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text(encoding="utf-8")
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.append((first.lineno, first.value.value))
    return out


@lru_cache(maxsize=None)
def defined_names(module: Path) -> dict[str, set[str]]:
    """A module's top-level names (definitions, assignments, imports) -> the names each class defines."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: dict[str, set[str]] = {}

    def targets(node) -> list[str]:
        found = []
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    found.append(leaf.id)
        return found

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    members.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    members.update(targets(item))
                elif isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self":
                    members.add(item.attr)
            names[node.name] = members
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update({n: set() for n in targets(node)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: set() for a in node.names})
        elif isinstance(node, (ast.If, ast.Try)):  # names defined under a guard
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
                    names[item.name] = set()
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    names.update({n: set() for n in targets(item)})
    return names


def resolves(dotted: str) -> bool:
    """A package, a module, a name a module defines, or a name its class defines."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not module.is_file():
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = defined_names(module)
        if rest[0] not in names:
            return False
        return len(rest) == 1 or (len(rest) == 2 and rest[1] in names[rest[0]])
    return False


def dotted_names_in(text: str) -> list[str]:
    return [m.group(0) for m in DOTTED.finditer(text)]


def test_every_dotted_project_name_in_prose_resolves():
    stale = []
    for path in python_files(*PACKAGES, "tests"):
        for line, text in prose_of(path):
            stale += [f"{path.relative_to(ROOT)}:{line}: {name}" for name in dotted_names_in(text) if not resolves(name)]
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "params.yaml", ROOT / "README.md"]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            stale += [f"{path.relative_to(ROOT)}:{number}: {name}" for name in dotted_names_in(line) if not resolves(name)]
    assert stale == [], "names in prose that no longer resolve:\n" + "\n".join(stale)


def test_the_resolver_tells_a_moved_name_from_a_present_one():
    assert resolves("analysis.text.lines") and resolves("analysis.text.lines.split_lines")
    assert resolves("analysis.text.lines.Source.of") and resolves("kernels_profile.runtime")
    assert not resolves("analysis.jsonl") and not resolves("analysis.layout.POOLED")
    assert not resolves("analysis.text.lines.Source.nothing") and not resolves("kernels_profile.runtime.checkpoints.load_model")
    assert dotted_names_in("see analysis.bounds.case_costs. Then analysis/data/x.json") == ["analysis.bounds.case_costs"]


def layout_rows(section: str) -> dict[str, str]:
    """docs/layout.md's table rows of one package's section: `where` -> what it owns."""
    text = (ROOT / "docs/layout.md").read_text(encoding="utf-8")
    part = text.split(f"## `{section}/`", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| (.*) \|$", part, flags=re.MULTILINE)}


def test_docs_layout_names_every_module():
    missing = []
    for package in PACKAGES:
        rows = layout_rows(package)
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT / package).parts
            if path.name == "__init__.py" and len(parts) > 1:
                continue
            if len(parts) == 1:
                named = path.name in rows or path.name == "__init__.py"
            else:
                named = f"`{path.stem}`" in rows.get(f"{parts[0]}/", "")
            if not named:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == [], "modules docs/layout.md does not name (in their folder's row):\n" + "\n".join(missing)


def test_no_production_comment_or_docstring_points_at_a_tracker_id():
    found = []
    for path in python_files(*PACKAGES):
        for line, text in prose_of(path):
            found += [f"{path.relative_to(ROOT)}:{line}: {m.group(0)}" for m in TRACKER.finditer(text)]
    assert found == [], "tracker ids in production prose (write the reason in words):\n" + "\n".join(found)


def test_the_tracker_pattern_catches_the_spellings_it_names():
    for spelling in ("(issue 41)", "Issue 15's benchmark", "issue 39, H4", "review D7", "(H4)", "(N15)", "(P8)", "(C5, L4)", "L2: a case id",
                     "(N: section 4)", "round 5"):
        assert TRACKER.search(spelling), spelling
    for prose in ("a 4-byte UTF-8 character", "Qwen2.5-7B on an H200 (H200 timings)", "SHA-256", "the k=64 draft"):
        assert not TRACKER.search(prose), prose
