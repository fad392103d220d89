"""Stale text (issue 41): kernels_profile/decode/maskbench.py called llguidance "optional" although pyproject.toml
declares it a dependency. No module calls a declared dependency optional."""

from __future__ import annotations

import re
import tomllib

from fixtures import ROOT


def declared() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]]


def test_no_module_calls_a_declared_dependency_optional():
    names = declared()
    assert "llguidance" in names and "peft" in names
    said = []
    for path in sorted([*ROOT.glob("analysis/**/*.py"), *ROOT.glob("kernels_profile/**/*.py")]):
        text = " ".join(path.read_text().split())
        for name in names:
            if re.search(rf"\b{re.escape(name)}\b (is|are) (an )?optional\b", text, flags=re.IGNORECASE):
                said.append(f"{path.relative_to(ROOT)}: {name}")
    assert not said, f"a declared dependency called optional: {said}"
