"""Which project source files a stage's code can reach, for checking dvc.yaml's declared deps.

Every `import` (module level or inside a function) of a project module is followed, so a stage
depends on each file it could execute; a package's __init__ counts as imported with it. A stage's code deps
leave out the empty files (a bare __init__.py: no code to change, and DVC warns on every empty dep). A module that
discovers the modules of a package at run time (the claims engine's rule modules) says so with a
module-level `RULE_PACKAGE = "<package>"`, and every module of that package counts as imported by it.
`copydecode depgraph` rewrites dvc.yaml's code deps from it (`sync_dvc_yaml`), and the data deps that params name
(`PARAMS_DATA`: the kernel fit's raw timing files, their environment sidecars and the device-time probes of
params kernels.fit.raw and kernel.device_time), so a new kernel source is a params entry and its files.
"""

from __future__ import annotations

import ast
from pathlib import Path

from analysis.latency.device_time import device_time_files
from analysis.latency.sources import raw_sources
from analysis.pipeline.commands import STAGES
from analysis.pipeline.io import write_text

PACKAGES = ("analysis", "kernels_profile")
TIMING_FILES = (".parquet", ".jsonl", ".environment.json")  # what a params-named kernel source's files end with


def kernel_source_files(params: dict) -> list[str]:
    """Every file params name as a kernel source's measurement: each kernels.fit.raw timing file with its
    environment sidecar (the profiler writes `<stem>.environment.json` beside it), each kernel.device_time probe."""
    out = []
    for raw in raw_sources(params):
        out += [str(raw.path), str(raw.path.with_suffix(".environment.json"))]
    out += [str(probe.path) for probe in device_time_files(params)]
    return list(dict.fromkeys(out))


# stage -> the data deps its params name; on a rewrite they replace the stage's timing-file deps (TIMING_FILES)
PARAMS_DATA = {"kernels_fit": kernel_source_files}


def module_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(tree: ast.AST, current: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the current package
                base = current.rsplit(".", node.level)[0]
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return {n for n in names if n.split(".")[0] in PACKAGES}


def _discovered(tree: ast.Module, root: Path) -> set[str]:
    """The modules of the package a module names in a module-level `RULE_PACKAGE = "<package>"`."""
    out: set[str] = set()
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "RULE_PACKAGE" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            package = node.value.value
            folder = root.joinpath(*package.split("."))
            out |= {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    return out


def closure(module: str, root: Path = Path(".")) -> list[str]:
    """Sorted repository-relative paths of every project file reachable from `module`."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name, root)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:k]) for k in range(1, len(parts))]  # parent packages run their __init__
        tree = ast.parse(path.read_text())
        todo += sorted(_imported(tree, name) | _discovered(tree, root))
    return sorted(str(p.relative_to(root)) for p in seen.values())


def notebook_modules(root: Path = Path(".")) -> set[str]:
    """Project modules the papermill templates import (the reports stage runs them)."""
    import json

    modules: set[str] = set()
    for notebook in sorted((root / "notebooks").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] == "code":
                modules |= _imported(ast.parse("".join(cell["source"])), "notebooks")
    return modules


def stage_code_deps(command: str, module: str, root: Path = Path(".")) -> list[str]:
    """Every project file the stage behind `command` can run (for `reports`, its notebooks' imports too), less
    the empty ones: an empty file (a package's bare __init__.py) has no code to change, and DVC warns "'...' is
    empty." for each empty dep on every `dvc repro`. Once such a file gets code, it is a dep again (the next
    `copydecode depgraph`; tests/pipeline/test_dvc_deps.py fails until then)."""
    files = set(closure(module, root))
    if command == "reports":
        for imported in notebook_modules(root):
            files |= set(closure(imported, root))
    return sorted(f for f in files if (root / f).stat().st_size > 0)


def params_data_deps(name: str, data: list, params: dict | None) -> list:
    """A stage's data deps with those its params name written from params (`PARAMS_DATA`): the timing files
    listed before are replaced by the ones params list now, in params order, ahead of the stage's other data."""
    rule = PARAMS_DATA.get(name)
    if rule is None or params is None:
        return data
    kept = [d for d in data if not str(d).endswith(TIMING_FILES)]
    return rule(params) + kept


def sync_dvc_yaml(root: Path = Path(".")) -> list[str]:
    """Rewrite the code deps (*.py) of every stage in dvc.yaml from the import graph, and the data deps params
    name (`params_data_deps`, from the root's params.yaml when there is one); keep the rest. Returns the stages
    whose deps changed."""
    import yaml

    path = root / "dvc.yaml"
    text = path.read_text()
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    spec = yaml.safe_load(text)
    params_file = root / "params.yaml"
    params = yaml.safe_load(params_file.read_text()) if params_file.is_file() else None
    changed = []
    for name, stage in spec["stages"].items():
        command = stage["cmd"].removeprefix("copydecode ").strip()
        data = params_data_deps(name, [d for d in stage.get("deps", []) if not str(d).endswith(".py")], params)
        deps = data + stage_code_deps(command, STAGES[command], root)
        if deps != stage.get("deps"):
            changed.append(name)
        stage["deps"] = deps

    write_text(header + yaml.safe_dump(spec, sort_keys=False, width=120), path)  # atomic: dvc.yaml is tracked
    return changed


# `copydecode depgraph`: its help line and what it reads and writes (the CLI's --help)
HELP = "rewrite every dvc.yaml stage's code deps (*.py) from the import graph, and the data deps params name"
READS_WRITES = "reads the package sources and params.yaml (kernels.fit.raw, kernel.device_time); it writes dvc.yaml"
READS_PARAMS = False  # the import graph has no settings: --params and --set are refused, not ignored


def add_arguments(parser) -> None:
    """`copydecode depgraph` takes no options of its own."""


def command(args) -> int:
    """Rewrite dvc.yaml's code deps from the import graph (and the data deps params name); say which stages changed."""
    print("dvc.yaml code deps updated for:", ", ".join(sync_dvc_yaml()) or "nothing")
    return 0
