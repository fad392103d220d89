"""The reports/index.html dashboard: the claims grid, the key figures inline, the NOISY banner, and every
table, figure and per-case file grouped by the claim it belongs to."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

from analysis.errors import ParamsError
from analysis.layout import CLAIMS_JSON, FIGURES, HTML, INDEX, METRICS, PERCASE, PERCASE_MANIFEST, SAMPLES, TABLES
from analysis.pipeline.io import write_text
from analysis.present.shell import Page, page, stale_banner
from analysis.claims.decision import DECISIONS
from analysis.claims.engine import claims, read_claims
from analysis.claims.verdict import DIFFERS, NOT_RUN, REPRODUCED
from analysis.claims.verdict import counts as claim_counts
from analysis.pipeline.digest import stale_stages
from analysis.pooling import PAPER_CORPORA, POOLED, STAND_IN, framing_filter
from analysis.present.kernelviews import noisy_sources
from analysis.present import charts
from analysis.present.decisionview import decision_block, decision_scopes, inline_svg, svg_width
from analysis.present.pages import STAND_IN_NOTE, claims_grid, corpus_table, esc, grid_rows, lead, show
from analysis.present.provenance import provenance, provenance_html
from analysis.results.e2e import noise_note
from analysis.results.outputs import bounds_frame, optional_table, table

# (figure stem under FIGURES, caption): the charts the dashboard shows inline, one per row at its natural width.
KEY_FIGURES = (
    ("rivals", "Beyond the paper, at batch 1: every method against AR under the judged kernel source, per corpus and "
               "pool, with case-bootstrap CIs (the best rival of each panel drawn whatever its match policy)"),
    ("kernel_speedup_h200", "Claim 1 (key chart): copy by one prefill against N decode steps on one H200 (frozen run, "
                            "bf16), the judged comparisons (both sides built alike), one line per model and context; "
                            "the graph-captured loop against the eager prefill is on the kernel page"),
    ("kernel_speedup", "Claim 1 beside it: the same on this machine's fitted profile"),
    ("bounds", "Claims 3 and 4: the closed-form bound per corpus with this machine's fitted kernel, with 95% CIs"),
    ("span_histogram_line", "Claim 2: line-level copy and gen span lengths"),
    ("perturbation", "Claim 6: exact match under off-by-one span noise"),
    ("e2e_speedup", "Beyond the paper: measured end to end, pooled, with case-bootstrap CIs, against the prediction"),
    ("pilot_curve", "Claim 7: the fine-tuning pilot's held-out learning curve (teacher-forced, every seed)"),
    ("engine_speedup", "Beyond the paper: measured in vLLM's CPU build (frozen run), throughput over AR per load with "
                       "paired request-bootstrap CIs; the simulator against it is on the engine page"),
)


def data_uri(path: Path) -> str:
    kind = {".svg": "image/svg+xml", ".png": "image/png"}[path.suffix]
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _figure(stem: str, caption: str, root: Path) -> str:
    """A key chart one a row, at its natural width up to the column's (two a row shrank the kernel charts to
    37-43%, 4 px text; `KEY_CHART_MAX_WIDTH` keeps every key chart at 80% or more of its size)."""
    for suffix in (".svg", ".png"):
        path = root / FIGURES / f"{stem}{suffix}"
        if path.is_file():
            width = svg_width(path.read_text(errors="replace")) if suffix == ".svg" else None
            size = f" width='{width}'" if width else ""
            return (f"<figure class='cd-key'><img alt='{esc(caption)}'{size} src='{data_uri(path)}'>"
                    f"<figcaption>{esc(caption)} (<a href='{esc((FIGURES / path.name).relative_to(INDEX.parent))}'>"
                    f"{esc(path.name)}</a>)</figcaption></figure>")
    return f"<figure><figcaption>{esc(caption)}: not produced by this run</figcaption></figure>"


def _serving_figure(root: Path) -> str:
    """The serving chart (every method over AR against concurrency, per kernel source), drawn from this run's
    serving table: the serving stage saves no figure of its own."""
    frame = optional_table("serving", root / TABLES, infer_all_rows=True)
    if frame is None or frame.is_empty():
        return "<figure><figcaption>Beyond the paper, under load: not produced by this run</figcaption></figure>"
    budget = frame["max_num_batched_tokens"].min()
    chart = charts.serving_speedup(frame.filter(frame["max_num_batched_tokens"] == budget),
                                   f"Output tokens/s over AR against concurrency, budget {budget:,} tokens")
    return inline_svg(chart, "Beyond the paper, under load: every method's output tokens/s over AR along the closed-"
                             "loop concurrency sweep, one panel per kernel source (solid: Copy-as-Decode; dashed: "
                             "rivals; dotted: the directive-free bound), from reports/tables/serving.csv")


# The index's file lists, grouped by the claim (or stage) a file belongs to: (group, stem prefixes). A stem
# goes to the first group with a matching prefix; anything else is listed under "other".
FILE_GROUPS = (
    ("Claim 1: kernel speedup", ("kernel", "latency_holdout")),
    ("Claims 2 and 4: coverage and spans", ("coverage", "span_histogram", "line_boundaries", "line_moves")),
    ("Claims 3 and 4: bounds and the cost-optimal oracle", ("bounds", "optimal", "min_copy_sweep")),
    ("Claim 5: round trip", ("roundtrip",)),
    ("Claim 6: exact match under span noise", ("perturbation",)),
    ("Claim 7: the fine-tuning pilot", ("pilot",)),
    ("Beyond the paper: end to end, constrained decoding", ("e2e", "mask_benchmark", "decode")),
    ("Beyond the paper: measured in a real engine (vLLM)", ("engine",)),
    ("Corpora and edit formats", ("corpora", "commit_repositories", "edit_formats", "token_boundaries", "formats")),
    ("Claims and headline figures", ("headline",)),
    ("Beyond the paper: against the alternatives, under load", ("rivals", "serving", "step_cost")),
)
OTHER_FILES = "other"


def file_group(stem: str) -> str:
    return next((group for group, prefixes in FILE_GROUPS if stem.startswith(prefixes)), OTHER_FILES)


def _links(root: Path, folder: Path, suffixes: tuple[str, ...]) -> str:
    """The files of `folder` grouped by claim (FILE_GROUPS), one line per stem with a link per format."""
    files = sorted(p for p in (root / folder).glob("*") if p.suffix in suffixes)
    if not files:
        return "<p>none produced by this run</p>"
    rel = folder.relative_to(INDEX.parent)
    stems: dict[str, list[Path]] = {}
    for path in files:
        stems.setdefault(path.stem, []).append(path)
    order = [g for g, _ in FILE_GROUPS] + [OTHER_FILES]
    grouped: dict[str, list[str]] = {}
    for stem, paths in stems.items():
        links = " · ".join(f"<a href='{esc(rel / p.name)}'>{esc(p.suffix.lstrip('.'))}</a>" for p in paths)
        grouped.setdefault(file_group(stem), []).append(f"<li><code>{esc(stem)}</code> {links}</li>")
    return "".join(f"<h3>{esc(group)}</h3><ul class='cd-files'>{''.join(grouped[group])}</ul>"
                   for group in order if group in grouped)


def _percase_links(root: Path) -> str:
    """The committed per-case tables (reports/percase/), when this run wrote them."""
    if not (root / PERCASE_MANIFEST).is_file():
        return ""
    rel = lambda p: esc(p.relative_to(INDEX.parent))  # noqa: E731
    tables = sorted(p.name for p in (root / PERCASE).glob("*.parquet"))
    return ("<h2>Per-case results</h2><p>This run's per-case tables, committed: "
            f"<a href='{rel(SAMPLES)}'>samples.jsonl</a> (one line per case and method), "
            f"<a href='{rel(PERCASE_MANIFEST)}'>manifest.json</a> (rows, bytes, sources) and "
            + ", ".join(f"<a href='{rel(PERCASE / t)}'>{esc(t)}</a>" for t in tables)
            + "; <code>copydecode compare</code> and the explorer read them on a clone without <code>data/</code>.</p>")


def _claims_inputs(root: Path) -> tuple[set[str] | None, dict[str, int]]:
    """This run's corpora and each corpus's case count (line level, its reported framing), from the
    coverage table; (None, {}) when the table is absent."""
    import polars as pl

    try:
        cov = table("coverage", root / TABLES)
    except ParamsError:
        return None, {}
    line = cov.filter((pl.col("level") == "line") & framing_filter("body"))
    return set(cov["corpus"].to_list()) - {POOLED}, {r["corpus"]: r["n_cases"] for r in line.iter_rows(named=True)}


def _own_corpora(root: Path, corpora: set[str]) -> str:
    """The run's own corpora table (coverage, bound, formats), or '' when the coverage table is absent."""
    def optional(read):
        try:
            return read()
        except ParamsError:
            return None

    coverage = optional(lambda: table("coverage", root / TABLES))
    if coverage is None or not corpora:
        return ""

    frame = corpus_table(coverage.filter(framing_filter("body")), optional(lambda: bounds_frame(root / TABLES)),
                         optional(lambda: table("edit_formats", root / TABLES)), sorted(corpora))
    return show(frame, lift_constants=False).as_raw_html()


def noise_banner(root: Path = Path(".")) -> str:
    """The NOISY line of the index: which of this run's timed stages (the kernel profile, the e2e run) flagged
    their own run as noisy, and what tripped it; '' when neither did (or neither ran)."""
    import json

    def read(name: str) -> dict:
        path = root / METRICS / f"{name}.json"
        try:
            return json.loads(path.read_text()) if path.is_file() else {}
        except (OSError, ValueError):
            return {}

    parts = []
    kernel = noisy_sources(read("kernels"))
    if kernel:
        parts.append(f"the kernel profile (<a href='{esc(HTML.relative_to(INDEX.parent) / 'kernel.html')}'>kernel</a>): "
                     f"{esc(kernel)}")
    e2e = noise_note(read("e2e")).removeprefix("; marked NOISY: ")
    if e2e:
        parts.append(f"the end-to-end run (<a href='{esc(HTML.relative_to(INDEX.parent) / 'e2e.html')}'>e2e</a>): "
                     f"{esc(e2e)}")
    if not parts:
        return ""
    return ("<div class='cd-lead cd-stale'><p><strong>NOISY timings in this run.</strong> "
            + "; ".join(parts) + ". The ratios built on them (claim 1, the fitted-kernel bounds, the e2e speedups) "
            "are indicative: rerun on a quiet machine to judge them.</p></div>")


COLUMN_WIDTH = 1144  # the page's content column (analysis.present.shell: main 1200 px, 28 px padding a side)
KEY_CHART_MAX_WIDTH = round(COLUMN_WIDTH / 0.8)  # a wider key chart would show its 12-13 px text below 10 px
PREPRINT_STATUS = ("The paper is arXiv 2604.18170 v2 (26 May 2026), a preprint reported withdrawn after v2 (no later "
                   "version, no public code): this suite evaluates the mechanism it describes, and every paper figure "
                   "is an unreviewed target. \"Reproduced\" below reads as agreement with the preprint's figure.")


def collapsed(items: list) -> list:
    """The claims for the grid: a claim whose scopes are decisions (shown in the first block, each with its own
    number, interval and chip) becomes one row that points there, so the grid does not repeat one reason per scope."""
    out = []
    for item in items:
        decided = decision_scopes([item])
        if not decided:
            out.append(item)
            continue
        tally = ", ".join(f"{n} {word}" for word in DECISIONS if (n := sum(s.decision == word for s in decided)))
        out.append(replace(item, scopes=(), ours=f"{len(decided)} decisions ({tally}): in the first block above, "
                                                 "each with its interval and source"))
    return out


def index_html(pages: list[Page], root: Path = Path("."), items: list | None = None) -> str:
    """The dashboard: a compact claims grid (one row per claim, or per corpus / kernel source where a claim
    has several; paper | ours | verdict chip | link), or, on a run without the paper's corpora, the run's
    own corpus table first; then key charts, report links, tables, metrics and provenance."""
    if items is None:  # the stage passes the claims it has just written to CLAIMS_JSON (write_claims)
        items = read_claims(root / CLAIMS_JSON) if (root / CLAIMS_JSON).is_file() else claims(root / TABLES, root / METRICS)
    counts = claim_counts(items)
    rel_html = HTML.relative_to(INDEX.parent)
    reports = "".join(f"<li><a href='{esc(rel_html / p.path.name)}'>{esc(p.title)}</a></li>" for p in pages)
    corpora, cases = _claims_inputs(root)
    paper_run = corpora is None or bool(corpora & set(PAPER_CORPORA))
    stand_in = corpora is None or bool(corpora & set(STAND_IN))  # the stand-in note only where one is shown
    grid = claims_grid(grid_rows(collapsed(items), cases), lambda name: str(rel_html / f"{name}.html")).text
    claims_block = ("<h2>Paper versus ours</h2>" + grid
                    + f"<p class='cd-note'>{esc(STAND_IN_NOTE) + ' ' if stand_in else ''}Each row is one scope the "
                      "paper states a figure for, with its own verdict and why; a judged row is marked, and only "
                      "judged rows decide a claim's verdict. Each link opens the section with the method and caveats "
                      f"(every claim and scope, machine-readable: {esc(CLAIMS_JSON.name)}). The full claim table: "
                      f"<a href='{esc(rel_html / 'summary.html')}'>summary</a>.</p>")
    own = _own_corpora(root, (corpora or set()) - set(PAPER_CORPORA))
    if paper_run:
        opening = claims_block + (f"<h2>This run's other corpora</h2>{own}" if own else "")
    else:
        opening = (f"<h2>Your corpora</h2>{own or '<p>no coverage table in this run</p>'}"
                   + "<p>This run holds none of the paper's corpora, so the paper's claims below do not apply to it.</p>"
                   + claims_block)
    body = (
        "<h1>Copy-as-Decode: against what you would run instead, and the preprint's claims</h1>"
        + f"<p class='cd-note'>{esc(PREPRINT_STATUS)}</p>"
        + decision_block(items, root)
        + "<h2>The preprint's claims next to this suite's</h2>"
        + lead(
            "Each claim of arXiv 2604.18170 beside what this suite measured, with a verdict computed from the "
            "stage outputs under the thresholds stated in analysis/data/paper_claims.json; `reproduced` means the "
            "figure agrees with the preprint's. "
            + ("ProbeEdit-S* is a stand-in for the paper's unpublished ProbeEdit corpus. " if stand_in else "")
            + "Kernel timings come from the machine in the provenance below, not the paper's A100.",
            [(f"claims {'that differ' if v == DIFFERS else v}", str(n)) for v, n in counts.items()
             if n or v in (REPRODUCED, DIFFERS, NOT_RUN)]).text
        + noise_banner(root)
        + opening
        + "<h2>Key charts</h2><div class='cd-figures cd-keys'>"
        + _figure(*KEY_FIGURES[0], root) + _serving_figure(root)
        + "".join(_figure(stem, caption, root) for stem, caption in KEY_FIGURES[1:]) + "</div>"
        + f"<h2>Reports</h2><ul class='cd-links'>{reports}</ul>"
        + "<h2>Tables</h2>" + _links(root, TABLES, (".md", ".csv"))
        + "<h2>Metrics</h2>" + _links(root, METRICS, (".json",))
        + _percase_links(root)
        + provenance_html(provenance(root)).text
    )
    return page("copydecode: Copy-as-Decode reports", body)


def write_index(pages: list[Page], root: Path = Path("."), stale: list[str] | None = None,
                items: list | None = None) -> Path:
    target = Path(root) / INDEX
    text = index_html(pages, Path(root), items)
    if stale:  # the claims combine every stage's outputs: say which were built from another corpus
        text = text.replace("<main>", "<main>" + stale_banner(stale), 1)
    write_text(text, target)
    return target


def stale_pages_reasons(root: Path) -> dict[str, str]:
    """analysis.pipeline.digest.stale_stages of the output root `root` (its records hold relative paths)."""
    import contextlib

    with contextlib.chdir(root):
        return stale_stages()
