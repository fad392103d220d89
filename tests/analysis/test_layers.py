"""The layers of analysis/ as rules on the import graph (analysis.tools.depgraph.closure follows every import,
module level or in a function): the presentation is one package, analysis/present/, with an empty
__init__; it reaches no stage and no model code; the domain modules at the top reach no HTML."""

from __future__ import annotations

from pathlib import Path

from fixtures import ROOT

from analysis.tools.depgraph import closure

PRESENT = ROOT / "analysis" / "present"
HTML_MODULES = ("analysis/present/pages.py", "analysis/present/notebook.py")  # page blocks; the notebooks' facade
TOOLS_AT_TOP = ("cli",)  # the console script wires every command, presentation included
# the folders above the domain: presentation, the stages that write pages, the tools and maintenance commands
ABOVE_DOMAIN = ("present", "stages", "tools")


def _modules(folder: Path, package: str) -> list[str]:
    return sorted(f"{package}.{path.stem}" for path in folder.glob("*.py") if path.stem != "__init__")


def test_present_is_a_package_with_an_empty_init():
    assert (PRESENT / "__init__.py").is_file()
    # a facade in __init__ would make every stage that draws a chart depend on every view (dvc deps)
    assert (PRESENT / "__init__.py").read_text().strip() == ""
    assert {"pages", "explore", "headline", "reports", "readme"} <= {p.stem for p in PRESENT.glob("*.py")}


def test_no_presentation_module_reaches_a_stage_or_model_code():
    reached = {module: [path for path in closure(module, ROOT) if path.startswith(("analysis/stages/", "kernels_profile/"))]
               for module in _modules(PRESENT, "analysis.present")}
    assert not {module: paths for module, paths in reached.items() if paths}


def _domain_modules() -> list[str]:
    top = [m for m in _modules(ROOT / "analysis", "analysis") if m.rsplit(".", 1)[1] not in TOOLS_AT_TOP]
    folders = [f for f in sorted((ROOT / "analysis").iterdir())
               if (f / "__init__.py").is_file() and f.name not in ABOVE_DOMAIN]
    return top + [m for folder in folders for m in _modules(folder, f"analysis.{folder.name}")]


def test_no_claims_module_reaches_the_presentation():
    """The claims stand on analysis/results/ (stage outputs read back), never on analysis/present/."""
    claims = _modules(ROOT / "analysis" / "claims", "analysis.claims")
    assert {"analysis.claims.engine", "analysis.claims.verdict", "analysis.claims.kernel"} <= set(claims)
    reached = {module: [path for path in closure(module, ROOT) if path.startswith("analysis/present/")]
               for module in claims}
    assert not {module: paths for module, paths in reached.items() if paths}


def test_no_domain_module_reaches_html():
    assert all((ROOT / path).is_file() for path in HTML_MODULES)
    top = _domain_modules()
    assert {"analysis.bounds", "analysis.grammar.fsm", "analysis.latency.model"} <= set(top)
    reached = {module: [path for path in closure(module, ROOT) if path in HTML_MODULES] for module in top}
    assert not {module: paths for module, paths in reached.items() if paths}
