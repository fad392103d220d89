"""A real browser opens every rendered report and the index.

Headless Chromium (Debian's `chromium`; `.ci/browser.sh` installs it) is driven over the DevTools
protocol with a minimal stdlib websocket client (in tests/fixtures.py, shared with test_dvc_plots), so
the test needs no extra Python package. For each page it records every network request, console message and uncaught exception while the page loads,
then reads the DOM: each page must load nothing but itself (data: URIs are inside the file), log no
error, show its tables and charts (<table>, <svg>, <img> that decoded), and fit a 1280 px laptop
window without horizontal scrolling. Screenshots of the index and the summary go to
reports/screenshots/ for the closing note.

Without a chromium binary the test skips, unless COPYDECODE_REQUIRE_BROWSER=1 (set by .ci/browser.sh).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixtures import ROOT, Browser, chromium_binary, page_problems

from analysis.layout import HTML, INDEX, REPORTS

pytestmark = pytest.mark.browser  # headless Chromium over the rendered reports

SCREENSHOTS = REPORTS / "screenshots"
# Charts each report must show (inline <svg>, or an <img> that decoded: nbconvert writes altair's SVG
# output as a data: URI); every page shows at least one table.
CHARTS = {"kernel": 1, "corpora": 3, "coverage": 2, "bounds": 1, "perturbation": 1, "e2e": 1}
INDEX_FIGURES = 4

DOM_PROBE = """(() => {
  const main = document.querySelector('main') || document.body;
  const edge = main.getBoundingClientRect().right + 1;
  const visible = [...document.querySelectorAll('table, svg, img')].filter(e => !e.closest('svg') || e.tagName === 'svg');
  return {
    tables: document.querySelectorAll('table').length,
    charts: document.querySelectorAll('svg').length
            + [...document.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length,
    images: [...document.querySelectorAll('img')].filter(i => i.complete && i.naturalWidth > 0).length,
    broken: [...document.querySelectorAll('img')].filter(i => !(i.complete && i.naturalWidth > 0)).length,
    overflowing: visible.filter(e => e.getBoundingClientRect().right > edge).map(e => e.tagName + ' ' + Math.round(e.getBoundingClientRect().width)),
    scroll: document.documentElement.scrollWidth, width: window.innerWidth,
    prompts: /\\b(In|Out)\\s*\\[\\s*\\d*\\s*\\]:/.test(document.body.innerText),
  };
})()"""


def _pages() -> list[Path]:
    pages = sorted((ROOT / HTML).glob("*.html")) + [ROOT / INDEX]
    missing = [p for p in pages if not p.is_file()]
    assert not missing and len(pages) > 1, f"rendered reports missing: {missing or ROOT / HTML}; run `copydecode reports`"
    return pages


@pytest.fixture(scope="module")
def browser():
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("COPYDECODE_REQUIRE_BROWSER") == "1":
            pytest.fail("COPYDECODE_REQUIRE_BROWSER=1 but no chromium binary on PATH")
        pytest.skip("no chromium binary on PATH (Debian: apt-get install -y chromium, or run .ci/browser.sh)")
    b = Browser(binary)
    yield b
    b.close()


def test_every_report_and_the_index_render_offline_without_errors(browser):
    failures = {}
    for path in _pages():
        url = path.resolve().as_uri()
        events = browser.open(url)
        problems = page_problems(events, url)
        dom = browser.evaluate(DOM_PROBE)
        expected_charts = CHARTS.get(path.stem, 0)
        checks = {
            **problems,
            "no table": [] if dom["tables"] >= 1 else ["0 tables"],
            "charts": [] if dom["charts"] >= expected_charts else [f"{dom['charts']} charts, expected {expected_charts}"],
            "broken images": [f"{dom['broken']} images did not decode"] if dom["broken"] else [],
            "wider than the window": dom["overflowing"] + ([f"page {dom['scroll']} px wide"] if dom["scroll"] > dom["width"] else []),
            "notebook prompts": ["In [ ]:/Out[ ]: shown"] if dom["prompts"] else [],
        }
        if path.name == INDEX.name and dom["images"] < INDEX_FIGURES:
            checks["index figures"] = [f"{dom['images']} inline figures, expected {INDEX_FIGURES}"]
        bad = {k: v for k, v in checks.items() if v}
        if bad:
            failures[str(path.relative_to(ROOT))] = bad
    assert not failures, json.dumps(failures, indent=1)


def test_the_index_first_screen_shows_the_decision_block_with_numbers_and_chips(browser):
    """The done-when of the UX review's 30-second test: in the index's first 1,000 px the block "Against what you
    would run instead" stands with its numbers and chips (read in the DOM, inside that height), and the screenshot
    of those 1,000 px is written to reports/screenshots/index_top.png."""
    browser.open((ROOT / INDEX).resolve().as_uri())
    seen = browser.evaluate("""(() => {
      const block = document.querySelector('#decision');
      if (!block) return null;
      const top = y => y.getBoundingClientRect().top + window.scrollY;
      const chips = [...block.querySelectorAll('.cd-dchip')].filter(c => top(c) < 1000);
      const cells = [...block.querySelectorAll('td.cd-num')].filter(c => top(c) < 1000 && /\\d\\.\\d\\dx \\[/.test(c.innerText));
      return {top: top(block), chips: chips.length, numbers: cells.length,
              words: [...new Set(chips.map(c => c.innerText))]};
    })()""")
    assert seen is not None, "the index has no decision block"
    assert seen["top"] < 300 and seen["chips"] >= 5 and seen["numbers"] >= 5, seen
    target = ROOT / SCREENSHOTS / "index_top.png"
    browser.screenshot(target, first_px=1000)
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, target


def test_screenshots_of_the_index_and_the_summary(browser):
    for path, name in ((ROOT / INDEX, "index.png"), (ROOT / HTML / "summary.html", "summary.png")):
        browser.open(path.resolve().as_uri())
        target = ROOT / SCREENSHOTS / name
        browser.screenshot(target)
        data = target.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, target


def test_the_probe_sees_outside_requests_console_errors_and_wide_tables(browser, tmp_path):
    """The checks above can fail: a page that loads a CDN script, logs an error and holds a table
    wider than the window (inside a scrolling wrapper, as great_tables makes them) is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><head><script src='https://cdn.example.invalid/x.js'></script></head>"
                   "<body><main><script>console.error('boom')</script><div style='overflow-x:auto'>"
                   "<table style='width:3000px'><tr><td>x</td></tr></table></div></main></body></html>")
    url = bad.resolve().as_uri()
    problems = page_problems(browser.open(url), url)
    assert any("cdn.example.invalid" in r for r in problems["outside requests"])
    assert any("boom" in e for e in problems["console errors"])
    assert browser.evaluate(DOM_PROBE)["overflowing"]
