"""No quick test asserts a wall-clock time (B4 of the UX review: the README's quick subset failed once on a busy
machine, where `time.perf_counter() - started < 5` took 8 s). A test may time two sizes of one input or two
inputs of one size and assert their ratio (scaling), or be marked slow; an assert that reads a clock itself, or a
name a clock difference was stored in, is refused."""

from __future__ import annotations

import ast
from pathlib import Path

from fixtures import ROOT

CLOCKS = {"perf_counter", "monotonic", "time", "process_time", "perf_counter_ns", "monotonic_ns", "time_ns"}


def _reads_clock(node: ast.AST) -> bool:
    """The expression calls time.<clock>() (or a bare perf_counter())."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in CLOCKS and isinstance(func.value, ast.Name) \
                    and func.value.id == "time":
                return True
            if isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}:
                return True
    return False


def _slow(function: ast.FunctionDef) -> bool:
    return any("slow" in ast.unparse(d) for d in function.decorator_list)


def _module_slow(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
               and "slow" in ast.unparse(n.value) for n in tree.body)


def wall_clock_asserts(path: Path) -> list[str]:
    """`file:line` of each assert in a quick test function that compares a clock reading (directly, or through a
    name assigned from one in the same function) with anything."""
    tree = ast.parse(path.read_text())
    if _module_slow(tree):
        return []
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or not function.name.startswith("test") or _slow(function):
            continue
        timed = {t.id for node in ast.walk(function) if isinstance(node, ast.Assign) and _reads_clock(node.value)
                 for t in node.targets if isinstance(t, ast.Name)}
        timed -= {"started", "start", "t0", "deadline"}  # a clock's start: only a difference with it is a duration
        for node in ast.walk(function):
            if not isinstance(node, ast.Assert) or not isinstance(node.test, (ast.Compare, ast.BoolOp)):
                continue
            compares = [c for c in ast.walk(node.test) if isinstance(c, ast.Compare)]
            names = {n.id for c in compares for n in ast.walk(c) if isinstance(n, ast.Name)}
            if any(_reads_clock(c) for c in compares) or names & timed:
                found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno}")
    return found


def test_no_quick_test_asserts_a_wall_clock_time():
    offenders = [hit for path in sorted((ROOT / "tests").rglob("test_*.py")) for hit in wall_clock_asserts(path)]
    assert offenders == [], "assert a ratio of two timings, or mark the test slow"


def test_the_check_finds_the_forms_it_refuses(tmp_path):
    """The check itself: a clock in the assert, and a stored duration, are found; a ratio of two timed calls and a
    slow test are not."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import time\nimport pytest\n\n"
        "def test_direct():\n    started = time.perf_counter()\n    assert time.perf_counter() - started < 5\n\n"
        "def test_stored():\n    started = time.perf_counter()\n    took = time.perf_counter() - started\n"
        "    assert took < 20\n\n"
        "def test_ratio():\n    small, large = fastest(1), fastest(4)\n    assert large / small < 9\n\n"
        "@pytest.mark.slow\ndef test_slow():\n    started = time.perf_counter()\n"
        "    assert time.perf_counter() - started < 5\n")
    assert [hit.rsplit(":", 1)[1] for hit in wall_clock_asserts(probe)] == ["6", "11"]
