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

from analysis.claims.engine import (
    BEYOND,
    DIFFERS,
    NOT_APPLICABLE,
    NOT_AT_SCALE,
    NOT_RUN,
    REPRODUCED,
    STALE,
    UNDERDETERMINED,
    Claim,
    claims,
    claims_frame,
)
from analysis.latency.names import FIT_SOURCE
from analysis.layout import STAND_IN
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



VERDICT_COLOURS = {REPRODUCED: "#dafbe1", DIFFERS: "#fff8c5", NOT_AT_SCALE: "#ffebe9", NOT_RUN: "#eaeef2",
                   NOT_APPLICABLE: "#eaeef2", BEYOND: "#ddf4ff", UNDERDETERMINED: "#fbefff", STALE: "#eaeef2"}


def summary_table(items: list[Claim] | None = None):
    """The paper-versus-ours table: one row per claim, the verdict cell coloured by its verdict."""
    from great_tables import loc, style

    items = claims() if items is None else items
    frame = claims_frame(items).with_columns(
        pl.concat_str([pl.col("verdict"), pl.lit(": "), pl.col("reason")]).alias("verdict")).drop("reason")
    # each cell at most CELL_LIMIT characters (P2); the full texts follow the table (claim_details)
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
# Built from the Claim objects' fields only (claim, paper, ours, verdict, reason, method; any field added
# later, e.g. setup_differences, is ignored here): the judged figure is the first part of `ours`, split
# into one row per corpus or kernel source where it lists several.

CELL_LIMIT = 200  # characters a grid cell may show; longer text ends with a marked cut and a link
CHIP_CLASSES = {REPRODUCED: "reproduced", DIFFERS: "differs", NOT_AT_SCALE: "not-at-scale", NOT_RUN: "not-run",
                NOT_APPLICABLE: "not-applicable", BEYOND: "beyond"}
# the report page that explains a claim: by the last stage its method names in brackets ("[spans, bounds]"),
# else by a keyword of its title
STAGE_PAGES = {"spans": "coverage", "bounds": "bounds", "optimal": "bounds", "roundtrip": "losslessness",
               "perturb": "perturbation", "e2e": "e2e", "pilot": "pilot", "kernels": "kernel"}
TITLE_PAGES = (("kernel", "kernel"), ("round trip", "losslessness"), ("noise", "perturbation"), ("fine-tun", "pilot"),
               ("end to end", "e2e"), ("bound", "bounds"), ("ceiling", "coverage"), ("coverage", "coverage"))
GRID_CSS = """
.cd-grid { border-collapse: collapse; width: 100%; font-size: 14px; margin: 6px 0 4px; }
.cd-grid th { text-align: left; border-bottom: 2px solid var(--rule); padding: 4px 8px; }
.cd-grid td { border-bottom: 1px solid var(--rule); padding: 4px 8px; vertical-align: top; }
.cd-grid td.cd-scope { color: var(--muted); white-space: nowrap; }
.cd-chip { display: inline-block; border-radius: 10px; padding: 1px 9px; font-size: 12px; font-weight: 600; white-space: nowrap; }
.cd-chip-reproduced { background: #dafbe1; color: #116329; } .cd-chip-differs { background: #fff8c5; color: #7d4e00; }
.cd-chip-not-at-scale { background: #ffebe9; color: #a40e26; } .cd-chip-beyond { background: #ddf4ff; color: #0550ae; }
.cd-chip-not-run, .cd-chip-not-applicable { background: #eaeef2; color: #59636e; }
"""


@dataclass(frozen=True)
class GridRow:
    """One row of the claims grid: a claim, or one corpus (or kernel source) of a claim that lists several."""
    claim: str
    scope: str
    paper: str
    ours: str
    verdict: str
    reason: str
    page: str
    first: bool  # the claim's first row (the claim, verdict and link cells span its rows)
    rows: int    # how many rows the claim has


FULL_TEXT_BELOW = " … (full text below)"


def clip_cell(text: str, limit: int = CELL_LIMIT, more: str = " … (more on the page)") -> str:
    """`text` if it fits, else cut at the last '; ' or ', ' before the limit and marked with `more`."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    room = text[: limit - len(more)]
    cut = max(room.rfind("; "), room.rfind(", "))
    return (room[:cut] if cut > limit // 3 else room.rstrip()) + more


def claim_page(claim: Claim) -> str:
    """The report page that explains a claim (by keywords of its title and method), else the summary."""
    tags = re.findall(r"\[([\w, ]+)\]", claim.method or "")
    stages = [t.strip() for t in tags[-1].split(",")] if tags else []
    for stage in reversed(stages):
        if stage in STAGE_PAGES:
            return STAGE_PAGES[stage]
    title = claim.claim.lower()
    return next((page for key, page in TITLE_PAGES if key in title), "summary")


def judged_figure(ours: str) -> str:
    """The judged part of a claim's `ours` text: what precedes the figures set beside it."""
    for marker in (". Beside it", "; for comparison", ". For comparison"):
        ours = ours.split(marker)[0]
    return ours.strip()


_SOURCE_PART = re.compile(r"^(?P<scope>[\w./-]+) \((?P<setup>[^)]*)\): (?P<figure>.+)$")


def _scoped_parts(judged: str, corpora: set[str]) -> list[tuple[str, str]]:
    """(scope, figure) per corpus or kernel source when the judged text lists several, else [("", judged)]."""
    body = judged
    if ": " in judged and not _SOURCE_PART.match(judged.split("; ")[0]):
        head, rest = judged.split(": ", 1)
        if ";" in rest and ";" not in head:
            body = rest
    parts = [p.strip() for p in body.split("; ") if p.strip()]
    if len(parts) < 2:
        return [("", judged)]
    names = {c.rstrip("*") for c in corpora} | {"pooled"}
    scoped = []
    for part in parts:
        source = _SOURCE_PART.match(part)
        if source:
            scoped.append((f"{source['scope']} ({source['setup']})", source["figure"]))
            continue
        name = next((n for n in sorted(names, key=len, reverse=True) if part.startswith(n)), None)
        if name is None:
            return [("", judged)]
        scope = part[: len(name) + (1 if part[len(name):].startswith("*") else 0)]
        rest = part[len(scope):].strip()
        if name == "pooled" and not rest[:1].isdigit():  # "pooled over the paper's corpora 19.0x ..."
            words = rest.split()
            lead = next((i for i, w in enumerate(words) if w[:1].isdigit()), len(words))
            scope, rest = f"{scope} {' '.join(words[:lead])}".strip(), " ".join(words[lead:])
        scoped.append((scope, rest))
    return scoped


def _paper_part(paper: str, scope: str) -> str:
    """The paper's figure for one corpus when its text lists them ('29.0x ProbeEdit / 3.4x HEvalFix-Py'), else ''."""
    name = scope.rstrip("*").removesuffix("-S").split(" (")[0]
    if not name:
        return ""
    for piece in paper.split(" / "):
        words = piece.split()
        if len(words) >= 2 and words[-1] == name and not scope.startswith("pooled over"):
            return piece
    return ""


def grid_rows(items: list[Claim], corpora: Iterable[str] = (), cases: dict[str, int] | None = None) -> list[GridRow]:
    """The claims grid's rows: one per claim, or per corpus / kernel source where a claim's judged figure
    lists several; `cases` (corpus -> case count) adds each corpus row's case count."""
    cases = cases or {}
    out: list[GridRow] = []
    for item in items:
        scoped = _scoped_parts(judged_figure(item.ours), set(corpora)) if item.ours != MISSING else [("", item.ours)]
        for i, (scope, figure) in enumerate(scoped):
            count = cases.get(scope.rstrip("*"))
            shown = f"{figure} · {fmt_int(count)} cases" if count is not None else figure
            paper = _paper_part(item.paper, scope) or (item.paper if i == 0 else "″")
            out.append(GridRow(claim=item.claim, scope=scope, paper=clip_cell(paper), ours=clip_cell(shown),
                               verdict=item.verdict, reason=item.reason, page=claim_page(item), first=i == 0,
                               rows=len(scoped)))
    return out


def claims_grid(rows: list[GridRow], page_href: Callable[[str], str]) -> Html:
    """The compact claims grid: claim | scope | paper | ours | verdict chip | link to its report page. The
    verdict's reason is the chip's tooltip; the page explains method and caveats."""
    head = ("<table class='cd-grid'><thead><tr><th>claim</th><th></th><th>paper</th><th>ours (judged figure, CI, cases)</th>"
            "<th>verdict</th><th></th></tr></thead><tbody>")
    body = []
    for r in rows:
        span = f" rowspan='{r.rows}'" if r.rows > 1 else ""
        chip = (f"<span class='cd-chip cd-chip-{CHIP_CLASSES.get(r.verdict, 'not-run')}' "
                f"title='{esc(clip_cell(r.reason, 600))}'>{esc(r.verdict)}</span>")
        cells = [f"<td{span}>{esc(clip_cell(r.claim))}</td>"] if r.first else []
        cells += [f"<td class='cd-scope'>{esc(r.scope)}</td>", f"<td>{esc(r.paper)}</td>", f"<td>{esc(r.ours)}</td>"]
        if r.first:
            cells += [f"<td{span}>{chip}</td>", f"<td{span}><a href='{esc(page_href(r.page))}'>{esc(r.page)} →</a></td>"]
        body.append("<tr>" + "".join(cells) + "</tr>")
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
