"""Pages: how a report shows a table or a block. Every value a report writes passes through `esc` or
great_tables (which escapes cell text, titles and notes): a case id or corpus name can never inject
markup into a page. Numbers are formatted by analysis.results.numbers."""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import polars as pl

from analysis.claims.engine import claims, claims_frame
from analysis.claims.verdict import (
    BEYOND,
    DIFFERS,
    NOT_APPLICABLE,
    NOT_AT_SCALE,
    NOT_COMPARABLE,
    NOT_RUN,
    REPRODUCED,
    STALE,
    UNDERDETERMINED,
    Claim,
)
from analysis.latency.names import FIT_SOURCE
from analysis.pooling import STAND_IN
from analysis.results.numbers import MISSING, fmt_ci, fmt_int, fmt_num, fmt_pct, fmt_x, is_missing

STAND_IN_NOTE = "* ProbeEdit-S is this suite's stand-in for the paper's unpublished ProbeEdit corpus."


def esc(value: Any) -> str:
    """Text for an HTML page: every value a report writes goes through here or great_tables."""
    return html.escape(str(value), quote=True)


# ---------------------------------------------------------------- tables


@dataclass(frozen=True)
class Html:
    """A fragment of already-escaped HTML that a notebook displays as its output."""

    text: str

    def _repr_html_(self) -> str:
        return self.text


def _title(column: str) -> str:
    return column.replace("_", " ")


def _stable_id(*parts: Any) -> str:
    # great_tables scopes its CSS by an id; a random one would change every page on every run.
    return "t" + hashlib.sha1(repr(parts).encode()).hexdigest()[:10]


def _constant_columns(frame: pl.DataFrame, keep: Iterable[str]) -> list[str]:
    if frame.height < 2:
        return []
    return [c for c in frame.columns if c not in keep and frame[c].n_unique() == 1]


def _cell_text(value: Any, dtype: pl.DataType) -> str:
    if is_missing(value):
        return MISSING
    if dtype == pl.Boolean:
        return "yes" if value else "no"
    if dtype.is_integer():
        return fmt_int(value)
    if dtype.is_float():
        return fmt_num(value)
    return str(value)


def _stringify(frame: pl.DataFrame, formats: dict[str, Callable[[Any], str]]) -> pl.DataFrame:
    columns = {}
    for name, dtype in frame.schema.items():
        fmt = formats.get(name) or (lambda v, d=dtype: _cell_text(v, d))
        columns[name] = [fmt(v) for v in frame[name].to_list()]
    return pl.DataFrame(columns, schema={c: pl.String for c in frame.columns})


def mark_stand_in(frame: pl.DataFrame) -> pl.DataFrame:
    """ProbeEdit-S -> ProbeEdit-S* (the note under the table says what the star means)."""
    if "corpus" not in frame.columns:
        return frame
    return frame.with_columns(pl.col("corpus").replace(STAND_IN))


def show(
    frame: pl.DataFrame,
    *,
    title: str | None = None,
    x: Iterable[str] = (),
    pct: Iterable[str] = (),
    ci: Iterable[tuple[str, ...]] = (),
    formats: dict[str, Callable[[Any], str]] | None = None,
    note: str | None = None,
    lift_constants: bool = True,
):
    """A great_tables view for reading: no index column; speedup columns `x` as 12.3x, share
    columns `pct` as 74.3%; each (value, low, high[, label]) in `ci` folds its bounds into one
    column beside the value (`95% CI` unless labelled); columns with a single value move into the subtitle, so that what
    every row shares is said once and the table stays narrow."""
    from great_tables import GT

    if frame.height == 0:  # a header with no rows reads as a broken table
        return empty_table(title)
    x, pct, ci = tuple(x), tuple(pct), tuple(ci)
    frame = mark_stand_in(frame)
    formats = dict(formats or {})
    for column in x:
        formats.setdefault(column, fmt_x)
    for column in pct:
        formats.setdefault(column, fmt_pct)
    labels = []
    for value, low, high, *named in ci:
        as_pct = value in pct
        label = named[0] if named else (f"{_title(value)} 95% CI" if len(ci) > 1 else "95% CI")
        labels.append(label)
        frame = frame.with_columns(
            pl.struct(low, high).map_elements(lambda r, p=as_pct, lo=low, hi=high: fmt_ci(r[lo], r[hi], pct=p),
                                              return_dtype=pl.String).alias(label))
        at = frame.columns.index(value) + 1
        order = [c for c in frame.columns if c not in (low, high, label)]
        order.insert(min(at, len(order)), label)
        frame = frame.select(order)
    keep = set(x) | set(pct) | set(labels)
    constants = _constant_columns(frame, keep) if lift_constants else []
    shared = _stringify(frame.select(constants).head(1), formats) if constants else None
    frame = frame.drop(constants)
    numeric = [c for c, t in frame.schema.items() if t.is_numeric()] + [c for c in x + pct if c in frame.columns]
    text = _stringify(frame, formats)
    view = GT(text, id=_stable_id(title, text.columns, text.height, text.head(3).rows()))
    view = view.cols_label({c: _title(c) for c in text.columns})
    subtitle = " · ".join(f"{_title(c)} {shared[c][0]}" for c in constants) if constants else None
    if title or subtitle:
        view = view.tab_header(title=title or "", subtitle=subtitle)
    right = [c for c in text.columns if c in numeric or c in labels]
    if right:
        view = view.cols_align("right", columns=right)
    notes = [n for n in (note, STAND_IN_NOTE if "ProbeEdit-S*" in " ".join(text.get_column("corpus").to_list()
                                                                              if "corpus" in text.columns else []) else None) if n]
    for line in notes:
        view = view.tab_source_note(line)
    return view.tab_options(table_font_size="14px", heading_title_font_size="16px", heading_subtitle_font_size="13px",
                            column_labels_font_weight="bold", data_row_padding="3px", table_margin_left="0")


def pivot_wide(frame: pl.DataFrame, *, index: list[str], on: str, values: str) -> pl.DataFrame:
    """One row per `index`, one column per value of `on` (in first-seen order): a long table made narrow."""
    order = frame[on].cast(pl.String).unique(maintain_order=True).to_list()
    wide = frame.with_columns(pl.col(on).cast(pl.String)).pivot(on=on, index=index, values=values)
    return wide.select(index + [c for c in order if c in wide.columns])


# ---------------------------------------------------------------- page blocks


def empty_table(title: str | None) -> Html:
    """What a table with no rows shows: its title and that its stage, or that part of it, was not run."""
    return Html(f"<p class='cd-empty'><b>{esc(title or 'table')}</b>: not run in this run (no rows).</p>")


def note(template: str, **values: Any) -> Html:
    """`template` is trusted markup written in the notebook; every value is escaped into it."""
    return Html(template.format(**{k: esc(v) for k, v in values.items()}))


def pre(text: str) -> Html:
    return Html(f"<pre class='cd-pre'>{esc(text)}</pre>")


def lead(what: str, figures: Iterable[tuple[str, str]], headline: str | None = None) -> Html:
    """The opening of a report: what it shows, its headline sentence (bold) and figures (label, value)."""
    cards = "".join(f"<div class='cd-card'><div class='cd-value'>{esc(v)}</div><div class='cd-label'>{esc(k)}</div></div>"
                    for k, v in figures)
    top = f"<p><b>{esc(headline)}</b></p>" if headline else ""
    return Html(f"<div class='cd-lead'><p>{esc(what)}</p>{top}<div class='cd-cards'>{cards}</div></div>")



VERDICT_COLOURS = {REPRODUCED: "#dafbe1", DIFFERS: "#fff8c5", NOT_COMPARABLE: "#f6f8fa", NOT_AT_SCALE: "#ffebe9",
                   NOT_RUN: "#eaeef2", NOT_APPLICABLE: "#eaeef2", BEYOND: "#ddf4ff", UNDERDETERMINED: "#fbefff",
                   STALE: "#eaeef2"}


def summary_table(items: list[Claim] | None = None):
    """The paper-versus-ours table: one row per claim, the verdict cell coloured by its verdict."""
    from great_tables import loc, style

    items = claims() if items is None else items
    frame = claims_frame(items).with_columns(
        pl.concat_str([pl.col("verdict"), pl.lit(": "), pl.col("reason")]).alias("verdict")).drop("reason")
    # each cell at most CELL_LIMIT characters; the full texts follow the table (claim_details)
    frame = frame.with_columns([pl.col(c).map_elements(lambda t: clip_cell(t, more=FULL_TEXT_BELOW), return_dtype=pl.String)
                                for c in ("paper", "ours", "verdict", "method")])
    view = show(frame.select("claim", "paper", "ours", "verdict", "method"), lift_constants=False,
                note=STAND_IN_NOTE).cols_width({"claim": "14%", "paper": "19%", "ours": "25%", "verdict": "27%",
                                                "method": "15%"})
    for verdict, colour in VERDICT_COLOURS.items():
        rows = [i for i, c in enumerate(items) if c.verdict == verdict]
        if rows:
            view = view.tab_style(style=style.fill(color=colour), locations=loc.body(columns="verdict", rows=rows))
    return view


def claim_details(items: list[Claim] | None = None) -> Html:
    """Every claim's full texts (paper, ours, verdict and reason, method), the ones the summary table cuts."""
    items = claims() if items is None else items
    parts = ["<h2>Each claim in full</h2>"]
    for item in items:
        rows = [("paper", item.paper), ("ours", item.ours), ("verdict", f"{item.verdict}: {item.reason}"),
                ("method", item.method)]
        parts.append(f"<h3>{esc(item.claim)}</h3><dl class='cd-claim'>"
                     + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in rows if v) + "</dl>")
    return Html("<style>.cd-claim dt { font-weight: 600; } .cd-claim dd { margin: 0 0 6px 16px; }</style>"
                + "".join(parts))


# ---------------------------------------------------------------- the index's claims grid
# Built from each Claim's scopes (reports/claims.json): one row per scope the paper states a figure for,
# each with its own verdict, the reason in plain sight and a link to the report section that explains it.

CELL_LIMIT = 200  # characters a grid cell may show; longer text ends with a marked cut and a link
CHIP_CLASSES = {REPRODUCED: "reproduced", DIFFERS: "differs", NOT_COMPARABLE: "not-comparable",
                NOT_AT_SCALE: "not-at-scale", NOT_RUN: "not-run", NOT_APPLICABLE: "not-applicable", BEYOND: "beyond",
                UNDERDETERMINED: "underdetermined", STALE: "not-run"}
GRID_CSS = """
.cd-grid { border-collapse: collapse; width: 100%; font-size: 14px; margin: 6px 0 4px; table-layout: fixed; }
.cd-grid th { text-align: left; border-bottom: 2px solid var(--rule); padding: 4px 8px; }
.cd-grid td { border-bottom: 1px solid var(--rule); padding: 4px 8px; vertical-align: top; }
.cd-grid td { overflow-wrap: anywhere; }
.cd-grid td.cd-scope { color: var(--muted); }
.cd-grid td.cd-why { color: var(--muted); font-size: 13px; }
.cd-grid tr.cd-judged td.cd-scope { color: var(--ink); font-weight: 600; }
.cd-chip { display: inline-block; border-radius: 10px; padding: 1px 9px; font-size: 12px; font-weight: 600; }
.cd-grid td.cd-link { overflow-wrap: normal; white-space: nowrap; }
.cd-chip-reproduced { background: #dafbe1; color: #116329; } .cd-chip-differs { background: #fff8c5; color: #7d4e00; }
.cd-chip-not-at-scale { background: #ffebe9; color: #a40e26; } .cd-chip-beyond { background: #ddf4ff; color: #0550ae; }
.cd-chip-underdetermined { background: #fbefff; color: #6e3aa3; }
.cd-chip-not-comparable { background: #f6f8fa; color: #59636e; border: 1px solid #d0d7de; }
.cd-chip-not-run, .cd-chip-not-applicable { background: #eaeef2; color: #59636e; }
"""


@dataclass(frozen=True)
class GridRow:
    """One row of the claims grid: one scope of a claim (or the claim itself when it has none)."""
    claim: str
    claim_verdict: str
    scope: str
    paper: str
    ours: str
    verdict: str
    reason: str
    section: str  # page#anchor of the report section that explains it
    first: bool   # the claim's first row (the claim cell spans its rows)
    rows: int     # how many rows the claim has

    @property
    def judged(self) -> bool:
        return self.verdict in (REPRODUCED, DIFFERS)


FULL_TEXT_BELOW = " … (full text below)"


def clip_cell(text: str, limit: int = CELL_LIMIT, more: str = " … (more on the page)") -> str:
    """`text` if it fits, else cut at the last '; ' or ', ' before the limit and marked with `more`."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    room = text[: limit - len(more)]
    cut = max(room.rfind("; "), room.rfind(", "))
    return (room[:cut] if cut > limit // 3 else room.rstrip()) + more


def anchor(text: str) -> str:
    """A heading's id on a report page: 'Like with like: the paper's kernel' -> 'like-with-like-the-paper-s-kernel'."""
    return re.sub(r"[^a-z0-9]+", "-", html.unescape(text).lower()).strip("-")


def section_href(section: str, page_href: Callable[[str], str]) -> str:
    """`page#anchor` (paper_claims.json `section`) as a link: the page's file, then the anchor."""
    page, _, fragment = (section or "summary").partition("#")
    return page_href(page) + (f"#{fragment}" if fragment else "")


def grid_rows(items: list[Claim], cases: dict[str, int] | None = None) -> list[GridRow]:
    """The claims grid's rows: one per scope of each claim (its own verdict and reason), or one for a claim
    without scopes; `cases` (corpus -> case count) fills a scope's case count when the claim did not."""
    cases = cases or {}
    out: list[GridRow] = []
    for item in items:
        scopes = item.scopes or ()
        parts = ([(s.scope, s.paper, s.ours, s.cases, s.verdict, s.reason) for s in scopes] if scopes else
                 [("", item.paper, item.ours, None, item.verdict, item.reason)])
        for i, (scope, paper, ours, count, verdict, reason) in enumerate(parts):
            count = count if count is not None else cases.get(scope.rstrip("*"))
            shown = f"{ours} · {fmt_int(count)} cases" if count is not None and "cases" not in ours else ours
            out.append(GridRow(claim=item.claim, claim_verdict=item.verdict, scope=scope, paper=clip_cell(paper),
                               ours=clip_cell(shown), verdict=verdict, reason=reason, section=item.section or "summary",
                               first=i == 0, rows=len(parts)))
    return out


def _chip(verdict: str) -> str:
    return f"<span class='cd-chip cd-chip-{CHIP_CLASSES.get(verdict, 'not-run')}'>{esc(verdict)}</span>"


def claims_grid(rows: list[GridRow], page_href: Callable[[str], str]) -> Html:
    """The compact claims grid: claim (with its verdict) | scope | paper | ours | the scope's verdict | why |
    link to its section. Judged scopes are marked (bold scope); the reason is in the row, not a hover."""
    widths = "".join(f"<col style='width:{w}%'>" for w in (13, 12, 8, 22, 10, 26, 9))
    head = (f"<table class='cd-grid'><colgroup>{widths}</colgroup><thead><tr><th>claim</th><th>scope</th><th>paper</th>"
            "<th>ours (figure, CI, cases)</th><th>verdict</th><th>why</th><th></th></tr></thead><tbody>")
    body = []
    for r in rows:
        span = f" rowspan='{r.rows}'" if r.rows > 1 else ""
        cells = [f"<td{span}>{esc(clip_cell(r.claim))}<br>{_chip(r.claim_verdict)}</td>"] if r.first else []
        scope = r.scope + (" (judged)" if r.judged and r.rows > 1 else "")
        cells += [f"<td class='cd-scope'>{esc(scope)}</td>", f"<td>{esc(r.paper)}</td>", f"<td>{esc(r.ours)}</td>",
                  f"<td>{_chip(r.verdict)}</td>", f"<td class='cd-why'>{esc(clip_cell(r.reason, 300))}</td>",
                  f"<td class='cd-link'><a href='{esc(section_href(r.section, page_href))}'>{esc(r.section.partition('#')[0])} →</a></td>"]
        body.append(("<tr class='cd-judged'>" if r.judged else "<tr>") + "".join(cells) + "</tr>")
    return Html(f"<style>{GRID_CSS}</style>" + head + "".join(body) + "</tbody></table>")


def corpus_table(coverage: pl.DataFrame, bounds: pl.DataFrame | None, formats: pl.DataFrame | None,
                 corpora: Iterable[str]) -> pl.DataFrame:
    """A run's own corpora at a glance: cases, line/token copy coverage with CI, the line-level ideal bound
    with this run's fitted kernel (CI), and copy-program tokens against a whole rewrite."""
    rows = []
    for corpus in corpora:
        cov = coverage.filter(pl.col("corpus") == corpus)
        row: dict[str, str] = {"corpus": corpus}
        for level in ("line", "token"):
            one = cov.filter(pl.col("level") == level)
            if one.height:
                r = one.row(0, named=True)
                row["cases"] = fmt_int(r["n_cases"])
                row[f"{level} coverage"] = f"{fmt_pct(r['coverage'])} {fmt_ci(r['ci_low'], r['ci_high'], pct=True)}"
        if bounds is not None:
            b = bounds.filter((pl.col("corpus") == corpus) & (pl.col("level") == "line") & (pl.col("variant") == "ideal"))
            if "kernel_source" in b.columns:
                b = b.filter(pl.col("kernel_source") == FIT_SOURCE)
            if b.height:
                r = b.row(0, named=True)
                row["bound (fit kernel, line)"] = f"{fmt_x(r['bound'])} {fmt_ci(r['ci_low'], r['ci_high'])}"
        if formats is not None:
            f = formats.filter(pl.col("corpus") == corpus)
            if f.height:
                row["copy program / rewrite tokens"] = fmt_x(f.row(0, named=True)["copy_line_vs_rewrite"], 2)
        rows.append(row)
    columns = ["corpus", "cases", "line coverage", "token coverage", "bound (fit kernel, line)", "copy program / rewrite tokens"]
    frame = pl.DataFrame(rows, schema={c: pl.String for c in columns}) if rows else pl.DataFrame(schema={c: pl.String for c in columns})
    return frame.with_columns(pl.all().fill_null(MISSING))
