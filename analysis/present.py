"""What the reports show, and how: tables read back from the stages' outputs, formatted for reading
(speedups `12.3x`, shares `74.3%`, intervals `[70.2, 77.4]`), the paper-versus-ours claims with a
computed verdict each, and the provenance footer. Tables only: charts live in the notebooks, which
draw them from the same filtered frames so that they honour the notebook's parameters.

Everything a report writes passes through `esc` or great_tables (which escapes cell text, titles and
notes): a case id or corpus name can never inject markup into a page.
"""

from __future__ import annotations

import hashlib
import html
import json
import platform
import subprocess
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

import polars as pl

from analysis.errors import ParamsError
from analysis.layout import (
    LATENCY_MODEL,
    METRICS,
    POOLED,
    TABLES,
    framing_filter,
)
from analysis.params import DEFAULT_PARAMS

PAPER = Path(__file__).parent / "data" / "paper_claims.json"
STAND_IN_NOTE = "* ProbeEdit-S is this suite's stand-in for the paper's unpublished ProbeEdit corpus."
MISSING = "–"

# ---------------------------------------------------------------- reading stage outputs


def table(name: str, root: Path = TABLES) -> pl.DataFrame:
    path = Path(root) / f"{name}.csv"
    if not path.is_file():
        raise ParamsError(f"{path} not found; run `dvc repro` first")
    return pl.read_csv(path)


def metrics(name: str, root: Path = METRICS) -> dict:
    path = Path(root) / f"{name}.json"
    if not path.is_file():
        raise ParamsError(f"{path} not found; run `dvc repro` first")
    return json.loads(path.read_text())


def read_parquet_output(path: Path, stage: str) -> pl.DataFrame:
    """A stage's parquet output (data/...), or a ParamsError naming the stage that writes it."""
    from analysis.io import read_parquet

    return read_parquet(path, stage, ParamsError)


def latency_model(path: Path = LATENCY_MODEL) -> dict:
    if not Path(path).is_file():
        raise ParamsError(f"{path} not found; run `copydecode kernels fit` first")
    return json.loads(Path(path).read_text())


def pick(frame: pl.DataFrame, **filters) -> pl.DataFrame:
    """Filter on each given column; 'all' (or None) keeps everything; an unknown value is an error."""
    for column, value in filters.items():
        if value in (None, "all"):
            continue
        known = sorted(set(frame[column].cast(pl.String).to_list()))
        if str(value) not in known:
            raise ParamsError(f"unknown {column} {value!r}; known: {', '.join(known)}")
        frame = frame.filter(pl.col(column).cast(pl.String) == str(value))
    return frame


def pick_framing(frame: pl.DataFrame, framing: str) -> pl.DataFrame:
    """A framing's rows plus the single-framing corpora (the pooling rule of analysis.layout)."""
    if framing in (None, "all"):
        return frame
    known = set(frame["framing"].to_list())
    if framing not in known:
        raise ParamsError(f"unknown framing {framing!r}; known: {', '.join(sorted(known))}")
    return frame.filter(framing_filter(framing))


# ---------------------------------------------------------------- formatting numbers


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def fmt_x(value: float | None, digits: int = 1) -> str:
    """A speedup: 12.3x."""
    return MISSING if _missing(value) else f"{value:.{digits}f}x"


def fmt_pct(share: float | None, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage: 74.3%."""
    return MISSING if _missing(share) else f"{100 * share:.{digits}f}%"


def fmt_ci(low: float | None, high: float | None, *, pct: bool = False, digits: int = 1) -> str:
    """An interval in the unit of its value, without the unit: [70.2, 77.4]."""
    if _missing(low) or _missing(high):
        return MISSING
    scale = 100 if pct else 1
    return f"[{scale * low:.{digits}f}, {scale * high:.{digits}f}]"


def fmt_int(value: int | None) -> str:
    return MISSING if _missing(value) else f"{int(value):,}"


def fmt_num(value: float | None, digits: int = 3) -> str:
    """A plain measurement to `digits` significant figures, without scientific notation for
    everyday magnitudes (the tables are read, not parsed)."""
    if _missing(value):
        return MISSING
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 10 ** digits:
        return f"{value:,.0f}"
    if magnitude < 1e-3:
        return f"{value:.{digits - 1}e}"
    text = f"{value:.{digits}g}"
    return f"{float(text):,.{max(0, digits - 1 - _exponent(magnitude))}f}"


def _exponent(magnitude: float) -> int:
    return int(f"{magnitude:e}".split("e")[1])


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
    if _missing(value):
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
    return frame.with_columns(pl.col("corpus").replace("ProbeEdit-S", "ProbeEdit-S*"))


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


# ---------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Provenance:
    commit: str
    date: str
    machine: str
    torch: str
    transformers: str
    versions_from: str
    params_sha256: str


def _git_commit(root: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown (git: {err})"
    if head.returncode != 0:
        return "unknown (not a git checkout)"
    return head.stdout.strip()[:12] + (" with uncommitted changes" if dirty.stdout.strip() else "")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name and logical core count ('AMD EPYC 7B13, 2 cores'), not the architecture."""
    if cpuinfo.is_file():
        lines = cpuinfo.read_text(errors="replace").splitlines()
        names = [ln.split(":", 1)[1].strip() for ln in lines if ln.lower().startswith(("model name", "hardware"))]
        cores = sum(1 for ln in lines if ln.lower().startswith("processor"))
        if names:
            return f"{names[0]}, {cores} logical cores"
    return platform.processor() or f"unknown CPU ({platform.machine()})"


def _recorded_versions(model_path: Path) -> tuple[str, str, str] | None:
    """torch/transformers as recorded beside the kernel timings (the environment that made them)."""
    if not Path(model_path).is_file():
        return None
    env = json.loads(Path(model_path).read_text()).get("environment") or []
    torch = sorted({str(e["torch_version"]) for e in env if e.get("torch_version")})
    transformers = sorted({str(e["transformers_version"]) for e in env if e.get("transformers_version")})
    if not torch or not transformers:
        return None
    return ", ".join(torch), ", ".join(transformers), f"recorded with the kernel timings ({model_path})"


def _installed(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def provenance(root: Path = Path("."), params: Path = DEFAULT_PARAMS, model_path: Path = LATENCY_MODEL) -> Provenance:
    """Where the figures come from. Versions are read from the timing files' recorded environment
    when present, else from the installed packages' metadata (never by importing torch)."""
    root = Path(root)
    params_file = root / params
    digest = hashlib.sha256(params_file.read_bytes()).hexdigest() if params_file.is_file() else f"no {params}"
    recorded = _recorded_versions(root / model_path)
    torch, transformers, source = recorded or (_installed("torch"), _installed("transformers"),
                                               "installed packages (no recorded environment)")
    return Provenance(
        commit=_git_commit(root),
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        machine=cpu_model(),
        torch=torch,
        transformers=transformers,
        versions_from=source,
        params_sha256=digest,
    )


def provenance_html(prov: Provenance | None = None) -> Html:
    prov = prov or provenance()
    labels = {"commit": "git commit", "date": "rendered", "machine": "machine", "torch": "torch",
              "transformers": "transformers", "versions_from": "versions from", "params_sha256": "params.yaml sha256"}
    rows = "".join(f"<tr><th>{esc(labels[f.name])}</th><td>{esc(getattr(prov, f.name))}</td></tr>" for f in fields(prov))
    return Html(f"<div class='cd-provenance'><h2>Provenance</h2><table class='cd-prov'>{rows}</table></div>")


# ---------------------------------------------------------------- the paper's claims, with verdicts

REPRODUCED, DIFFERS, NOT_RUN, BEYOND = "reproduced", "differs", "not run", "beyond the paper"


@dataclass(frozen=True)
class Claim:
    claim: str
    paper: str
    ours: str
    verdict: str
    why: str
    method: str


def paper_claims(path: Path = PAPER) -> dict:
    return json.loads(Path(path).read_text())


def _body(frame: pl.DataFrame) -> pl.DataFrame:
    """Body framing of the multi-framing corpora plus every single-framing corpus, without pools."""
    return frame.filter(framing_filter("body") & (pl.col("corpus") != POOLED))


def _paper_only(frame: pl.DataFrame) -> pl.DataFrame:
    """The corpora the paper reports on (ProbeEdit-S* standing in for ProbeEdit): a claim's range is
    compared over the same corpora, while CommitEdits and a user's pairs appear in the corpus report."""
    return frame.filter(pl.col("corpus").is_in(list(PAPER_CORPORA.values())))


def _within_factor(ours: float, paper: float, tol: float) -> bool:
    return paper / (1 + tol) <= ours <= paper * (1 + tol)


def _range_text(low: float, high: float, fmt: Callable[[float], str]) -> str:
    return f"{fmt(low)}-{fmt(high)}"


def _kernel_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    c = paper["kernel_speedup"]
    kern = table("kernel_speedup", tables)
    grid = kern.filter(pl.col("n").is_between(c["n_min"], c["n_max"]))
    strongest, eager = grid.filter(pl.col("is_strongest")), grid.filter(pl.col("baseline") == "eager")
    low, high = strongest["speedup"].min(), strongest["speedup"].max()
    setups = sorted({f"{r['model']} {r['dtype']} {r['device']}" for r in grid.iter_rows(named=True)})
    ok_low, ok_high = _within_factor(low, c["low"], c["rel_tolerance"]), _within_factor(high, c["high"], c["rel_tolerance"])
    if ok_low and ok_high:
        why = "both ends within the stated tolerance"
    else:
        off = [f"{'low' if i == 0 else 'high'} end {fmt_x(o)} vs {fmt_x(p)}"
               for i, (o, p, ok) in enumerate(((low, c["low"], ok_low), (high, c["high"], ok_high))) if not ok]
        why = "; ".join(off) + f": measured on {', '.join(setups)}, the paper on an A100 in bf16"
        roof = roofline_metrics(metrics_dir)
        if roof:
            why += (f"; this machine's measured roofline caps the ratio near {fmt_x(roof['ceiling'])} "
                    f"({roof['dtype']}, ridge {fmt_num(roof['ridge_flops_per_byte'])} FLOP/byte; see the kernel report)")
    return Claim(
        claim=f"1. kernel speedup T_ar/T_prefill, N in [{c['n_min']}, {c['n_max']}]",
        paper=c["text"],
        ours=f"{_range_text(low, high, fmt_x)} vs the strongest AR loop; {_range_text(eager['speedup'].min(), eager['speedup'].max(), fmt_x)} vs eager",
        verdict=REPRODUCED if ok_low and ok_high else DIFFERS, why=why,
        method=f"{', '.join(setups)}; random weights; median of paired repeats [kernels_fit]")


def _ceiling_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    c = paper["copy_ceiling"]
    cov = _paper_only(_body(table("coverage", tables))).filter(pl.col("level") == "line").sort("coverage")
    low, high = cov["coverage"].min(), cov["coverage"].max()
    tol = c["tolerance_pp"] / 100
    ok = abs(low - c["low"]) <= tol and abs(high - c["high"]) <= tol
    why = (f"our range {_range_text(low, high, fmt_pct)} is within {c['tolerance_pp']:g} pp of the paper's ends" if ok else
           f"our range {_range_text(low, high, fmt_pct)} is more than {c['tolerance_pp']:g} pp from "
           f"{_range_text(c['low'], c['high'], fmt_pct)}")
    return Claim(
        claim="2. line-level copy ceiling (body)", paper=c["text"],
        ours="; ".join(f"{_star(r['corpus'])} {fmt_pct(r['coverage'])} {fmt_ci(r['ci_low'], r['ci_high'], pct=True)}"
                       for r in cov.iter_rows(named=True)),
        verdict=REPRODUCED if ok else DIFFERS, why=why,
        method="exact line LCS oracle over the paper's three corpora, Qwen2.5 tokens, 95% bootstrap CI [spans]")


def _star(corpus: str) -> str:
    return "ProbeEdit-S*" if corpus == "ProbeEdit-S" else corpus


# Corpus names in paper_claims.json["bounds"] (the paper's) -> this suite's corpus.
PAPER_CORPORA = {"ProbeEdit": "ProbeEdit-S", "HEvalFix-Py": "HEvalFix-Py", "HEvalFix-JS": "HEvalFix-JS"}
POOLINGS = ("ratio_of_sums", "mean_of_corpora")
BOUNDS_COLUMNS = ("kernel_source", "pooling", "extrapolated_spans")


def bounds_frame(tables: Path = TABLES) -> pl.DataFrame:
    """reports/tables/bounds.csv, checked for the kernel-source format (kernel_source, pooling)."""
    frame = table("bounds", tables)
    missing = [c for c in BOUNDS_COLUMNS if c not in frame.columns]
    if missing:
        raise ParamsError(f"{Path(tables) / 'bounds.csv'} has no {', '.join(missing)} column(s): it predates kernel "
                          "sources; rerun `copydecode bounds`")
    return frame


def _line_ideal(bounds: pl.DataFrame, kernel_source: str, baseline: str | None = None) -> pl.DataFrame:
    rows = bounds.filter((pl.col("level") == "line") & (pl.col("variant") == "ideal") & framing_filter("body")
                         & (pl.col("kernel_source") == kernel_source))
    return rows if baseline is None else rows.filter(pl.col("baseline") == baseline)


def _per_corpus(rows: pl.DataFrame) -> dict[str, dict]:
    return {r["corpus"]: r for r in rows.filter(pl.col("pooling") == "corpus").iter_rows(named=True)}


def _pooled(rows: pl.DataFrame) -> dict[str, dict]:
    return {r["pooling"]: r for r in rows.filter(pl.col("corpus") == POOLED).iter_rows(named=True)}


def _paper_pool(tables: Path, kernel_source: str) -> dict[str, dict]:
    """Pooled line/ideal/body rows over the paper's own corpora only (bounds_paper_pool.csv), by pooling
    rule; empty when the stage wrote none (this suite's pool holds only the paper's corpora)."""
    path = Path(tables) / "bounds_paper_pool.csv"
    if not path.is_file() or path.stat().st_size == 0:
        return {}
    rows = _line_ideal(pl.read_csv(path), kernel_source)
    return {r["pooling"]: r for r in rows.iter_rows(named=True)}


def _bound_text(row: dict) -> str:
    return f"{fmt_x(row['bound'])} {fmt_ci(row['ci_low'], row['ci_high'])}"


def _pooled_text(pooled: dict[str, dict]) -> str:
    return " / ".join(f"{fmt_x(pooled[p]['bound'])} ({p.replace('_', ' ')})" for p in POOLINGS if p in pooled)


def generated_share(tables: Path, corpus: str, level: str = "line") -> float | None:
    """Share of a corpus's gold tokens that no copy produces (1 - coverage), body framing or its own."""
    cov = _body(table("coverage", tables)).filter((pl.col("level") == level) & (pl.col("corpus") == corpus))
    return None if cov.height == 0 else 1.0 - float(cov["coverage"][0])


def _ceiling_reason(name: str, ours: dict, paper_value: float, tables: Path) -> str:
    """Why our bound is above the paper's, from the coverage table: with free copies a program still
    decodes every generated token, so bound <= 1 / (generated share) (the ideal variant's cap)."""
    share = generated_share(tables, name)
    text = f"{_star(name)} {fmt_x(ours['bound'])} vs {fmt_x(paper_value)}"
    if share is None or share <= 0 or ours["bound"] <= paper_value:
        return text
    return (text + f": a bound cannot exceed 1 / (share of gold tokens generated); {fmt_x(paper_value)} needs at least "
            f"{fmt_pct(1 / paper_value)} generated, {_star(name)} generates {fmt_pct(share)} (cap {fmt_x(1 / share)}), "
            "so its edits are smaller relative to the output than the paper corpus's")


def paper_comparison(tables: Path = TABLES, paper_path: Path = PAPER) -> pl.DataFrame:
    """Claim 3 like with like, one row per corpus and pooling rule: the paper's bound, the paper's
    kernel composed with this suite's spans (95% CI), whether the paper's figure lies inside that CI
    widened by the claim's tolerance, and this machine's fitted kernel beside it."""
    c = paper_claims(paper_path)["bounds"]
    bounds = bounds_frame(tables)
    composed = _line_ideal(bounds, "paper")
    fitted = _line_ideal(bounds, "fit", c.get("fit_baseline", "eager"))
    ours_names = {v: k for k, v in PAPER_CORPORA.items()}
    per_paper = _per_corpus(composed)
    paper_cases = sum(per_paper[n]["n_cases"] for n in ours_names if n in per_paper)
    rows = []
    for r in composed.sort(pl.col("corpus") == POOLED, "corpus", "pooling").iter_rows(named=True):
        key = ours_names.get(r["corpus"], POOLED if r["corpus"] == POOLED else None)
        comparable = key is not None and (key != POOLED or (r["pooling"] == c.get("pooling", "ratio_of_sums")
                                                            and r["n_cases"] == paper_cases))
        fit = fitted.filter((pl.col("corpus") == r["corpus"]) & (pl.col("pooling") == r["pooling"]))
        tol = c["rel_tolerance"]
        rows.append({
            "corpus": r["corpus"] if r["corpus"] != POOLED else f"pooled ({r['pooling'].replace('_', ' ')})",
            "cases": r["n_cases"], "paper": fmt_x(c[key]) if comparable else MISSING,
            "paper kernel x our spans": _bound_text(r),
            "paper inside CI": (("yes" if r["ci_low"] / (1 + tol) <= c[key] <= r["ci_high"] * (1 + tol) else "no")
                                if comparable else "not comparable"),
            "fitted kernel": _bound_text(fit.row(0, named=True)) if fit.height else MISSING,
        })
    return pl.DataFrame(rows)


def _bounds_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    """Like with like: the paper's kernel curve composed with this suite's spans against the paper's
    bounds (the verdict); this machine's fitted kernel is shown beside it, not judged."""
    c = paper["bounds"]
    bounds = bounds_frame(tables)
    composed = _line_ideal(bounds, "paper")
    if composed.height == 0:
        raise ParamsError("bounds.csv has no paper-kernel rows; add `paper` to bounds.kernel_sources")
    ours, pooled = _per_corpus(composed), _pooled(composed)
    tol = c["rel_tolerance"]
    inside = lambda row, value: row["ci_low"] / (1 + tol) <= value <= row["ci_high"] * (1 + tol)
    compared = [(name, key) for key, name in PAPER_CORPORA.items() if name in ours and key in c]
    agree = [name for name, key in compared if inside(ours[name], c[key])]
    off = [_ceiling_reason(name, ours[name], c[key], tables) for name, key in compared if name not in agree]
    pool_rule = c.get("pooling", "ratio_of_sums")
    paper_cases = sum(ours[name]["n_cases"] for name, _ in compared)
    extra = sorted(set(ours) - {name for name, _ in compared})
    paper_pools = _paper_pool(tables, "paper")
    notes = []
    if POOLED in c and pool_rule in pooled:
        if pooled[pool_rule]["n_cases"] == paper_cases and not extra:
            if not inside(pooled[pool_rule], c[POOLED]):
                off.append(f"pooled {fmt_x(pooled[pool_rule]['bound'])} ({pool_rule.replace('_', ' ')}) vs {fmt_x(c[POOLED])}")
        else:
            paper_pool = paper_pools.get(pool_rule)
            if paper_pool is not None and paper_pool["n_cases"] == paper_cases:
                if not inside(paper_pool, c[POOLED]):
                    off.append(f"pooled over the paper's corpora {fmt_x(paper_pool['bound'])} "
                               f"({pool_rule.replace('_', ' ')}) vs {fmt_x(c[POOLED])}")
                else:
                    agree.append(f"pooled over the paper's corpora ({fmt_x(paper_pool['bound'])})")
            else:
                notes.append(f"pooled not compared: this suite's pool also holds {', '.join(extra)} "
                             f"({fmt_int(pooled[pool_rule]['n_cases'])} cases against the paper corpora's "
                             f"{fmt_int(paper_cases)})")
    fitted = _line_ideal(bounds, "fit", c.get("fit_baseline", "eager"))
    fit_text = ""
    if fitted.height:
        fit_ours, fit_pooled = _per_corpus(fitted), _pooled(fitted)
        fit_text = (f". Beside it, this machine's fitted kernel ({fitted['baseline'][0]} AR): "
                    + "; ".join(f"{_star(n)} {fmt_x(fit_ours[n]['bound'])}" for n, _ in compared if n in fit_ours)
                    + (f"; pooled {_pooled_text(fit_pooled)}" if fit_pooled else ""))
    why = "; ".join(([f"{', '.join(_star(n) for n in agree)}: the paper's bound inside our widened CI"] if agree else [])
                    + off + notes)
    return Claim(
        claim="3. closed-form bound, line level, ideal", paper=c["text"],
        ours=("paper kernel x this suite's spans: "
              + "; ".join(f"{_star(n)} {_bound_text(ours[n])}" for n, _ in compared)
              + (f"; pooled {_pooled_text(pooled)}" if pooled else "")
              + (f"; pooled over the paper's corpora {_pooled_text(paper_pools)}" if paper_pools else "") + fit_text),
        verdict=REPRODUCED if compared and not off else DIFFERS, why=why or "nothing to compare",
        method="spans x the paper's kernel curve (6.8x at N=8, 303x at N=512); the fitted CPU kernel beside it [bounds]")


def _token_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    """Coverage from the spans; floors like with like (the paper's kernel), the fitted kernel's beside."""
    c = paper["token_level"]
    cov = _paper_only(_body(table("coverage", tables))).filter(pl.col("level") == "token")
    bounds = bounds_frame(tables)
    floor_rows = _paper_only(_body(bounds)).filter((pl.col("level") == "token") & (pl.col("variant") == "overhead"))
    floors = floor_rows.filter(pl.col("kernel_source") == "paper")
    fitted = floor_rows.filter((pl.col("kernel_source") == "fit") & (pl.col("baseline") == c.get("fit_baseline", "eager")))
    if floors.height == 0:
        raise ParamsError("bounds.csv has no paper-kernel rows; add `paper` to bounds.kernel_sources")
    tol_pp, tol = c["tolerance_pp"] / 100, c["rel_tolerance"]
    cov_lo, cov_hi, fl_lo, fl_hi = cov["coverage"].min(), cov["coverage"].max(), floors["bound"].min(), floors["bound"].max()
    cov_ok = c["coverage_low"] - tol_pp <= cov_lo and cov_hi <= c["coverage_high"] + tol_pp
    floor_ok = c["floor_low"] / (1 + tol) <= fl_lo and fl_hi <= c["floor_high"] * (1 + tol)
    reasons = []
    if not cov_ok:
        low, high = cov.sort("coverage").row(0, named=True), cov.sort("coverage").row(-1, named=True)
        reasons.append(f"coverage {_range_text(cov_lo, cov_hi, fmt_pct)} ({_star(low['corpus'])} to {_star(high['corpus'])}) "
                       f"outside the paper's range widened by {c['tolerance_pp']:g} pp")
    if not floor_ok:
        low, high = floors.sort("bound").row(0, named=True), floors.sort("bound").row(-1, named=True)
        extrapolated = int(floors["extrapolated_spans"].sum())
        reasons.append(f"floors {_range_text(fl_lo, fl_hi, fmt_x)} ({_star(low['corpus'])} to {_star(high['corpus'])}) "
                       f"outside {_range_text(c['floor_low'], c['floor_high'], fmt_x)} widened by {100 * tol:.0f}%"
                       + (f"; {fmt_int(extrapolated)} copy spans lie outside the paper curve's N range and are "
                          "extrapolated" if extrapolated else ""))
    fit_text = (f"; this machine's fitted kernel ({fitted['baseline'][0]} AR): floors "
                f"{_range_text(fitted['bound'].min(), fitted['bound'].max(), fmt_x)}") if fitted.height else ""
    return Claim(
        claim="4. token level: coverage and floors", paper=c["text"],
        ours=(f"coverage {_range_text(cov_lo, cov_hi, fmt_pct)}; floors with the paper kernel "
              f"{_range_text(fl_lo, fl_hi, fmt_x)}{fit_text}"),
        verdict=REPRODUCED if cov_ok and floor_ok else DIFFERS,
        why="; ".join(reasons) or "coverage and floors within the stated tolerances",
        method="suffix-automaton oracle; floor = bound with every directive token decoded, paper kernel [spans, bounds]")


def _lossless_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    c = paper["losslessness"]
    rt = metrics("roundtrip", metrics_dir)
    ok = rt["failed"] <= c["max_failures"]
    return Claim(
        claim="5. lossless round trip", paper=c["text"],
        ours=f"{fmt_int(rt['passed'])}/{fmt_int(rt['programs'])} programs (line and token level, every framing)",
        verdict=REPRODUCED if ok else DIFFERS,
        why="no program failed" if ok else f"{rt['failed']} programs did not round-trip",
        method="resolve(oracle) == target, byte for byte [roundtrip]")


def _crossing_text(tables: Path, em_pct: float) -> str:
    """Where pooled line-level EM crosses the paper's figure, per perturbation definition: the paper
    does not state its noise rate or definition, so the comparison is underdetermined."""
    path = Path(tables) / "perturbation_crossing.csv"
    if not path.is_file():
        return "the paper's noise rate and definition are not stated (underdetermined)"
    rows = pl.read_csv(path).filter((pl.col("level") == "line") & (pl.col("definition") != "paper"))
    parts = []
    for (definition,), group in rows.group_by("definition", maintain_order=True):
        rates = group["crossing_rate"].drop_nulls()
        never = group.height - rates.len()
        text = (f"{definition} at rate {rates.min():.2f}-{rates.max():.2f}" if rates.len() else f"{definition} never")
        parts.append(text + (f" ({never} kinds never)" if never and rates.len() else ""))
    return (f"the paper's noise rate and definition are not stated (underdetermined); pooled EM crosses "
            f"{em_pct:.2f}% for " + ", ".join(parts))


def _perturb_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    c = paper["perturbation"]
    pert = table("perturbation", tables)
    pooled = pert.filter((pl.col("corpus") == POOLED) & (pl.col("framing") == "body") & (pl.col("rate") == 1.0)
                         & (pl.col("level") == "line")).sort("kind")
    off = [r for r in pooled.iter_rows(named=True) if abs(100 * r["em"] - c["em_pct"]) > c["tolerance_pp"]]
    why = f"within {c['tolerance_pp']:g} pp for every kind"
    if off:
        why = f"{len(off)} of {pooled.height} kinds more than {c['tolerance_pp']:g} pp from {c['em_pct']:.2f}%"
        if all(abs(r["em"] - r["no_copy"]) < 0.005 for r in off):
            why += (f": our EM equals the share of programs with no copy span ({fmt_pct(off[0]['no_copy'], 2)}), "
                    "which no perturbation touches")
    why += "; " + _crossing_text(tables, c["em_pct"])
    return Claim(
        claim="6. pooled EM under off-by-one noise (rate 1)", paper=c["text"],
        ours="; ".join(f"{r['kind']} {fmt_pct(r['em'], 2)}" for r in pooled.iter_rows(named=True)),
        verdict=DIFFERS if off or pooled.height == 0 else REPRODUCED, why=why,
        method="line-level oracle programs, every copy span perturbed, mean over seeds [perturb]")


def _finetune_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    from analysis.pilotreport import headline

    c = paper["finetune"]
    if not (Path(metrics_dir) / "pilot.json").is_file():
        return Claim(claim="7. fine-tuning pilot", paper=c["text"], ours=MISSING, verdict=NOT_RUN,
                     why="no pilot stage output (reports/metrics/pilot.json)", method="copydecode pilot")
    m = metrics("pilot", metrics_dir)
    figures = dict(headline(m))
    ours = "; ".join(f"{k}: {v}" for k, v in figures.items() if "EM" in k)
    return Claim(claim="7. fine-tuning pilot", paper=c["text"], ours=ours, verdict=BEYOND,
                 why=f"a different model ({m['model']}) and data (worded ProbeEdit-S-style edits); the paper states "
                     "no threshold", method=f"{m['method']} [pilot]")


def _e2e_claim(paper: dict, tables: Path, metrics_dir: Path) -> Claim:
    e2e = table("e2e_speedup", tables).filter(pl.col("method") != "ar")
    best = e2e.sort("speedup_total", descending=True).row(0, named=True)
    return Claim(
        claim="beyond the paper: measured end to end", paper="bounded only",
        ours=f"up to {fmt_x(best['speedup_total'])} ({best['model']}, {_star(best['corpus'])}, {best['method']}); "
             f"see the e2e report", verdict=BEYOND, why="the paper gives no measured end-to-end figure",
        method="teacher-forced oracle programs on a real KV cache, seeded case sample [e2e]")


CLAIMS = (_kernel_claim, _ceiling_claim, _bounds_claim, _token_claim, _lossless_claim, _perturb_claim,
          _e2e_claim, _finetune_claim)


def claims(tables: Path = TABLES, metrics_dir: Path = METRICS, paper_path: Path = PAPER) -> list[Claim]:
    """Each claim of the paper with ours and a verdict computed under the thresholds of
    paper_claims.json. A claim whose stage output is absent is 'not run', never silently dropped."""
    paper = paper_claims(paper_path)
    out = []
    for rule in CLAIMS:
        try:
            out.append(rule(paper, Path(tables), Path(metrics_dir)))
        except ParamsError as missing:
            name = rule.__name__.strip("_").removesuffix("_claim")
            out.append(Claim(claim=name, paper=paper.get(name, {}).get("text", MISSING), ours=MISSING,
                             verdict=NOT_RUN, why=str(missing), method=MISSING))
    return out


def claims_frame(items: list[Claim] | None = None) -> pl.DataFrame:
    items = claims() if items is None else items
    return pl.DataFrame([{f.name: getattr(c, f.name) for f in fields(Claim)} for c in items])


VERDICT_COLOURS = {REPRODUCED: "#dafbe1", DIFFERS: "#fff8c5", NOT_RUN: "#eaeef2", BEYOND: "#ddf4ff"}


def summary_table(items: list[Claim] | None = None):
    """The paper-versus-ours table: one row per claim, the verdict cell coloured by its verdict."""
    from great_tables import loc, style

    items = claims() if items is None else items
    frame = claims_frame(items).with_columns(
        pl.concat_str([pl.col("verdict"), pl.lit(": "), pl.col("why")]).alias("verdict")).drop("why")
    view = show(frame.select("claim", "paper", "ours", "verdict", "method"), lift_constants=False,
                note=STAND_IN_NOTE).cols_width({"claim": "14%", "paper": "19%", "ours": "25%", "verdict": "27%",
                                                "method": "15%"})
    for verdict, colour in VERDICT_COLOURS.items():
        rows = [i for i, c in enumerate(items) if c.verdict == verdict]
        if rows:
            view = view.tab_style(style=style.fill(color=colour), locations=loc.body(columns="verdict", rows=rows))
    return view


def rules_frame(path: Path = PAPER) -> pl.DataFrame:
    """Each claim's verdict rule and its thresholds, as stated in paper_claims.json."""
    rows = []
    for key, claim in paper_claims(path).items():
        if key.startswith("_"):
            continue
        limits = {k: v for k, v in claim.items() if k in ("tolerance_pp", "rel_tolerance", "max_failures")}
        rows.append({"claim": key.replace("_", " "), "rule": claim.get("rule", MISSING),
                     "thresholds": ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in limits.items()) or MISSING})
    return pl.DataFrame(rows)


# ---------------------------------------------------------------- corpora: what each corpus is like

BENCHMARK, GIT_HISTORY, USER_PAIRS = "benchmark", "git history", "your pairs"
COMMITS_PREFIX = "CommitEdits-"
SIZE_MEASURES = {"source_lines": "source lines", "source_tokens": "source tokens",
                 "changed_lines": "changed lines", "gen_tokens": "gold tokens from gen spans"}


def corpus_group(corpus: str, framing: str) -> str:
    """benchmark (the paper's corpora and their stand-in), git history (CommitEdits) or your pairs."""
    if corpus.startswith(COMMITS_PREFIX):
        return GIT_HISTORY
    return USER_PAIRS if framing == "pair" else BENCHMARK


def _group_expr() -> pl.Expr:
    return (pl.when(pl.col("corpus").str.starts_with(COMMITS_PREFIX)).then(pl.lit(GIT_HISTORY))
            .when(pl.col("framing") == "pair").then(pl.lit(USER_PAIRS)).otherwise(pl.lit(BENCHMARK)))


def corpus_cases(cases: pl.DataFrame) -> pl.DataFrame:
    """One row per corpus: its group, language, framings and cases per framing."""
    return (cases.group_by("corpus", "framing", "language").len("cases")
            .group_by("corpus").agg(pl.col("language").unique().sort().str.join(", "),
                                    pl.col("framing").unique().sort().str.join(", ").alias("framings"),
                                    pl.col("cases").max().alias("cases_per_framing"),
                                    pl.col("framing").first())
            .with_columns(group=_group_expr()).select("group", "corpus", "language", "framings", "cases_per_framing")
            .sort("group", "corpus"))


def _line_count(text: str) -> int:
    return len(text.splitlines())


def case_sizes(cases: pl.DataFrame, spans: pl.DataFrame, framing: str = "body", token_counts=None) -> pl.DataFrame:
    """Per case of `framing` (plus the single-framing corpora): source file length in lines and tokens,
    and the edit's size: gold-output lines written by gen spans of the line-level oracle
    (changed_lines) and the gold tokens those gen spans produce (gen_tokens).

    `token_counts(texts) -> list[int]` counts source tokens; default: the suite's tokenizer."""
    chosen = pick_framing(cases, framing)
    if chosen.height == 0:
        raise ParamsError(f"no cases with framing {framing!r}")
    if token_counts is None:
        from analysis.tokenization import load_tokenizer

        tokenizer = load_tokenizer()
        token_counts = lambda texts: [len(e.ids) for e in tokenizer.backend.encode_batch(texts, add_special_tokens=False)]
    sources = chosen["source"].to_list()
    sized = chosen.select("case_id", "corpus", "framing").with_columns(
        source_lines=pl.Series([_line_count(t) for t in sources], dtype=pl.Int64),
        source_tokens=pl.Series(list(token_counts(sources)), dtype=pl.Int64))
    gen = (spans.filter((pl.col("level") == "line") & (pl.col("kind") == "gen"))
           .group_by("case_id", "framing").agg(pl.col("n_lines").sum().alias("changed_lines"),
                                               pl.col("n_tokens").sum().alias("gen_tokens")))
    return (sized.join(gen, on=["case_id", "framing"], how="left")
            .with_columns(pl.col("changed_lines", "gen_tokens").fill_null(0))
            .with_columns(group=_group_expr()).sort("group", "corpus", "case_id"))


def size_distribution(sizes: pl.DataFrame) -> pl.DataFrame:
    """Per corpus and measure: cases, mean, p10, median, p90, max (long, numeric)."""
    rows = []
    for measure in SIZE_MEASURES:
        rows.append(sizes.group_by("group", "corpus").agg(
            pl.lit(measure).alias("measure"), pl.len().alias("cases"), pl.col(measure).mean().alias("mean"),
            pl.col(measure).quantile(0.1, "nearest").alias("p10"), pl.col(measure).median().alias("median"),
            pl.col(measure).quantile(0.9, "nearest").alias("p90"), pl.col(measure).max().cast(pl.Float64).alias("max")))
    return pl.concat(rows).sort("group", "corpus", "measure")


def fmt_count(value: float | None) -> str:
    """A count or a median of counts: 12, 1,650, 3.5."""
    if _missing(value):
        return MISSING
    return fmt_int(value) if float(value).is_integer() else f"{value:,.1f}"


def size_table(dist: pl.DataFrame) -> pl.DataFrame:
    """The distribution made narrow: one row per corpus, one column per measure, `median [p10, p90]`."""
    cells = dist.with_columns(cell=pl.struct("median", "p10", "p90").map_elements(
        lambda r: f"{fmt_count(r['median'])} [{fmt_count(r['p10'])}, {fmt_count(r['p90'])}]", return_dtype=pl.String),
        measure=pl.col("measure").replace_strict(SIZE_MEASURES))
    wide = pivot_wide(cells.sort("measure"), index=["group", "corpus", "cases"], on="measure", values="cell")
    return wide.select("group", "corpus", "cases", *[m for m in SIZE_MEASURES.values() if m in wide.columns])


def corpus_coverage(cov: pl.DataFrame, framing: str = "body") -> pl.DataFrame:
    """Line and token coverage with CIs per corpus (and the framing's pool), one row per corpus."""
    rows = pick_framing(cov, framing).filter((pl.col("corpus") != POOLED) | (pl.col("framing") == framing))
    if rows.height == 0:
        raise ParamsError(f"coverage.csv has no rows for framing {framing!r}")
    keys = ["corpus", "framing"]
    out = rows.select(*keys, "n_cases").unique(keys)
    for level in ("line", "token"):
        part = rows.filter(pl.col("level") == level).select(
            *keys, *[pl.col(c).alias(f"{level}_{c}") for c in ("coverage", "ci_low", "ci_high")])
        out = out.join(part, on=keys, how="left")
    group = pl.when(pl.col("corpus") == POOLED).then(pl.lit(POOLED)).otherwise(_group_expr())
    return (out.with_columns(group=group)
            .select("group", "corpus", "n_cases", *[c for c in out.columns if c.startswith(("line_", "token_"))])
            .sort(pl.col("group") == POOLED, "group", "corpus"))


def bound_cell(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `cell`: the bound and its interval as one string, `3.4x [3.0, 3.9]`."""
    return frame.with_columns(cell=pl.struct("bound", "ci_low", "ci_high").map_elements(
        lambda r: f"{fmt_x(r['bound'])} {fmt_ci(r['ci_low'], r['ci_high'])}", return_dtype=pl.String))


def kernel_label(frame: pl.DataFrame) -> pl.DataFrame:
    """`kernel`: 'paper kernel' or 'fitted, <baseline> AR' (the column a bounds table pivots on)."""
    return frame.with_columns(kernel=pl.when(pl.col("kernel_source") == "paper").then(pl.lit("paper kernel"))
                              .otherwise(pl.concat_str([pl.lit("fitted, "), pl.col("baseline"), pl.lit(" AR")])))


def corpus_bounds(bounds: pl.DataFrame, framing: str = "body", level: str = "line", variant: str = "ideal") -> pl.DataFrame:
    """Per corpus (and each pooling rule): the bound under every kernel source, one column each."""
    from analysis.charts import pooling_label

    rows = pick(pick_framing(bounds, framing), level=level, variant=variant)
    rows = rows.filter((pl.col("corpus") != POOLED) | (pl.col("framing") == framing))
    labelled = bound_cell(kernel_label(pooling_label(rows)))
    wide = pivot_wide(labelled, index=["corpus", "n_cases"], on="kernel", values="cell")
    extrapolated = labelled.group_by("corpus").agg(pl.col("extrapolated_spans").max().alias("extrapolated_spans_max"))
    return wide.join(extrapolated, on="corpus").sort(pl.col("corpus").str.starts_with(POOLED), "corpus")


def bounds_wide(rows: pl.DataFrame) -> pl.DataFrame:
    """One kernel's bounds as a narrow table: a row per corpus (pools last), a column per level and
    variant holding `bound [CI]`, and the most extrapolated spans of any cell in the row."""
    from analysis.charts import pooling_label

    cells = bound_cell(pooling_label(rows)).with_columns(
        column=pl.concat_str([pl.col("level"), pl.lit(" "), pl.col("variant")])).sort("level", "variant")
    wide = pivot_wide(cells, index=["corpus", "n_cases"], on="column", values="cell")
    extra = cells.group_by("corpus").agg(pl.col("extrapolated_spans").max().alias("extrapolated_spans_max"))
    return wide.join(extra, on="corpus").sort(pl.col("corpus").str.starts_with(POOLED), "corpus")


def tokenization_wide(rows: pl.DataFrame) -> pl.DataFrame:
    """bounds_tokenization narrowed: a row per kernel and corpus, a column per level and variant
    holding the bound with gold-tokenization prefill sizes and its change, `3.4x (+0.2%)`."""
    from analysis.charts import pooling_label

    cells = kernel_label(pooling_label(rows)).with_columns(
        column=pl.concat_str([pl.col("level"), pl.lit(" "), pl.col("variant")]),
        cell=pl.struct("bound_gold_prefill", "rel_change").map_elements(
            lambda r: f"{fmt_x(r['bound_gold_prefill'])} ({'+' if (r['rel_change'] or 0) >= 0 else ''}{fmt_pct(r['rel_change'], 2)})",
            return_dtype=pl.String)).sort("level", "variant")
    wide = pivot_wide(cells, index=["kernel", "corpus"], on="column", values="cell")
    return wide.sort("kernel", pl.col("corpus").str.starts_with(POOLED), "corpus")


def _span_text(values: dict[str, float], fmt: Callable[[float], str]) -> str:
    low, high = min(values, key=values.get), max(values, key=values.get)
    if low == high:
        return f"{fmt(values[low])} ({_star(low)})"
    return f"{fmt(values[low])} ({_star(low)}) to {fmt(values[high])} ({_star(high)})"


def _range_only(values: dict[str, float], fmt: Callable[[float], str]) -> str:
    low, high = min(values.values()), max(values.values())
    return fmt(low) if low == high else f"{fmt(low)}-{fmt(high)}"


def _placement(values: dict[str, float], reference: dict[str, float]) -> str:
    """Where `values` sit among the `reference` corpora: above which, below which."""
    below = sorted(_star(k) for k, v in reference.items() if v < min(values.values()))
    above = sorted(_star(k) for k, v in reference.items() if v > max(values.values()))
    if not above:
        return "above every benchmark"
    if not below:
        return "below every benchmark"
    straddled = sorted(_star(k) for k in reference if _star(k) not in below + above)
    return (f"above {' and '.join(below)}, below {' and '.join(above)}"
            + (f", level with {' and '.join(straddled)}" if straddled else ""))


def real_vs_benchmarks(cov: pl.DataFrame, bounds: pl.DataFrame, framing: str = "body", level: str = "line") -> str:
    """The corpus report's headline: how the real edits (CommitEdits, a user's pairs) compare with the
    benchmarks in coverage and in the bound under the paper's kernel, computed from the tables."""
    covs = corpus_coverage(cov, framing).filter(pl.col("group") != POOLED)
    by_group = {g: dict(zip(rows["corpus"], rows[f"{level}_coverage"])) for (g,), rows in covs.group_by("group")}
    real = {**by_group.get(GIT_HISTORY, {}), **by_group.get(USER_PAIRS, {})}
    bench = by_group.get(BENCHMARK, {})
    if not real:
        return "No real-edit corpus (CommitEdits or your own pairs) is in this run; add one under corpora in params.yaml."
    if not bench:
        return f"Real edits only in this run: {level}-level coverage {_span_text(real, fmt_pct)}."
    text = (f"Real edits ({', '.join(sorted(real))}) reach {_range_only(real, fmt_pct)} {level}-level coverage: "
            f"{_placement(real, bench)} (benchmarks span {_range_only(bench, fmt_pct)}).")
    paper = pick_framing(bounds, framing).filter((pl.col("kernel_source") == "paper") & (pl.col("level") == level)
                                                 & (pl.col("variant") == "ideal") & (pl.col("pooling") == "corpus"))
    bound = dict(zip(paper["corpus"], paper["bound"]))
    real_b, bench_b = {k: bound[k] for k in real if k in bound}, {k: bound[k] for k in bench if k in bound}
    if real_b and bench_b:
        text += (f" With the paper's kernel their bound is {_range_only(real_b, fmt_x)}: {_placement(real_b, bench_b)} "
                 f"(benchmarks span {_range_only(bench_b, fmt_x)}).")
    return text


# ---------------------------------------------------------------- kernels: run environment and roofline


@dataclass(frozen=True)
class RunEnvironmentView:
    """The recorded environment of the kernel timings, ready to show (`recorded` False: an old raw file)."""

    recorded: bool
    noisy: bool | None
    summary: str
    machine: pl.DataFrame
    runs: pl.DataFrame


def _flag_text(flags: dict, name: str) -> str:
    return "yes" if flags.get(name) else "no"


def run_environment_view(model_doc: dict) -> RunEnvironmentView:
    """From latency_model.json's `run_environment` (the profile's sidecar, copied by `kernels fit`)."""
    env = model_doc.get("run_environment")
    if not env:
        return RunEnvironmentView(
            False, None, "The run environment was not recorded: these timings come from a raw file written before the "
            "profiler recorded load, reference workload and roofline; rerun copydecode kernels profile to record it.",
            pl.DataFrame(), pl.DataFrame())
    m = env.get("machine") or {}
    machine = pl.DataFrame([{
        "CPU": m.get("cpu_model", MISSING), "avx2": _flag_text(m, "cpu_avx2"), "avx512f": _flag_text(m, "cpu_avx512f"),
        "avx512_bf16": _flag_text(m, "cpu_avx512_bf16"),
        "amx": "yes" if m.get("cpu_amx_tile") or m.get("cpu_amx_bf16") else "no",
        "cores (logical / usable)": f"{m.get('logical_cores', MISSING)} / {m.get('usable_cores', MISSING)}",
        "torch threads": str(m.get("torch_threads", MISSING))}])
    rows = []
    for run in env.get("runs", []):
        if "drift" not in run:
            rows.append({"run": run.get("run_id", MISSING), "started": MISSING, "load before": None, "load after": None,
                         "reference start ms": None, "reference end ms": None, "drift": None,
                         "status": f"not recorded ({run.get('missing', 'no session file')})"})
            continue
        d = run["drift"]
        rows.append({
            "run": run["run_id"],
            "started": datetime.fromtimestamp(run["started_at"], timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load before": float(run["load_before"][0]), "load after": float(run["load_after"][0]),
            "reference start ms": 1000 * d["reference_start_s"], "reference end ms": 1000 * d["reference_end_s"],
            "drift": float(d["drift"]), "status": "NOISY" if run.get("noisy") else "quiet"})
    noisy = bool(env.get("noisy"))
    threshold = env.get("noisy_drift")
    reasons = env.get("noisy_reasons") or []
    summary = ((f"NOISY ({'; '.join(reasons) or 'reference drift'}): the reference workload drifted by more than "
                f"{fmt_pct(threshold, 0)} during {len(env.get('noisy_pairs') or [])} of {env.get('pairs', MISSING)} "
                f"measured pairs (largest drift {fmt_pct(env.get('max_pair_drift'))}), or other processes kept more "
                "cores busy than the run left free; treat the ratios as indicative.") if noisy else
               (f"Quiet run: the reference workload moved by at most {fmt_pct(env.get('max_pair_drift'))} within a pair "
                f"(median {fmt_pct(env.get('median_pair_drift'))}), under the {fmt_pct(threshold, 0)} threshold"
                + (f", and other processes kept {fmt_num(max(env['other_busy_cores']))} cores busy at most"
                   if env.get("other_busy_cores") else "") + "."))
    load = env.get("load1") or {}
    if load:
        summary += f" One-minute load average between {fmt_num(load.get('min'))} and {fmt_num(load.get('max'))}."
    return RunEnvironmentView(True, noisy, summary, machine, pl.DataFrame(rows))


def roofline_metrics(metrics_dir: Path = METRICS) -> dict | None:
    """kernels.json's `roofline` block (written by `kernels fit`), or None when not recorded."""
    try:
        roof = metrics("kernels", metrics_dir).get("roofline")
    except ParamsError:
        return None
    return roof if isinstance(roof, dict) else None


def gpu_reference(path: Path = PAPER) -> dict:
    """The paper's GPU from its datasheet (paper_claims.json `_gpu_reference`; not measured here), with
    the paper's own top kernel ratio and the N it was measured at."""
    paper = paper_claims(path)
    kernel = paper["kernel_speedup"]
    return {**paper["_gpu_reference"], "paper_top": kernel["high"], "paper_top_n": kernel["n_max"]}


def _ceiling(n: int, stream_gbps: float, gflops: float, bytes_per_param: float) -> float:
    from kernels_profile.machine import (
        copy_speedup_ceiling,  # the one owner of the roofline cap (torch-free)
    )

    return copy_speedup_ceiling(n, stream_gbps, gflops, bytes_per_param)


def roofline_frame(roof: dict, gpu: dict) -> pl.DataFrame:
    """The two machines side by side: bandwidth, matmul throughput, ridge point and copy-speedup cap."""
    gpu_gflops = gpu["bf16_tflops"] * 1000
    return pl.DataFrame([
        {"machine": f"this machine ({roof['dtype']}, measured)", "stream GB/s": roof["stream_gbps"],
         "matmul GFLOP/s": roof["matmul_gflops_float32" if roof["dtype"] == "float32" else "matmul_gflops_bfloat16"],
         "ridge FLOP/byte": roof["ridge_flops_per_byte"], "ceiling at N=" + str(roof["n_max"]): roof["ceiling"],
         "measured at N=" + str(roof["n_max"]): roof["measured_at_n_max"]},
        {"machine": f"{gpu['device']} (bf16, datasheet)", "stream GB/s": float(gpu["hbm_gbps"]),
         "matmul GFLOP/s": float(gpu_gflops), "ridge FLOP/byte": gpu_gflops / gpu["hbm_gbps"],
         "ceiling at N=" + str(roof["n_max"]): _ceiling(roof["n_max"], gpu["hbm_gbps"], gpu_gflops, 2),
         "measured at N=" + str(roof["n_max"]): gpu["paper_top"] if roof["n_max"] == gpu["paper_top_n"] else None},
    ])


def roofline_ceilings(roof: dict, gpu: dict, ns: Iterable[int]) -> pl.DataFrame:
    """Ceiling curves for the chart: n, ceiling, label (this machine measured; the paper's GPU)."""
    ns = sorted({int(n) for n in ns})
    compute = roof["ridge_flops_per_byte"] * roof["stream_gbps"]
    gpu_gflops = gpu["bf16_tflops"] * 1000
    return pl.DataFrame({
        "n": ns + ns,
        "ceiling": [_ceiling(n, roof["stream_gbps"], compute, roof["bytes_per_param"]) for n in ns]
        + [_ceiling(n, gpu["hbm_gbps"], gpu_gflops, 2) for n in ns],
        "label": [f"roofline ceiling, this machine ({roof['dtype']})"] * len(ns)
        + [f"roofline ceiling, {gpu['device']} (datasheet, bf16)"] * len(ns)})


def roofline_explanation(roof: dict | None, gpu: dict) -> Html:
    """Why CPU and GPU ratios differ, from the measured roofline: the explanation the numbers support,
    with what they do not explain marked as a hypothesis."""
    if roof is None:
        return note("<p><b>Roofline not recorded.</b> This kernel profile was written before the profiler measured "
                    "stream bandwidth and matmul throughput (kernels.profile.roofline), so the report cannot say "
                    "from measurements why CPU and GPU ratios differ. Rerun <code>copydecode kernels profile</code>.</p>")
    gpu_gflops = gpu["bf16_tflops"] * 1000
    gpu_ridge = gpu_gflops / gpu["hbm_gbps"]
    gpu_cap = _ceiling(roof["n_max"], gpu["hbm_gbps"], gpu_gflops, 2)
    measured = roof.get("measured_at_n_max")
    share = measured / roof["ceiling"] if measured and roof["ceiling"] else None
    paper_top = gpu["paper_top"]
    above = roof["n_max"] == gpu["paper_top_n"] and paper_top > gpu_cap
    return note(
        "<p><b>The explanation these measurements support.</b> A decode step reads every weight once and does two "
        "FLOPs per weight, {intensity} FLOP per byte in {dtype}: far below this machine's ridge point of {ridge} "
        "FLOP/byte (matmul {gflops} GFLOP/s over a stream copy of {stream} GB/s), so each step is bound by memory "
        "bandwidth. A prefill of N tokens does N times the FLOPs on the same bytes, so it stays almost as fast as one "
        "step until N reaches the ridge point times bytes per weight / 2, about {cap_n} here; beyond that it is "
        "compute-bound and T_ar/T_prefill stops growing. The roofline caps the ratio at N = {n} near {cap}; "
        "measured: {measured}{share}.</p>"
        "<p>On the paper's {gpu} (datasheet figures, not measured here: {gpu_bw} GB/s, {gpu_tf} TFLOP/s bf16), the "
        "ridge point is {gpu_ridge} FLOP/byte, so the same argument lets the ratio grow to about {gpu_cap} at "
        "N = {n}: the wider gap between compute and bandwidth is why GPU ratios keep rising with N where this "
        "CPU's flatten.</p>" + ("<p><b>Caveat:</b> the ratio measured here is above this run's cap, so these roofline "
                                "numbers understate the machine. <b>Hypothesis:</b> the throughput probe ran while other "
                                "work shared the cores (compare the reference workload above).</p>"
                                if share is not None and share > 1 else "") + ("<p><b>Hypothesis</b> (not tested here): the paper's {paper_top} at N = {n} is above "
                                "that cap, which the roofline alone does not explain; a GPU decode step of a small model "
                                "may be bound by per-step launch and framework overhead rather than weight bandwidth, "
                                "which makes T_ar larger than the roofline's.</p>" if above else ""),
        intensity=fmt_num(2 / roof["bytes_per_param"]), dtype=roof["dtype"], ridge=fmt_num(roof["ridge_flops_per_byte"]),
        gflops=fmt_num(roof["ridge_flops_per_byte"] * roof["stream_gbps"]), stream=fmt_num(roof["stream_gbps"]),
        cap_n=fmt_num(roof["ridge_flops_per_byte"] * roof["bytes_per_param"] / 2), n=roof["n_max"],
        cap=fmt_x(roof["ceiling"]), measured=fmt_x(measured),
        share=f" ({fmt_pct(share, 0)} of the cap)" if share is not None else "",
        gpu=gpu["device"], gpu_bw=fmt_int(gpu["hbm_gbps"]), gpu_tf=fmt_num(gpu["bf16_tflops"]),
        gpu_ridge=fmt_num(gpu_ridge), gpu_cap=fmt_x(gpu_cap), paper_top=fmt_x(paper_top))


def latency_fits(model_doc: dict, model: str = "all") -> pl.DataFrame:
    """One row per fitted latency model (any schema of latency_model.json): key, form, fit quality."""
    from analysis.latency import from_document

    rows = []
    for m in from_document(model_doc):
        if model not in ("all", m.key.model):
            continue
        d = m.diagnostics
        rows.append({"model": m.key.model, "dtype": m.key.dtype, "device": m.key.device, "baseline": m.key.baseline,
                     "form": m.form, "ar_r2": (d.get("ar") or {}).get("r2"), "prefill_r2": (d.get("prefill") or {}).get("r2"),
                     "ar_holdout_max_error": (d.get("ar") or {}).get("holdout_max_rel_error"),
                     "prefill_holdout_max_error": (d.get("prefill") or {}).get("holdout_max_rel_error")})
    if not rows:
        raise ParamsError(f"latency model has no fit for model {model!r}")
    return pl.DataFrame(rows).sort("model", "baseline", "form")


def latency_formulas(model_doc: dict) -> pl.DataFrame:
    """The formula of each fitted form (the document's own `formulas`, else the library's)."""
    from analysis.latency import FORMULAS, from_document

    forms = sorted({m.form for m in from_document(model_doc)})
    formulas = model_doc.get("formulas") if isinstance(model_doc.get("formulas"), dict) else FORMULAS
    return pl.DataFrame({"form": forms, "formula": [formulas.get(f, FORMULAS.get(f, MISSING)) for f in forms]})


# ---------------------------------------------------------------- headline metrics


def _round(value: Any, digits: int = 4) -> Any:
    return round(float(value), digits) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def headline(tables: Path = TABLES, metrics_dir: Path = METRICS) -> dict:
    """reports/metrics/headline.json: about ten flat figures, so that `dvc metrics show` prints them as
    one short table row; each is taken from another stage's output, and a figure whose output is
    absent is left out. Pools are body framing, line level, ideal variant, ratio of sums."""
    items = claims(tables, metrics_dir)
    out: dict[str, Any] = {"reproduced": sum(c.verdict == REPRODUCED for c in items),
                           "differ": sum(c.verdict == DIFFERS for c in items),
                           "not_run": sum(c.verdict == NOT_RUN for c in items)}
    try:
        kern = metrics("kernels", metrics_dir)
        env = kern.get("run_environment")
        out["kernel_max"] = _round(kern["speedup_range_strongest"][1], 2)
        out["noisy"] = env.get("noisy") if isinstance(env, dict) else "not recorded"
    except ParamsError:
        pass
    try:
        cov = table("coverage", tables).filter((pl.col("corpus") == POOLED) & (pl.col("framing") == "body")
                                               & (pl.col("level") == "line"))
        if cov.height:
            out["cov_line_pooled"] = _round(cov["coverage"][0])
    except ParamsError:
        pass
    try:
        b = bounds_frame(tables)
        for source, key, baseline in (("paper", "bound_paper_pooled", None), ("fit", "bound_fit_pooled", "eager")):
            pooled = _pooled(_line_ideal(b, source, baseline))
            if "ratio_of_sums" in pooled:
                out[key] = _round(pooled["ratio_of_sums"]["bound"], 2)
    except ParamsError:
        pass
    try:
        out["roundtrip_failed"] = metrics("roundtrip", metrics_dir)["failed"]
    except ParamsError:
        pass
    return out
