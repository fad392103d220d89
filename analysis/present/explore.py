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
from typing import TYPE_CHECKING, Any

import polars as pl

from analysis.bounds import CostSettings, case_costs, cost_unit, span_costs
from analysis.errors import ParamsError
from analysis.latency.model import LatencyModel
from analysis.layout import CASES, PROGRAMS, SPANS

if TYPE_CHECKING:
    from analysis.present.pages import Html

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
.cd-explore .cd-table th { overflow-wrap: anywhere; max-width: 9em; vertical-align: bottom; }
.cd-explore .cd-error { color: #9a1c1c; }
"""


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

    @classmethod
    def load(cls, params: str | Path | None = None, root: Path = Path(".")) -> "ExploreData":
        """The stage outputs under `root` and the bound's kernel sources and cost settings from `params`
        (default: the params file in use, `$COPYDECODE_PARAMS` as the reports stage sets it, else ./params.yaml)."""
        from analysis.bounds import cost_settings
        from analysis.pipeline.config import Config
        from analysis.latency.sources import is_fit, kernel_settings, kernels_for
        from analysis.present.provenance import params_in_use

        params = params_in_use(None if params is None else Path(params))

        for path in (CASES, PROGRAMS, SPANS):
            if not (Path(root) / path).is_file():
                raise ParamsError(f"{path} not found; run `copydecode corpora`, `programs` and `spans` (or `dvc repro`) first")
        values = Config.load(params).params
        kernels = [KernelSource(f"{k.source} {k.baseline}" if is_fit(k.source) else k.source, k.model)
                   for k in kernels_for(kernel_settings(values))]
        return cls(pl.read_parquet(Path(root) / CASES), pl.read_parquet(Path(root) / PROGRAMS),
                   pl.read_parquet(Path(root) / SPANS), kernels, cost_settings(values))

    # the choices each dropdown offers, given the others
    def corpora(self) -> list[str]:
        return sorted(self.cases["corpus"].unique().to_list())

    def framings(self, corpus: str) -> list[str]:
        return sorted(self.cases.filter(pl.col("corpus") == corpus)["framing"].unique().to_list())

    def case_ids(self, corpus: str, framing: str) -> list[str]:
        part = self.cases.filter((pl.col("corpus") == corpus) & (pl.col("framing") == framing))
        return part["case_id"].to_list()

    def levels(self) -> list[str]:
        return sorted(self.spans["level"].unique().to_list())

    def selection_for(self, case_id: str, framing: str, level: str) -> Selection:
        """The selection of a case by id (the papermill parameters), its corpus looked up."""
        row = self.cases.filter((pl.col("case_id") == case_id) & (pl.col("framing") == framing))
        if row.height == 0:
            known = self.cases.filter(pl.col("framing") == framing)["case_id"].head(5).to_list()
            raise ParamsError(f"no case {case_id!r} with framing {framing!r}; e.g. {known}")
        return Selection(row["corpus"][0], case_id, framing, level)


@dataclass
class CaseView:
    selection: Selection
    source: str
    target: str
    instruction: str | None
    program: str
    pieces: list[tuple[str, str, str]]  # (kind, title, text) of each op's output, in order
    spans: pl.DataFrame                 # one row per op, with a cost column per kernel source
    totals: pl.DataFrame                # per kernel source: regenerate, program, with directives, bounds
    units: dict[str, str]               # cost column -> unit

    @property
    def copied_share(self) -> float | None:
        total = self.spans["n_tokens"].sum()
        return self.spans.filter(pl.col("kind") == "copy")["n_tokens"].sum() / total if total else None


def _pieces(program_text: str, source: str, level: str) -> list[tuple[str, str, str]]:
    from analysis.grammar.program import Copy, parse
    from analysis.grammar.resolver import resolve
    from analysis.text.tokens import load_tokenizer

    program = parse(program_text)
    bounds = load_tokenizer().encode(source).char_bounds if level == "token" else None
    out = []
    for op in program.ops:
        text = resolve(type(program)((op,)), source, bounds)
        if isinstance(op, Copy):
            out.append(("copy", f"copy {op.unit} {op.start}-{op.end}", text))
        else:
            out.append(("gen", "gen", text))
    return out


def build_view(data: ExploreData, sel: Selection) -> CaseView:
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
    return CaseView(sel, row["source"], row["target"], row.get("instruction"), program["program"][0],
                    _pieces(program["program"][0], row["source"], sel.level), table,
                    pl.DataFrame(totals) if totals else pl.DataFrame(), units)


# ---------------------------------------------------------------- HTML

def highlighted_html(view: CaseView) -> str:
    from analysis.present.pages import esc

    spans = "".join(f'<span class="cd-{kind}" title="{esc(title)}">{esc(text)}</span>' for kind, title, text in view.pieces)
    return ('<pre class="cd-pre">' + spans + "</pre>"
            '<p><span class="cd-copy">copied</span> <span class="cd-gen">generated</span></p>')


def _table_html(frame: pl.DataFrame, digits: int = 4) -> str:
    from analysis.present.pages import esc

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return esc(f"{value:.{digits}g}")
        return esc("" if value is None else value)

    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in frame.iter_rows())
    return f"<table class='cd-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_view(view: CaseView) -> "Html":
    """The case as one escaped HTML block: figures, input, gold, program, output with spans
    highlighted, per-span costs (each column in its kernel source's unit) and the case's bounds."""
    from analysis.results.numbers import fmt_pct
    from analysis.present.pages import Html, esc, lead, pre

    s = view.selection
    share = view.copied_share
    figures = [("case", s.case_id), ("corpus", s.corpus), ("framing, level", f"{s.framing}, {s.level}"),
               ("gold tokens copied", fmt_pct(share) if share is not None else "–")]
    units = "; ".join(f"{column}: {unit}" for column, unit in view.units.items())
    parts = [
        lead("The input, the gold output, the oracle program and the output with copied (green) and generated "
             "(orange) spans for one case.", figures).text,
        "<h3>Input</h3>", pre(view.source).text,
        "<h3>Gold output</h3>", pre(view.target).text,
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

    from analysis.present.pages import esc

    corpus = w.Dropdown(description="corpus", options=data.corpora(), value=start.corpus)
    framing = w.Dropdown(description="framing", options=data.framings(start.corpus), value=start.framing)
    case = w.Dropdown(description="case", options=data.case_ids(start.corpus, start.framing), value=start.case_id)
    level = w.Dropdown(description="level", options=data.levels(), value=start.level)
    out = w.HTML()

    def render(_=None) -> None:
        if case.value is None:
            out.value = "<p>No case in this corpus and framing.</p>"
            return
        try:
            out.value = render_view(build_view(data, Selection(corpus.value, case.value, framing.value, level.value))).text
        except ParamsError as exc:
            out.value = f"<div class='cd-explore'><style>{EXPLORE_CSS}</style><p class='cd-error'>{esc(exc)}</p></div>"

    cascading = {"on": False}  # a corpus change refills framing and case itself: their observers wait

    def on_corpus(_=None) -> None:
        cascading["on"] = True
        try:
            _set_choices(framing, data.framings(corpus.value))
            _set_choices(case, data.case_ids(corpus.value, framing.value))
        finally:
            cascading["on"] = False
        render()

    def on_framing(_=None) -> None:
        if cascading["on"]:
            return
        _set_choices(case, data.case_ids(corpus.value, framing.value))
        render()

    def on_case(_=None) -> None:
        if not cascading["on"]:
            render()

    corpus.observe(on_corpus, names="value")
    framing.observe(on_framing, names="value")
    case.observe(on_case, names="value")
    level.observe(render, names="value")
    render()
    box = w.VBox([w.HBox([corpus, framing]), w.HBox([case, level]), out])
    box.controls = {"corpus": corpus, "framing": framing, "case": case, "level": level, "view": out}
    return box
