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
    """The CSV-backed plots (id -> definition), which `dvc plots diff` overlays across revisions."""
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


def test_the_data_plots_are_csv_outputs_with_their_columns():
    """`dvc plots diff REV` overlays revisions only for data plots: each reads a CSV a stage writes,
    whose header holds the plot's x and y columns."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    outs = {next(iter(o)) if isinstance(o, dict) else o for s in spec["stages"].values() for o in s.get("outs", [])}
    plots = data_plots()
    assert {"kernel_speedup_plot.csv", "perturbation_plot.csv"} <= {Path(f).name for d in plots.values() for f in d["y"]}
    for name, plot in plots.items():
        for csv, column in plot["y"].items():
            assert csv.endswith(".csv") and csv in outs, (name, csv)
            header = (ROOT / csv).read_text().splitlines()[0].split(",")
            assert plot["x"] in header and column in header, (name, header)


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
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("COPYDECODE_REQUIRE_BROWSER") == "1":
            pytest.fail("COPYDECODE_REQUIRE_BROWSER=1 but no chromium binary on PATH")
        pytest.skip("no chromium binary on PATH (run .ci/browser.sh)")
    # the CSV-backed data plots load vega from its CDN (blank offline); the image plots need nothing outside
    cdn = ("https://cdn.jsdelivr.net/", "https://unpkg.com/")
    browser = Browser(binary)
    try:
        url = page.resolve().as_uri()
        problems = page_problems(browser.open(url), url)
        dom = browser.evaluate(PROBE)
    finally:
        browser.close()
    folder = page.parent.resolve().as_uri()
    outside = [r for r in problems["outside requests"] if not r.startswith((folder + "/", *cdn))]
    assert outside == [], problems
    assert dom["broken"] == [] and all(src.startswith(cdn) for src in dom["scripts"]), dom
    assert len(dom["shown"]) == len(declared_plots()), dom["shown"]
    for plot in declared_plots():
        assert any(Path(plot).stem in src for src in dom["shown"]), plot
