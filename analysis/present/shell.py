"""The page shell every rendered report, the index and the compare page share: the inline stylesheet, the
document around a body, and the check that nothing in it loads from outside the file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import ParamsError
from analysis.present.pages import esc

PAGE_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --rule: #d0d7de; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
       font: 15px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 26px; margin: 8px 0 12px; } h2 { font-size: 20px; margin: 32px 0 8px; border-bottom: 1px solid var(--rule); }
h3 { font-size: 16px; margin: 20px 0 6px; }
a { color: var(--accent); }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
pre, .cd-pre { background: #f6f8fa; padding: 10px 12px; border-radius: 6px; white-space: pre-wrap; word-break: break-word; }
svg, img { max-width: 100%; height: auto; }
.output_subarea, .output_area, .output { max-width: 100%; overflow-x: visible; }
.cell { margin: 6px 0; }
.gt_table { margin-left: 0 !important; }
.cd-lead { background: #f3f7fc; border-left: 4px solid var(--accent); padding: 10px 16px; margin: 8px 0 18px; }
.cd-lead p { margin: 0 0 8px; }
.cd-cards { display: flex; flex-wrap: wrap; gap: 12px; }
.cd-card { background: #fff; border: 1px solid var(--rule); border-radius: 6px; padding: 6px 12px; min-width: 150px; }
.cd-value { font-size: 22px; font-weight: 600; } .cd-label { color: var(--muted); font-size: 13px; }
.cd-provenance { margin-top: 36px; color: var(--muted); font-size: 13px; }
.cd-prov th { text-align: left; padding: 2px 16px 2px 0; font-weight: 600; } .cd-prov td { padding: 2px 0; word-break: break-all; }
.cd-copy { background: #c8f7c5; } .cd-gen { background: #ffd59e; }
.cd-figures { display: grid; grid-template-columns: 1fr; gap: 20px; }
.cd-note { color: var(--muted); font-size: 13px; }
.cd-figures figure { margin: 0; } .cd-figures figcaption { color: var(--muted); font-size: 13px; }
.cd-key { margin: 0 0 14px; } .cd-key figcaption { color: var(--muted); font-size: 13px; }
.cd-links { columns: 3; } .cd-links li { break-inside: avoid; }
.cd-files { list-style: none; padding-left: 0; margin: 2px 0 10px; columns: 2; } .cd-files li { break-inside: avoid; }
.cd-verdict-reproduced { color: #116329; font-weight: 600; } .cd-verdict-differs { color: #9a6700; font-weight: 600; }
.cd-verdict-not-run { color: var(--muted); font-weight: 600; }
nav.cd-nav { font-size: 13px; color: var(--muted); }
"""


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    path: Path


_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|srcset|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]+)"""
    r"""|(?:url\(\s*["']?\s*(?:https?:)?//[^)]+\))|(?:@import\s+["']?(?:url\()?\s*["']?(?:https?:)?//[^"';)]+)""",
    re.IGNORECASE,
)


def external_references(text: str) -> list[str]:
    """Every attribute or stylesheet reference in `text` that would load something from outside the
    page. XML namespace declarations (xmlns=...) name, they do not load."""
    return [m.group(0) for m in _EXTERNAL.finditer(text)]


def page(title: str, body: str, nav: str = "") -> str:
    document = (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{PAGE_CSS}</style></head>"
        f"<body><main>{nav}{body}</main></body></html>\n"
    )
    outside = external_references(document)
    if outside:
        raise ParamsError(f"page {title!r} would load from outside itself: {outside[:3]}")
    return document


def stale_banner(reasons: list[str]) -> str:
    """The warning a page built from another corpus's outputs carries at its top."""
    if not reasons:
        return ""
    return ("<div class='cd-lead cd-stale'><p><strong>stale: built from another corpus.</strong> "
            + " ".join(f"{esc(r)}." for r in reasons) + "</p></div>")
