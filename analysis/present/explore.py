"""Explore one case: its input, gold output, oracle program, spans highlighted, and what each span
costs under every kernel source the bounds use.

`ExploreData.load` reads the stage outputs and the latency models once; `build_view(data, selection)`
is the whole logic of a view (a pure function of the selection); `render_view` turns it into escaped
HTML; `explorer` wires ipywidgets dropdowns (corpus, case, framing, level) to `render_view`, so the
notebook (notebooks/explore.ipynb) only calls these. With `widgets=False` the notebook renders the
papermill parameters' case statically (the rendered report).

Units: a fitted kernel's times are seconds; the paper's kernel (`paper`) is in decode steps, since
its t_step is 1 by definition (analysis.latency.model). Each cost column names its unit; the bound (a ratio)
is unit-free and comparable across sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analysis.bounds import CostSettings, case_costs, cost_settings, cost_unit, span_costs
from analysis.errors import ParamsError
from analysis.latency.model import LatencyModel
from analysis.layout import CASES, PROGRAMS, SPANS
from analysis.grammar.program import Copy, parse
from analysis.grammar.resolver import resolve
from analysis.latency.sources import is_fit, kernel_settings, kernels_for
from analysis.pipeline.config import Config
from analysis.present.pages import Html, esc, lead, pre
from analysis.present.provenance import params_in_use
from analysis.results.numbers import fmt_pct
from analysis.results.percase import read_table, where
from analysis.text.diff import myers_matches
from analysis.text.lines import line_starts, split_lines
from analysis.text.tokens import load_tokenizer

UNIT_ABBREVIATION = {"seconds": "s", "decode steps": "steps"}
# The view carries its own styles (scoped to .cd-explore): JupyterLab has none of the report pages' CSS.
EXPLORE_CSS = """
.cd-explore .cd-lead { background: #f3f7fc; border-left: 4px solid #0b5cad; padding: 10px 16px; margin: 8px 0 18px; }
.cd-explore .cd-cards { display: flex; flex-wrap: wrap; gap: 12px; }
.cd-explore .cd-card { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 6px 12px; min-width: 150px; }
.cd-explore .cd-value { font-size: 20px; font-weight: 600; } .cd-explore .cd-label { color: #59636e; font-size: 13px; }
.cd-explore .cd-pre { background: #f6f8fa; padding: 10px 12px; border-radius: 6px; white-space: pre-wrap; word-break: break-word; }
.cd-explore .cd-copy { background: #c8f7c5; } .cd-explore .cd-gen { background: #ffd59e; }
.cd-explore .cd-table { border-collapse: collapse; font-size: 13px; }
.cd-explore .cd-table th, .cd-explore .cd-table td { border-bottom: 1px solid #d0d7de; padding: 3px 8px; text-align: right; }
.cd-explore .cd-table th { overflow-wrap: normal; word-break: normal; hyphens: none; max-width: 9em; vertical-align: bottom; }
.cd-explore .cd-table tr.cd-current td { background: #fff3c4; }
.cd-explore .cd-ln { color: #8c959f; user-select: none; }
.cd-explore .cd-scroll { max-height: 42em; overflow: auto; }
.cd-explore .cd-del { background: #ffebe9; } .cd-explore .cd-add { background: #dafbe1; }
.cd-explore .cd-note { color: #59636e; font-size: 13px; }
.cd-explore .cd-error { color: #9a1c1c; }
"""


# How the case dropdown can be ordered: label -> (score column, descending); None: by case id, its numbers as
# numbers (HEvalFix-Py/2 before HEvalFix-Py/10; CommitEdits' hash ids alphabetically).
BY_ID = "case id"
SORTS: dict[str, tuple[str, bool] | None] = {
    BY_ID: None,
    "coverage, lowest first": ("coverage", False),
    "bound, lowest first": ("bound", False),
    "bound, highest first": ("bound", True),
}
@dataclass(frozen=True)
class Selection:
    corpus: str
    case_id: str
    framing: str
    level: str


@dataclass(frozen=True)
class KernelSource:
    label: str            # "fit eager", "paper", "h200/qwen2.5-7b/eager eager", ...
    model: LatencyModel

    @property
    def unit(self) -> str:
        return cost_unit(self.model)

    @property
    def column(self) -> str:
        return f"{self.label} ({UNIT_ABBREVIATION.get(self.unit, self.unit)})"


@dataclass
class ExploreData:
    cases: pl.DataFrame
    programs: pl.DataFrame
    spans: pl.DataFrame
    kernels: list[KernelSource]
    cost: CostSettings
    scores: pl.DataFrame | None = None  # case_scores: per (case, framing, level) coverage and bound, for sorting
    read_from: str = ""                 # where the tables came from: this run's data/ or the committed copies

    @classmethod
    def load(cls, params: str | Path | None = None, root: Path = Path(".")) -> "ExploreData":
        """The stage outputs under `root` and the bound's kernel sources and cost settings from `params`
        (default: the params file in use, `$COPYDECODE_PARAMS` as the reports stage sets it, else ./params.yaml)."""
        params = params_in_use(None if params is None else Path(params))
        found = {name: where(name, root) for name in ("cases", "programs", "spans")}
        for name, path in found.items():
            if path is None:
                raise ParamsError(f"data/{name} not found; run `copydecode corpora`, `programs` and `spans` (or "
                                  "`dvc repro`) first, or check out a commit with reports/percase/")
        values = Config.load(params).params
        kernels = [KernelSource(f"{k.source} {k.baseline}" if is_fit(k.source) else k.source, k.model)
                   for k in kernels_for(kernel_settings(values))]
        spans, cost = read_table("spans", root), cost_settings(values)
        read_from = sorted({"reports/percase/ (the committed run)" if "percase" in p.parts else "data/ (this run)"
                            for p in found.values()})
        return cls(read_table("cases", root), read_table("programs", root), spans, kernels, cost,
                   case_scores(spans, kernels[0] if kernels else None, cost), ", ".join(read_from))

    # the choices each dropdown offers, given the others
    def corpora(self) -> list[str]:
        return sorted(self.cases["corpus"].unique().to_list())

    def framings(self, corpus: str) -> list[str]:
        return sorted(self.cases.filter(pl.col("corpus") == corpus)["framing"].unique().to_list())

    def case_ids(self, corpus: str, framing: str, sort: str = BY_ID, level: str = "line") -> list[str]:
        """The corpus's cases at `framing`, in `sort` order (SORTS: by id, or worst coverage / bound first)."""
        return ranked_cases(self, corpus, framing, level, sort)["case_id"].to_list()

    def levels(self) -> list[str]:
        return sorted(self.spans["level"].unique().to_list())

    def selection_for(self, case_id: str, framing: str, level: str) -> Selection:
        """The selection of a case by id (the papermill parameters), its corpus looked up."""
        row = self.cases.filter((pl.col("case_id") == case_id) & (pl.col("framing") == framing))
        if row.height == 0:
            known = self.cases.filter(pl.col("framing") == framing)["case_id"].head(5).to_list()
            if not known:  # e.g. a pairs-only run asked for the default HEvalFix case
                raise ParamsError(f"no case {case_id!r}: this run has no case with framing {framing!r} (its framings: "
                                  f"{sorted(set(self.cases['framing'].to_list()))}); pick a case of this run")
            raise ParamsError(f"no case {case_id!r} with framing {framing!r}; e.g. {known}")
        return Selection(row["corpus"][0], case_id, framing, level)


RANKED_SHOWN = 10  # cases listed in the view's ranking table


def case_scores(spans: pl.DataFrame, kernel: KernelSource | None, cost: CostSettings) -> pl.DataFrame:
    """Per (case, framing, level): the gold tokens copied (coverage) and the ideal bound under `kernel` (the
    first configured kernel source; null without one)."""
    keys = ["case_id", "framing", "level"]
    coverage = spans.group_by(keys).agg(
        coverage=pl.col("n_tokens").filter(pl.col("kind") == "copy").sum() / pl.col("n_tokens").sum(),
        n_ops=pl.len())
    if kernel is None:
        return coverage.with_columns(bound=pl.lit(None, pl.Float64))
    costs = case_costs(spans, kernel.model, cost).select(*keys, bound=pl.col("regen") / pl.col("program_ideal"))
    return coverage.join(costs, on=keys, how="left")


def ranked_cases(data: "ExploreData", corpus: str, framing: str, level: str, sort: str = BY_ID) -> pl.DataFrame:
    """The corpus's cases at `framing` with their coverage and bound at `level`, ordered by `sort` (ties by id)."""
    if sort not in SORTS:
        raise ParamsError(f"unknown sort {sort!r}; known: {', '.join(SORTS)}")
    part = data.cases.filter((pl.col("corpus") == corpus) & (pl.col("framing") == framing)).select("case_id")
    if data.scores is not None:
        part = part.join(data.scores.filter((pl.col("framing") == framing) & (pl.col("level") == level))
                         .select("case_id", "coverage", "bound"), on="case_id", how="left", maintain_order="left")
    ranks = {case_id: i for i, case_id in enumerate(id_order(part["case_id"].to_list()))}
    part = part.with_columns(pl.Series("_id_order", [ranks[c] for c in part["case_id"].to_list()], dtype=pl.Int64))
    order = SORTS[sort]
    if order is None or order[0] not in part.columns:
        return part.sort("_id_order").drop("_id_order")
    column, descending = order
    return part.sort([column, "_id_order"], descending=[descending, False], nulls_last=True).drop("_id_order")


def id_order(case_ids: list[str]) -> list[str]:
    """Case ids in id order, each corpus (the part before the last `/`) apart: a corpus whose ids are all numbers by
    their number (HEvalFix-Py/2 before /10), any other (CommitEdits' commit hashes) alphabetically."""
    numbered: dict[str, bool] = {}
    for case_id in case_ids:
        corpus, _, tail = case_id.rpartition("/")
        numbered[corpus] = numbered.get(corpus, True) and tail.isdigit()

    def key(case_id: str) -> tuple:
        corpus, _, tail = case_id.rpartition("/")
        return (corpus, int(tail) if numbered[corpus] else 0, tail)

    return sorted(set(case_ids), key=key)


@dataclass
class CaseView:
    selection: Selection
    source: str
    target: str
    instruction: str | None
    program: str
    pieces: list[tuple[str, str, str]]  # (kind, title, text) of each op's output, in order
    marks: list[tuple[int, int, str]]   # (start, end, title): the source characters each copy op copies
    token_at_line: list[int] | None     # token level: the 1-based index of the first token of each source line
    ranking: pl.DataFrame               # the corpus's cases in the chosen order (ranked_cases), for "show me the worst"
    sort: str                           # that order (SORTS)
    spans: pl.DataFrame                 # one row per op, with a cost column per kernel source
    totals: pl.DataFrame                # per kernel source: regenerate, program, with directives, bounds
    units: dict[str, str]               # cost column -> unit
    read_from: str = ""                 # where the run's tables came from (ExploreData.read_from)

    @property
    def copied_share(self) -> float | None:
        total = self.spans["n_tokens"].sum()
        return self.spans.filter(pl.col("kind") == "copy")["n_tokens"].sum() / total if total else None


def _pieces(program, source: str, bounds) -> list[tuple[str, str, str]]:
    out = []
    for op in program.ops:
        text = resolve(type(program)((op,)), source, bounds)
        if isinstance(op, Copy):
            out.append(("copy", f"copy {op.unit} {op.start}-{op.end}", text))
        else:
            out.append(("gen", "gen", text))
    return out


def copy_marks(program, source: str, bounds) -> list[tuple[int, int, str]]:
    """(start, end, title) of the source characters each copy op copies, in op order (the copied lines or
    tokens marked on the input side)."""
    starts = line_starts(split_lines(source))
    marks = []
    for index, op in enumerate(program.ops, 1):
        if not isinstance(op, Copy):
            continue
        lo, hi = (starts[op.start - 1], starts[op.end]) if op.unit == "lines" else (bounds[op.start - 1], bounds[op.end])
        marks.append((lo, hi, f"op {index}: copy {op.unit} {op.start}-{op.end}"))
    return marks


def first_tokens(source: str, bounds) -> list[int]:
    """The 1-based index of the token each source line starts in (the token holding its first character)."""
    import bisect

    known = [(b, i) for i, b in enumerate(bounds[:-1]) if b is not None]
    offsets = [b for b, _ in known]
    return [known[max(0, bisect.bisect_right(offsets, start) - 1)][1] + 1
            for start in line_starts(split_lines(source))[:-1]]


def build_view(data: ExploreData, sel: Selection, sort: str = "coverage, lowest first") -> CaseView:
    """Everything the explorer shows for one selection; a selection that names nothing is a ParamsError."""
    case = data.cases.filter((pl.col("case_id") == sel.case_id) & (pl.col("framing") == sel.framing))
    if case.height == 0 or case["corpus"][0] != sel.corpus:
        raise ParamsError(f"no case {sel.case_id!r} with framing {sel.framing!r} in corpus {sel.corpus!r}")
    if sel.level not in data.levels():
        raise ParamsError(f"unknown level {sel.level!r}; known: {', '.join(data.levels())}")
    row = case.row(0, named=True)
    key = (pl.col("case_id") == sel.case_id) & (pl.col("framing") == sel.framing) & (pl.col("level") == sel.level)
    program = data.programs.filter(key)
    if program.height == 0:
        raise ParamsError(f"no {sel.level}-level program for {sel.case_id!r} ({sel.framing})")
    spans = data.spans.filter(key).sort("op_index")
    table = spans.select("op_index", "kind", "n_tokens", "n_tokens_src", "n_lines", "directive_tokens")
    units: dict[str, str] = {}
    totals = []
    for kernel in data.kernels:
        per_op = span_costs(spans, kernel.model, data.cost)
        table = table.with_columns(pl.Series(kernel.column, per_op["op_cost"].to_list(), dtype=pl.Float64))
        units[kernel.column] = kernel.unit
        whole = case_costs(spans, kernel.model, data.cost).row(0, named=True)
        totals.append({"kernel source": kernel.label, "unit": kernel.unit, "regenerate": whole["regen"],
                       "program": whole["program_ideal"], "program with directives": whole["program_overhead"],
                       "bound": whole["regen"] / whole["program_ideal"],
                       "bound with directives": whole["regen"] / whole["program_overhead"],
                       "extrapolated spans": whole["extrapolated_spans"]})

    parsed = parse(program["program"][0])
    bounds = load_tokenizer().encode(row["source"]).char_bounds if sel.level == "token" else None
    return CaseView(sel, row["source"], row["target"], row.get("instruction"), program["program"][0],
                    _pieces(parsed, row["source"], bounds), copy_marks(parsed, row["source"], bounds),
                    first_tokens(row["source"], bounds) if bounds is not None else None,
                    ranked_cases(data, sel.corpus, sel.framing, sel.level, sort), sort, table,
                    pl.DataFrame(totals) if totals else pl.DataFrame(), units, data.read_from)


# ---------------------------------------------------------------- HTML

def highlighted_html(view: CaseView) -> str:
    spans = "".join(f'<span class="cd-{kind}" title="{esc(title)}">{esc(text)}</span>' for kind, title, text in view.pieces)
    return ('<pre class="cd-pre">' + spans + "</pre>"
            '<p><span class="cd-copy">copied</span> <span class="cd-gen">generated</span></p>')


# display names of the per-span table's columns: words the header can wrap at (no mid-word breaks)
COLUMN_LABELS = {"op_index": "op", "n_tokens": "tokens", "n_tokens_src": "source tokens", "n_lines": "lines",
                 "directive_tokens": "directive tokens", "case_id": "case", "extrapolated spans": "extrapolated spans"}
SIGNIFICANT = 3   # a float column shows this many significant digits of its largest value, every row alike
CONTEXT_LINES = 3  # unchanged lines kept around each change in the source-to-target diff


def _decimals(values: list[float]) -> int:
    """Decimals that give the column's largest magnitude SIGNIFICANT digits (0-6), for every row of it."""
    import math

    finite = [abs(v) for v in values if isinstance(v, float) and math.isfinite(v) and v != 0]
    if not finite:
        return 2
    return max(0, min(6, SIGNIFICANT - 1 - math.floor(math.log10(max(finite)))))


def _table_html(frame: pl.DataFrame, highlight: tuple[str, str] | None = None) -> str:
    """A table whose float columns share one precision per column; `highlight` = (column, value) marks a row."""
    decimals = {c: _decimals(frame[c].to_list()) for c, t in frame.schema.items() if t.is_float()}

    def cell(column: str, value: Any) -> str:
        if isinstance(value, float):
            return esc(f"{value:,.{decimals[column]}f}")
        return esc("" if value is None else value)

    # a header wraps at spaces, and after "/" and "_" in a kernel source's name (never inside a word)
    head = "".join(f"<th>{esc(COLUMN_LABELS.get(c, c)).replace('/', '/<wbr>').replace('_', '_<wbr>')}</th>"
                   for c in frame.columns)
    rows = []
    for row in frame.iter_rows(named=True):
        mark = highlight is not None and row.get(highlight[0]) == highlight[1]
        rows.append(f"<tr{' class=cd-current' if mark else ''}>"
                    + "".join(f"<td>{cell(c, v)}</td>" for c, v in row.items()) + "</tr>")
    return f"<table class='cd-table'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _marked_line(text: str, start: int, marks: list[tuple[int, int, str]]) -> str:
    """One source line (characters start..start+len) with its copied stretches in cd-copy spans."""
    end, out, at = start + len(text), [], start
    for lo, hi, title in sorted(marks):
        lo, hi = max(lo, start), min(hi, end)
        if lo >= hi or lo < at:
            continue
        out.append(esc(text[at - start:lo - start]))
        out.append(f'<span class="cd-copy" title="{esc(title)}">{esc(text[lo - start:hi - start])}</span>')
        at = hi
    out.append(esc(text[at - start:]))
    return "".join(out)


def numbered_source_html(view: CaseView) -> str:
    """The input with line numbers (and, at token level, the first token index of each line) and the
    characters each copy op copies marked, so a copy range can be checked against the source."""
    lines = split_lines(view.source)
    starts = line_starts(lines)
    width = len(str(len(lines)))
    out = []
    for number, (text, start) in enumerate(zip(lines, starts), 1):
        gutter = f"{number:>{width}}"
        if view.token_at_line is not None:
            gutter += f" t{view.token_at_line[number - 1]:<5}"
        out.append(f'<span class="cd-ln">{gutter}</span> {_marked_line(text, start, view.marks)}')
    legend = ('<p class="cd-note"><span class="cd-copy">copied by a copy op</span> (hover: which op); the gutter gives '
              + ("the line number and the index of the token the line starts in (copy tokens ranges count from 1)"
                 if view.token_at_line is not None else "the line number (copy lines ranges count from 1)") + "</p>")
    return '<pre class="cd-pre cd-scroll">' + "".join(out) + "</pre>" + legend


def diff_lines(source: str, target: str) -> list[tuple[str, str]]:
    """(tag, line) of a line diff from source to target: ' ' kept, '-' removed, '+' added (the suite's Myers LCS)."""
    a, b = split_lines(source), split_lines(target)
    out, i, j = [], 0, 0
    for mi, mj in [*myers_matches(a, b), (len(a), len(b))]:
        out += [("-", a[k]) for k in range(i, mi)] + [("+", b[k]) for k in range(j, mj)]
        if mi < len(a):
            out.append((" ", a[mi]))
        i, j = mi + 1, mj + 1
    return out


def diff_html(source: str, target: str) -> str:
    """The source-to-target line diff, unchanged runs beyond CONTEXT_LINES around a change folded to a count."""
    lines = diff_lines(source, target)
    changed = [k for k, (tag, _) in enumerate(lines) if tag != " "]
    if not changed:
        return "<p>The gold output equals the input.</p>"
    keep = {k for c in changed for k in range(c - CONTEXT_LINES, c + CONTEXT_LINES + 1)}
    out, folded = [], 0
    for k, (tag, text) in enumerate(lines):
        if k not in keep:
            folded += 1
            continue
        if folded:
            out.append(f'<span class="cd-ln">… {folded} unchanged line{"s" if folded > 1 else ""} …</span>\n')
            folded = 0
        kind = {"-": " class=\"cd-del\"", "+": " class=\"cd-add\""}.get(tag, "")
        body = esc(text if text.endswith("\n") else text + "\n")
        out.append(f"<span{kind}>{esc(tag)} {body}</span>")
    if folded:
        out.append(f'<span class="cd-ln">… {folded} unchanged line{"s" if folded > 1 else ""} …</span>\n')
    added, removed = sum(t == "+" for t, _ in lines), sum(t == "-" for t, _ in lines)
    return (f"<p class='cd-note'>{removed} line(s) removed, {added} added (the line diff the oracle programs are "
            "built from)</p><pre class='cd-pre cd-scroll'>" + "".join(out) + "</pre>")


def ranking_html(view: CaseView) -> str:
    s = view.selection
    shown = view.ranking.head(RANKED_SHOWN)
    where = view.ranking["case_id"].to_list()
    place = where.index(s.case_id) + 1 if s.case_id in where else None
    return (f"<p>The {min(RANKED_SHOWN, view.ranking.height)} first of {view.ranking.height} {esc(s.corpus)} cases "
            f"({esc(s.framing)}, {esc(s.level)} level) by {esc(view.sort)}"
            + (f"; this case is number {place}" if place else "") + ". Coverage: gold tokens copied; bound: the "
            "ideal bound under the first configured kernel source.</p>"
            + _table_html(shown.select("case_id", coverage=pl.col("coverage").map_elements(
                fmt_pct, return_dtype=pl.String), bound=pl.col("bound").map_elements(
                lambda b: f"{b:.2f}x", return_dtype=pl.String)), ("case_id", s.case_id)))


def render_view(view: CaseView) -> "Html":
    """The case as one escaped HTML block: figures, the numbered input with its copied lines marked, the
    gold output, the source-to-target diff, the program, the output with spans highlighted, per-span costs
    (each column in its kernel source's unit), the case's bounds and where it ranks in its corpus."""
    s = view.selection
    share = view.copied_share
    figures = [("case", s.case_id), ("corpus", s.corpus), ("framing, level", f"{s.framing}, {s.level}"),
               ("gold tokens copied", fmt_pct(share) if share is not None else "–")]
    units = "; ".join(f"{column}: {unit}" for column, unit in view.units.items())
    parts = [
        lead("The input, the gold output, the oracle program and the output with copied (green) and generated "
             "(orange) spans for one case" + (f"; tables read from {view.read_from}" if view.read_from else "") + ".",
             figures).text,
        "<h3>Input</h3>", numbered_source_html(view),
        "<h3>Gold output</h3>", pre(view.target).text,
        "<h3>Input to gold output: line diff</h3>", diff_html(view.source, view.target),
        "<h3>Oracle program</h3>", pre(view.program).text,
        "<h3>Output, spans highlighted</h3>", highlighted_html(view),
        "<h3>Per-span cost under each kernel source</h3>",
        f"<p>Tokens per op, and each op's cost under each kernel source's latency model, in that source's unit ({esc(units)}). "
        "A copy costs one prefill of its source tokens, a gen its decode steps; directive tokens are costed in the "
        "case's bound below.</p>" if units else "<p>No kernel source is configured (params kernel.sources).</p>",
        _table_html(view.spans),
    ]
    if view.totals.height:
        parts += ["<h3>This case under each latency model</h3>",
                  "<p>Regenerating the gold output, the program ideal and with its directive tokens, each in the row's unit; "
                  "the bounds are ratios, so they compare across sources.</p>",
                  _table_html(view.totals)]
    if view.ranking.height:
        parts += ["<h3>Where this case ranks in its corpus</h3>", ranking_html(view)]
    return Html(f"<div class='cd-explore'><style>{EXPLORE_CSS}</style>" + "".join(parts) + "</div>")


# ---------------------------------------------------------------- widgets

def _set_choices(dropdown: Any, options: list[str]) -> None:
    """New options for a Dropdown, keeping its value when it is still offered (else the first option, or None).

    Options first, then the value, and NOT under `hold_trait_notifications()`: assigning options resets
    the value, and inside a hold the old value is validated against the new options at the end of the
    hold (`TraitError: Invalid selection`)."""
    keep = dropdown.value
    dropdown.options = list(options)
    dropdown.value = keep if keep in options else (options[0] if options else None)


def explorer(data: ExploreData, start: Selection):
    """ipywidgets: corpus, framing, case and level dropdowns above the rendered case; any change
    re-renders it (an error for a selection is shown in place of the case, escaped)."""
    import ipywidgets as w

    corpus = w.Dropdown(description="corpus", options=data.corpora(), value=start.corpus)
    framing = w.Dropdown(description="framing", options=data.framings(start.corpus), value=start.framing)
    case = w.Dropdown(description="case", options=data.case_ids(start.corpus, start.framing), value=start.case_id)
    level = w.Dropdown(description="level", options=data.levels(), value=start.level)
    order = w.Dropdown(description="cases by", options=list(SORTS), value=BY_ID)
    out = w.HTML()

    def ids() -> list[str]:
        return data.case_ids(corpus.value, framing.value, order.value, level.value)

    def render(_=None) -> None:
        if case.value is None:
            out.value = "<p>No case in this corpus and framing.</p>"
            return
        try:
            sel = Selection(corpus.value, case.value, framing.value, level.value)
            out.value = render_view(build_view(data, sel, order.value if order.value != BY_ID else
                                               "coverage, lowest first")).text
        except ParamsError as exc:
            out.value = f"<div class='cd-explore'><style>{EXPLORE_CSS}</style><p class='cd-error'>{esc(exc)}</p></div>"

    cascading = {"on": False}  # a corpus change refills framing and case itself: their observers wait

    def on_corpus(_=None) -> None:
        cascading["on"] = True
        try:
            _set_choices(framing, data.framings(corpus.value))
            _set_choices(case, ids())
        finally:
            cascading["on"] = False
        render()

    def on_framing(_=None) -> None:
        if cascading["on"]:
            return
        _set_choices(case, ids())
        render()

    def on_order(_=None) -> None:  # the worst case first: the new order's first case is shown
        cascading["on"] = True
        try:
            _set_choices(case, ids())
            case.value = case.options[0] if case.options and order.value != BY_ID else case.value
        finally:
            cascading["on"] = False
        render()

    def on_case(_=None) -> None:
        if not cascading["on"]:
            render()

    corpus.observe(on_corpus, names="value")
    framing.observe(on_framing, names="value")
    case.observe(on_case, names="value")
    level.observe(render, names="value")
    order.observe(on_order, names="value")
    render()
    box = w.VBox([w.HBox([corpus, framing]), w.HBox([case, level]), w.HBox([order]), out])
    box.controls = {"corpus": corpus, "framing": framing, "case": case, "level": level, "order": order, "view": out}
    return box
