"""The package's shape as rules: no stage module imports another stage module, and no other module
imports a stage (what stages share lives outside `stages/`: analysis.parallel.progress, analysis.parallel.tables,
kernels_profile.pilot.settings, analysis.oracle.settings); the CLI's dispatch, by name, is the one way in. No module is
over 600 lines but the two named (docs/layout.md)."""

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
