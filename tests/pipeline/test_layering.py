"""The package's shape as rules: no stage module imports another stage module, and no other module
imports a stage (what stages share lives outside `stages/`: analysis.parallel.progress, analysis.parallel.tables,
kernels_profile.pilot.settings, analysis.oracle.settings); the CLI's dispatch, by name, is the one way in. No module is
over 600 lines but the one named (docs/layout.md). Project modules are imported at the top of the file, and no
two modules import each other through any path (in-function imports counted)."""

import ast

from fixtures import ROOT

PACKAGES = ("analysis", "kernels_profile")
STAGE_PACKAGES = ("analysis.stages", "kernels_profile.stages")
DISPATCH: set[str] = set()  # analysis.cli runs a stage by its name in analysis.pipeline.commands: it imports none
MAX_LINES = 600
# Over MAX_LINES by decision: the grammar automaton is one job that reads best in one file.
LONG_BY_DECISION = {"analysis/grammar/fsm.py"}


def module_name(path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def is_stage(module: str) -> bool:
    return any(module.startswith(f"{p}.") for p in STAGE_PACKAGES)


def imported(path) -> set[str]:
    """Every module `path` imports (at the top or inside a function), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def stage_imports() -> dict[str, list[str]]:
    """{file: the stage modules it imports} over both packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            stages = sorted(m for m in imported(path) if is_stage(m) and m != module_name(path))
            if stages:
                out[str(path.relative_to(ROOT))] = stages
    return out


def test_no_stage_module_imports_another_stage_module():
    offenders = {f: m for f, m in stage_imports().items() if is_stage(module_name(ROOT / f))}
    assert not offenders, f"stage modules importing stage modules (move what they share out of stages/): {offenders}"


def test_only_the_cli_dispatch_imports_stage_modules():
    others = {f: m for f, m in stage_imports().items()
              if not is_stage(module_name(ROOT / f)) and f not in DISPATCH}
    assert not others, f"modules importing stage modules (move what they use into its domain package): {others}"


def test_no_module_is_over_600_lines_but_the_three_named():
    long = {str(p.relative_to(ROOT)): n for package in PACKAGES for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= LONG_BY_DECISION, f"modules over {MAX_LINES} lines: {long}"


# In-function imports of project modules, each with why (none today): the project's modules import no
# torch, transformers, nbconvert or llguidance at module level, so importing one inside a function buys no
# start-up time and hides an arrow from the import graph's readers.
IN_FUNCTION = {}


def _in_function_project_imports(path) -> list[str]:
    found = []
    for func in ast.walk(ast.parse(path.read_text())):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
                found += [f"{func.name}: {n}" for n in names if n.split(".")[0] in PACKAGES]
    return sorted(set(found))


def test_project_modules_are_imported_at_the_top_of_the_file():
    hidden = {str(p.relative_to(ROOT)): found for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
              if (found := _in_function_project_imports(p)) and str(p.relative_to(ROOT)) not in IN_FUNCTION}
    assert not hidden, f"project imports inside functions (move them to the top of the file): {hidden}"


def test_no_two_modules_import_each_other_through_any_path():
    graph = {module_name(p): {m for m in imported(p) if m.split(".")[0] in PACKAGES}
             for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    known = set(graph)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    edges = {m: {r for n in targets if (r := resolve(n)) and r != m} for m, targets in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def cycle_from(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n] if n in path else [m, n]
            if n not in state and (found := cycle_from(n, path + [n])):
                return found
        state[m] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = cycle_from(start, [start])
            assert found is None, f"import cycle: {' -> '.join(found)}"
