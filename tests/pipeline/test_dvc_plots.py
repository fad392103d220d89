"""`dvc plots show` renders every figure dvc.yaml declares, offline: the plots are the stages' own
SVGs declared as image plots, which dvc copies beside its index.html, and `dvc plots diff REV` shows each
revision's image side by side. No data (CSV) plot: DVC draws those with vega from a CDN, blank without a
network (B7), and its one-colour-per-revision scatter of mixed series was unreadable online too. The pages
are opened in headless Chromium with the network off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures import ROOT, Browser, chromium_binary, page_problems

pytestmark = pytest.mark.slow

PROBE = """(() => {
  const imgs = [...document.querySelectorAll('img')];
  return {
    shown: imgs.filter(i => i.complete && i.naturalWidth > 0).map(i => i.getAttribute('src')),
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    scripts: [...document.querySelectorAll('script[src]')].map(s => s.src),
  };
})()"""


def _all_plots(spec: dict) -> list:
    plots = list(spec.get("plots", []))
    for stage in spec["stages"].values():
        plots += list(stage.get("plots", []))
    return plots


def declared_plots() -> list[str]:
    """The image plots (SVG/PNG a stage writes), shown offline."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    names = [next(iter(p)) if isinstance(p, dict) else p for p in _all_plots(spec)]
    return [p for p in names if p.endswith((".svg", ".png"))]


def data_plots() -> dict[str, dict]:
    """The CSV-backed plots (id -> definition): none may be declared (see the module docstring)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    return {next(iter(p)): p[next(iter(p))] for p in _all_plots(spec)
            if isinstance(p, dict) and isinstance(p[next(iter(p))], dict) and "y" in p[next(iter(p))]}


def test_every_declared_plot_is_a_figure_a_stage_writes():
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    outs = {next(iter(o)) if isinstance(o, dict) else o for s in spec["stages"].values() for o in s.get("outs", [])}
    plots = declared_plots()
    assert plots and set(plots) <= outs
    names = [next(iter(p)) if isinstance(p, dict) else p for p in _all_plots(spec)]
    assert len(names) == len(plots) + len(data_plots()), names  # every plot is an image or CSV-backed
    for wanted in ("kernel_speedup", "bounds", "span_histogram_line", "span_histogram_token", "perturbation", "pilot"):
        assert any(wanted in Path(p).stem for p in plots), wanted


def test_no_plot_needs_a_network():
    assert data_plots() == {}, "a data plot loads vega from a CDN: blank offline; declare the stage's image instead"


def _dvc(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    if not shutil.which("dvc") and not (Path(sys.executable).parent / "dvc").exists():
        pytest.skip("dvc not installed")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plots") / "dvc_plots"
    _dvc("plots", "show", "-o", str(out))
    return out / "index.html"


def _offline_dom(page: Path) -> tuple[dict, dict]:
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("COPYDECODE_REQUIRE_BROWSER") == "1":
            pytest.fail("COPYDECODE_REQUIRE_BROWSER=1 but no chromium binary on PATH")
        pytest.skip("no chromium binary on PATH (run .ci/browser.sh)")
    browser = Browser(binary, offline=True)
    try:
        url = page.resolve().as_uri()
        problems = page_problems(browser.open(url), url)
        dom = browser.evaluate(PROBE)
    finally:
        browser.close()
    return problems, dom


def test_dvc_plots_page_shows_every_plot_with_the_network_off(page):
    problems, dom = _offline_dom(page)
    folder = page.parent.resolve().as_uri()
    assert [r for r in problems["outside requests"] if not r.startswith(folder + "/")] == [], problems
    assert dom["broken"] == [] and dom["scripts"] == [], dom
    assert len(dom["shown"]) == len(declared_plots()), dom["shown"]
    for plot in declared_plots():
        assert any(Path(plot).stem in src for src in dom["shown"]), plot


def test_dvc_plots_diff_shows_both_revisions_side_by_side_offline(tmp_path):
    """`dvc plots diff HEAD` (the README's experiments workflow): each figure once per revision, offline."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("no git history")
    head_plots = yaml.safe_load(subprocess.run(["git", "show", "HEAD:dvc.yaml"], cwd=ROOT, capture_output=True,
                                               text=True).stdout or "{}")
    assert not any(isinstance(p, dict) for p in head_plots.get("plots", [])), \
        "HEAD's dvc.yaml declares data plots: every plot is an image file now"
    out = tmp_path / "diff"
    _dvc("plots", "diff", "HEAD", "-o", str(out))
    problems, dom = _offline_dom(out / "index.html")
    assert dom["broken"] == [] and dom["scripts"] == [], dom
    for plot in declared_plots():
        revisions = [src for src in dom["shown"] if src.endswith("_" + plot.replace("/", "_"))]
        assert len(revisions) == 2, (plot, dom["shown"])  # workspace and HEAD
