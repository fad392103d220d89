"""The index's first block, "Against what you would run instead": Copy-as-Decode's best deployable variant against
the fastest deployable rival at batch 1 (per corpus and pooled, under the judged kernel source) and at each
simulated load (per kernel source), and against what an engine measured where a claim gives measured decision
scopes, each with its interval, its basis and a decision chip; the prompt-lookup k at which the ranking flips; and
the decision charts. Everything shown is a decision scope of the claims (analysis.claims.decision): this module
reads `value`, `ci`, `decision`, `basis` and `detail` and decides nothing itself, so a new pricing rule or a new
engine claim changes the numbers, not this block."""

from __future__ import annotations

from pathlib import Path

from analysis.claims.decision import BATCH_1, COMPUTE_BOUND, DECISIONS, DEPENDS, FASTER, MEASURED, SLOWER, TIE, Flip
from analysis.claims.verdict import Claim, Scope
from analysis.layout import TABLES
from analysis.present import decisioncharts
from analysis.pooling import ALL_POOL
from analysis.present.pages import esc
from analysis.results.numbers import fmt_ci, fmt_int, fmt_x
from analysis.results.outputs import optional_table

TITLE = "Against what you would run instead"
DECISION_CLASSES = {FASTER: "faster", SLOWER: "slower", TIE: "tie", DEPENDS: "depends", COMPUTE_BOUND: "bound"}
CSS = """
.cd-decision { margin: 6px 0 14px; }
.cd-decision table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 2px 0 8px; }
.cd-decision th, .cd-decision td { border-bottom: 1px solid #e5e8eb; padding: 3px 6px; text-align: left; vertical-align: top; }
.cd-decision th { font-size: 12px; color: #59636e; font-weight: 600; }
.cd-decision td.cd-num { white-space: nowrap; font-variant-numeric: tabular-nums; }
.cd-decision h3 { font-size: 15px; margin: 10px 0 2px; }
.cd-decision p { margin: 2px 0 6px; font-size: 14px; }
.cd-dchip { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600; margin-left: 4px; }
.cd-dchip-faster { background: #dafbe1; color: #116329; } .cd-dchip-slower { background: #ffebe9; color: #a40e26; }
.cd-dchip-tie { background: #eaeef2; color: #424a53; } .cd-dchip-depends { background: #fbefff; color: #6e3aa3; }
.cd-dchip-bound { background: #fff8c5; color: #7d4e00; }
.cd-bchip { display: inline-block; border-radius: 4px; padding: 0 6px; font-size: 11px; color: #59636e;
            border: 1px solid #d0d7de; margin-left: 4px; }
"""


def decision_scopes(items: list[Claim]) -> list[Scope]:
    """Every decision scope of the claims, in claim order."""
    return [s for c in items for s in c.scopes if s.decision in DECISIONS and s.detail]


def batch_one(scopes: list[Scope], judged: bool = True) -> list[Scope]:
    """Batch-1 decisions under the judged source (`judged`), or the pooled ones under every other source."""
    return [s for s in scopes if s.detail.get("load") == BATCH_1 and bool(s.detail.get("judged")) == judged
            and s.basis != MEASURED]


def under_load(scopes: list[Scope]) -> dict[str, dict[int, Scope]]:
    """Kernel source -> concurrency -> its decision (simulated serving), in the claims' order."""
    out: dict[str, dict[int, Scope]] = {}
    for s in scopes:
        if s.detail.get("concurrency") is not None and s.basis != MEASURED:
            out.setdefault(f"{s.detail['kernel_source']} ({s.detail.get('basis_text', s.basis)})", {})[
                int(s.detail["concurrency"])] = s
    return out


def measured(scopes: list[Scope]) -> list[Scope]:
    """Decisions an engine measured (an engine stage's claim), shown only where a run wrote them."""
    return [s for s in scopes if s.basis == MEASURED]


def chip(decision: str) -> str:
    return f"<span class='cd-dchip cd-dchip-{DECISION_CLASSES.get(decision, 'tie')}'>{esc(decision)}</span>"


def basis_chip(basis: str | None) -> str:
    return f"<span class='cd-bchip'>{esc(basis or 'not recorded')}</span>"


def ratio_cell(s: Scope) -> str:
    """'0.53x [0.51, 0.56]' then the decision chip and the basis chip."""
    return (f"<td class='cd-num'>{esc(f'{s.value:.2f}x')} {esc(fmt_ci(*s.ci, digits=2))}{chip(s.decision)}"
            f"{basis_chip(s.basis)}</td>")


def batch_table(scopes: list[Scope]) -> str:
    widths = "".join(f"<col style='width:{w}%'>" for w in (13, 6, 30, 23, 28))
    head = (f"<colgroup>{widths}</colgroup><tr><th>where</th><th>cases</th><th>Copy-as-Decode, best deployable "
            "(over AR)</th><th>fastest rival (over AR)</th><th>Copy-as-Decode / rival [95% CI], decision, source</th></tr>")
    rows = "".join(
        f"<tr><td>{esc(s.detail['where'])}</td><td class='cd-num'>{esc(fmt_int(s.cases))}</td>"
        f"<td>{esc(s.detail['copy_label'])} {esc(fmt_x(s.detail['copy_speedup']))}</td>"
        f"<td>{esc(s.detail['rival_label'])} {esc(fmt_x(s.detail['rival_speedup']))}</td>{ratio_cell(s)}</tr>"
        for s in scopes)
    return f"<table>{head}{rows}</table>"


def load_table(by_source: dict[str, dict[int, Scope]]) -> str:
    loads = sorted({c for row in by_source.values() for c in row})
    head = "<tr><th>kernel source (its steps)</th>" + "".join(f"<th>C = {c}</th>" for c in loads) + "</tr>"
    rows = []
    for source, row in by_source.items():
        cells = "".join(ratio_cell(row[c]) if c in row else "<td>–</td>" for c in loads)
        rows.append(f"<tr><td>{esc(source)}</td>{cells}</tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def measured_table(scopes: list[Scope]) -> str:
    head = "<tr><th>run</th><th>Copy-as-Decode</th><th>rival</th><th>Copy-as-Decode / rival [95% CI]</th></tr>"
    rows = "".join(f"<tr><td>{esc(s.scope)}</td><td>{esc(s.detail.get('copy_label', ''))}</td>"
                   f"<td>{esc(s.detail.get('rival_label', ''))}</td>{ratio_cell(s)}</tr>" for s in scopes)
    return f"<table>{head}{rows}</table>"


def flip_sentence(scopes: list[Scope]) -> str:
    """Where prompt lookup's draft budget k flips the ranking, pooled over every corpus."""
    pooled = [s for s in scopes if s.detail.get("pool") == ALL_POOL] or scopes[:1]
    if not pooled or not pooled[-1].detail.get("flips"):
        return ""
    s = pooled[-1]
    parts = [Flip(**f).sentence() for f in s.detail["flips"]]
    return (f"<p><b>Where the ranking flips</b> ({esc(s.detail['where'])}, {esc(s.detail['copy_label'])} "
            f"{esc(fmt_x(s.detail['copy_speedup']))} over AR): {esc('; '.join(parts))}. Engines cap drafts "
            "(vLLM's num_speculative_tokens; llama.cpp drafts 48-64 tokens).</p>")


def svg_width(svg: str) -> int | None:
    """An SVG's natural width in px, from its root element's `width`."""
    import re

    found = re.search(r"<svg[^>]*?\bwidth=\"([0-9.]+)", svg[:2000])
    return round(float(found[1])) if found else None


def figure_html(svg: str, caption: str) -> str:
    """A chart one a row at its natural width (up to the column's), as a data URI like the index's other figures,
    with its caption."""
    import base64

    width = svg_width(svg)
    size = f" width='{width}'" if width else ""
    uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (f"<figure class='cd-key'><img alt='{esc(caption)}'{size} src='{uri}'>"
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def inline_svg(chart, caption: str) -> str:
    """A chart rendered now (vl-convert, offline) as a figure."""
    import vl_convert as vlc

    return figure_html(vlc.vegalite_to_svg(chart.to_json()), caption)


def decision_charts(root: Path, scopes: list[Scope]) -> str:
    """The two decision charts from the rivals and serving tables, when this run has them."""
    out = []
    judged = batch_one(scopes)
    rivals = optional_table("rivals", root / TABLES, infer_all_rows=True)
    if rivals is not None and judged:
        where = {(s.detail["corpus"], s.detail["pool"]): s.detail["where"] for s in judged}
        out.append(inline_svg(decisioncharts.decision_chart(rivals, judged[0].detail["kernel_source"], where),
                              "At batch 1: each family's fastest deployable setting per corpus, the best rival ringed "
                              "(reports/tables/rivals.csv)"))
    serving = optional_table("serving", root / TABLES, infer_all_rows=True)
    if serving is not None and under_load(scopes) and "vs_best_rival_ci_low" in serving.columns:
        out.append(inline_svg(decisioncharts.serving_decision_chart(serving),
                              "Under load: Copy-as-Decode over the best rival at each concurrency, per kernel source "
                              "(reports/tables/serving.csv)"))
    return "".join(out)


def decision_block(items: list[Claim], root: Path = Path("."), charts: bool = True) -> str:
    """The block's HTML ('' when no claim has a decision scope: a run without the rivals stage)."""
    scopes = decision_scopes(items)
    if not scopes:
        return ""
    judged, loads, engine = batch_one(scopes), under_load(scopes), measured(scopes)
    others = batch_one(scopes, judged=False)
    parts = [f"<style>{CSS}</style><section class='cd-decision' id='decision'><h2>{esc(TITLE)}</h2>",
             "<p>Copy-as-Decode's best deployable variant (directive tokens paid) over the fastest method a deployment "
             "can run instead, same cases, oracle programs: above 1x Copy-as-Decode is faster. Chips: the decision from "
             "the paired 95% interval against 1, and the figure's source (measured on an engine, priced from measured "
             "kernels or steps, or extrapolated beyond them).</p>"]
    if judged:
        parts.append(f"<h3>At batch 1, under {esc(judged[0].detail['kernel_source'])}</h3>" + batch_table(judged))
    if loads:
        parts.append("<h3>Under load: simulated continuous batching, every corpus pooled, closed loop at concurrency C"
                     "</h3>" + load_table(loads))
    if engine:
        parts.append("<h3>Measured on an engine</h3>" + measured_table(engine))
    if judged:
        parts.append(flip_sentence(judged))
    if others:
        parts.append("<p class='cd-note'>At batch 1, pooled over every corpus, under the other kernel sources: "
                     + "; ".join(f"{esc(s.detail['kernel_source'])} {esc(f'{s.value:.2f}x')} "
                                 f"{esc(fmt_ci(*s.ci, digits=2))} ({esc(s.decision)})" for s in others) + ".</p>")
    if charts:
        parts.append(decision_charts(root, scopes))
    return "".join(parts) + "</section>"

