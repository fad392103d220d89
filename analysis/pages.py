"""Pages: how a report shows a table or a block. Every value a report writes passes through `esc` or
great_tables (which escapes cell text, titles and notes): a case id or corpus name can never inject
markup into a page. Numbers are formatted by analysis.numbers."""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import polars as pl

from analysis.claims import (
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
from analysis.layout import STAND_IN
from analysis.numbers import MISSING, fmt_ci, fmt_int, fmt_num, fmt_pct, fmt_x, is_missing

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
    view = show(frame.select("claim", "paper", "ours", "verdict", "method"), lift_constants=False,
                note=STAND_IN_NOTE).cols_width({"claim": "14%", "paper": "19%", "ours": "25%", "verdict": "27%",
                                                "method": "15%"})
    for verdict, colour in VERDICT_COLOURS.items():
        rows = [i for i, c in enumerate(items) if c.verdict == verdict]
        if rows:
            view = view.tab_style(style=style.fill(color=colour), locations=loc.body(columns="verdict", rows=rows))
    return view

