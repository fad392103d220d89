"""`dvc plots show` renders every figure dvc.yaml declares, offline: the plots are the stages' own
SVGs declared as image plots, which dvc copies beside its index.html (data plots would load vega
from a CDN and stay blank without a network). Opened in headless Chromium like the reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

pytestmark = pytest.mark.slow

PROBE = """(() => {
  const imgs = [...document.querySelectorAll('img')];
  return {
    shown: imgs.filter(i => i.complete && i.naturalWidth > 0).map(i => i.getAttribute('src')),
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    scripts: [...document.querySelectorAll('script[src]')].map(s => s.src),
  };
})()"""


def declared_plots() -> list[str]:
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    plots = [next(iter(p)) if isinstance(p, dict) else p for p in spec.get("plots", [])]
    for stage in spec["stages"].values():
        plots += [next(iter(p)) if isinstance(p, dict) else p for p in stage.get("plots", [])]
    return plots


def test_every_declared_plot_is_a_figure_a_stage_writes():
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    outs = {next(iter(o)) if isinstance(o, dict) else o for s in spec["stages"].values() for o in s.get("outs", [])}
    plots = declared_plots()
    assert plots and all(p.endswith((".svg", ".png")) for p in plots), plots  # image plots only: no CDN template
    assert set(plots) <= outs
    for wanted in ("kernel_speedup", "bounds", "span_histogram_line", "span_histogram_token", "perturbation", "pilot"):
        assert any(wanted in Path(p).stem for p in plots), wanted


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    if not shutil.which("dvc") and not (Path(sys.executable).parent / "dvc").exists():
        pytest.skip("dvc not installed")
    out = tmp_path_factory.mktemp("plots") / "dvc_plots"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return out / "index.html"


def test_dvc_plots_page_shows_every_plot_offline_in_chromium(page):
    from test_browser import Browser, _chromium, _problems

    binary = _chromium()
    if binary is None:
        if os.environ.get("COPYDECODE_REQUIRE_BROWSER") == "1":
            pytest.fail("COPYDECODE_REQUIRE_BROWSER=1 but no chromium binary on PATH")
        pytest.skip("no chromium binary on PATH (run .ci/browser.sh)")
    text = page.read_text()
    assert "http://" not in text and "https://" not in text
    browser = Browser(binary)
    try:
        url = page.resolve().as_uri()
        problems = _problems(browser.open(url), url)
        dom = browser.evaluate(PROBE)
    finally:
        browser.close()
    folder = page.parent.resolve().as_uri()
    outside = [r for r in problems["outside requests"] if not r.startswith(folder + "/")]
    assert outside == [] and problems["console errors"] == [], problems
    assert dom["broken"] == [] and dom["scripts"] == [], dom
    assert len(dom["shown"]) == len(declared_plots()), dom["shown"]
    for plot in declared_plots():
        assert any(Path(plot).stem in src for src in dom["shown"]), plot
