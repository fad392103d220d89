"""The analysis stages of `dvc repro`, one function per `copydecode` subcommand.

Paths are fixed here and declared identically in dvc.yaml; settings come from params.yaml.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from tqdm import tqdm

from analysis import corpora, probeedit
from analysis.errors import RoundTripError
from analysis.io import save_chart, write_json, write_parquet, write_table
from analysis.oracle import line_oracle, token_oracle
from analysis.params import get, positive_int
from analysis.program import parse, render
from analysis.resolver import resolve
from analysis.spans import (
    SPANS_SCHEMA, DirectiveCounter, coverage_table, per_case_coverage, program_spans, span_histogram,
)
from analysis.tokenization import count_split_boundaries, load_tokenizer, line_byte_starts

CASES = Path("data/corpora/cases.parquet")
PROBEEDIT_EDITS = Path("data/corpora/probeedit_edits.parquet")
PROGRAMS = Path("data/programs/programs.parquet")
SPANS = Path("data/spans/spans.parquet")
PER_CASE = Path("data/spans/coverage_per_case.parquet")
METRICS = Path("reports/metrics")
TABLES = Path("reports/tables")
FIGURES = Path("reports/figures")
LEVELS = ("line", "token")

PROGRAMS_SCHEMA = {
    "case_id": pl.String, "corpus": pl.String, "language": pl.String, "framing": pl.String,
    "level": pl.String, "program": pl.String, "n_ops": pl.Int64,
}


@dataclass(frozen=True)
class StageTiming:
    stage: str
    seconds: float
    n_cases: int


def _progress(iterable, desc: str, total: int | None = None):
    return tqdm(iterable, desc=desc, total=total, unit="case", mininterval=0.5, leave=False)


# ---------------------------------------------------------------- corpora

def probeedit_params(params: dict[str, Any]) -> probeedit.ProbeEditParams:
    mix = get(params, "corpora.probeedit.mix", dict)
    return probeedit.ProbeEditParams(
        n_cases=positive_int(params, "corpora.probeedit.n_cases"),
        seed=get(params, "corpora.probeedit.seed", int),
        min_lines=positive_int(params, "corpora.probeedit.min_lines"),
        max_lines=positive_int(params, "corpora.probeedit.max_lines"),
        mix=tuple((str(k), float(v)) for k, v in mix.items()),
        stdlib_dir=str(get(params, "corpora.probeedit.stdlib_dir", str)),
    )


def run_corpora(params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    hep = "corpora.humanevalpack"
    languages = get(params, f"{hep}.languages", list)
    framings = get(params, f"{hep}.framings", list)
    corpora.check_framings(framings)
    cases: list[corpora.Case] = []
    origins = []
    for language in languages:
        records, origin = corpora.load_humanevalpack(
            language,
            get(params, f"{hep}.local_dir", str),
            get(params, f"{hep}.source", str),
            get(params, f"{hep}.verify_sha256", bool),
        )
        cases += corpora.hevalfix_cases(records, language, framings)
        origins.append(origin.__dict__)
    edits = None
    if get(params, "corpora.probeedit.enabled", bool):
        pe_cases, edits = probeedit.build_probeedit(probeedit_params(params))
        cases += pe_cases
        origins.append({"corpus": probeedit.CORPUS, "origin": "stdlib (pinned manifest)",
                        "sha256": None, "n_records": len(pe_cases)})
    frame = corpora.cases_frame(cases)
    write_parquet(frame, CASES)
    write_parquet(edits if edits is not None else pl.DataFrame(schema=probeedit.EDITS_SCHEMA), PROBEEDIT_EDITS)
    counts = frame.group_by("corpus", "framing").len().sort("corpus", "framing")
    metrics = {
        "n_cases": frame.height,
        "cases": {f"{r['corpus']}/{r['framing']}": r["len"] for r in counts.iter_rows(named=True)},
        "origins": origins,
        "seconds": round(time.perf_counter() - started, 3),
    }
    write_json(metrics, METRICS / "corpora.json")
    return metrics


# ---------------------------------------------------------------- programs

def run_programs(params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    min_copy = positive_int(params, "programs.token_min_copy")
    tokenizer = load_tokenizer(get(params, "tokenizer.spec", str))
    cases = corpora.cases_from_frame(corpora.read_cases(CASES))
    sources = tokenizer.encode_many([c.source for c in cases])
    targets = tokenizer.encode_many([c.target for c in cases])
    rows = []
    for case, src, tgt in _progress(zip(cases, sources, targets), "oracle programs", len(cases)):
        for level, program in (("line", line_oracle(case.source, case.target)),
                               ("token", token_oracle(src, tgt, min_copy))):
            rows.append({
                "case_id": case.case_id, "corpus": case.corpus, "language": case.language,
                "framing": case.framing, "level": level, "program": render(program), "n_ops": len(program),
            })
    write_parquet(pl.DataFrame(rows, schema=PROGRAMS_SCHEMA), PROGRAMS)
    return {"n_programs": len(rows), "seconds": round(time.perf_counter() - started, 3)}


def _joined_programs() -> pl.DataFrame:
    cases = corpora.read_cases(CASES).select("case_id", "framing", "source", "target")
    programs = pl.read_parquet(PROGRAMS)
    return programs.join(cases, on=["case_id", "framing"], how="left", validate="m:1")


# ---------------------------------------------------------------- round trip

def run_roundtrip(params: dict[str, Any]) -> dict[str, Any]:
    """resolve(oracle) == target for every program; fails naming the cases that differ."""
    tokenizer = load_tokenizer(get(params, "tokenizer.spec", str))
    table = _joined_programs()
    started = time.perf_counter()
    sources = tokenizer.encode_many(table["source"].to_list())
    tokenize_seconds = time.perf_counter() - started
    started = time.perf_counter()
    failures: list[str] = []
    for row, src in zip(table.iter_rows(named=True), sources):
        try:
            ok = resolve(parse(row["program"]), row["source"], src.char_bounds) == row["target"]
        except Exception as exc:  # a program that does not even resolve is a failure too
            ok = False
            row = {**row, "case_id": f"{row['case_id']} ({type(exc).__name__}: {exc})"}
        if not ok:
            failures.append(f"{row['case_id']}@{row['framing']}/{row['level']}")
    seconds = time.perf_counter() - started
    counts = table.group_by("level").len().sort("level")
    metrics = {
        "programs": table.height,
        "passed": table.height - len(failures),
        "failed": len(failures),
        "per_level": {r["level"]: r["len"] for r in counts.iter_rows(named=True)},
        "resolve_seconds": round(seconds, 3),  # parse + resolve + compare, all programs
        "tokenize_seconds": round(tokenize_seconds, 3),  # source token bounds for token copies
    }
    write_json({**metrics, "failures": failures}, METRICS / "roundtrip.json")
    if failures:
        raise RoundTripError(f"{len(failures)} oracle programs do not resolve to their target: {failures[:20]}")
    return metrics


# ---------------------------------------------------------------- spans and coverage

def build_spans(table: pl.DataFrame, tokenizer) -> pl.DataFrame:
    directives = DirectiveCounter(tokenizer)
    sources = tokenizer.encode_many(table["source"].to_list())
    targets = tokenizer.encode_many(table["target"].to_list())
    columns: dict[str, list] = {name: [] for name in SPANS_SCHEMA}
    rows = zip(table.iter_rows(named=True), sources, targets)
    for row, src, tgt in _progress(rows, "spans", table.height):
        for span in program_spans(parse(row["program"]), src, tgt, directives):
            for key in ("case_id", "corpus", "language", "framing", "level"):
                columns[key].append(row[key])
            for key in ("op_index", "kind", "n_tokens", "n_tokens_src", "n_lines", "directive_tokens"):
                columns[key].append(getattr(span, key))
    return pl.DataFrame(columns, schema=SPANS_SCHEMA)


def boundary_counts(cases: pl.DataFrame, tokenizer) -> pl.DataFrame:
    """Per corpus and framing: line boundaries of the gold outputs that fall inside a BPE token."""
    targets = tokenizer.encode_many(cases["target"].to_list())
    inside = [count_split_boundaries(t) for t in targets]
    boundaries = [max(len(line_byte_starts(t.text)) - 2, 0) for t in targets]
    return (
        cases.select("corpus", "framing")
        .with_columns(inside=pl.Series(inside), boundaries=pl.Series(boundaries))
        .group_by("corpus", "framing")
        .agg(pl.col("inside").sum(), pl.col("boundaries").sum())
        .with_columns(share=pl.col("inside") / pl.col("boundaries"))
        .sort("corpus", "framing")
    )


def histogram_chart(hist: pl.DataFrame, level: str, framing: str):
    import altair as alt

    data = hist.filter((pl.col("level") == level) & pl.col("framing").is_in([framing, "unit"]))
    order = data.sort("bin")["range"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(data.to_pandas())
        .mark_bar()
        .encode(
            x=alt.X("range:O", sort=order, title=f"span length in gold tokens (log2 bins)"),
            y=alt.Y("count:Q", title="spans"),
            color=alt.Color("kind:N", title="op"),
            xOffset="kind:N",
            column=alt.Column("corpus:N", title=None),
        )
        .properties(width=220, height=180, title=f"{level}-level oracle spans ({framing} framing; ProbeEdit-S is a stand-in)")
    )


def run_spans(params: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    tokenizer = load_tokenizer(get(params, "tokenizer.spec", str))
    table = _joined_programs()
    spans = build_spans(table, tokenizer)
    write_parquet(spans, SPANS)
    per_case = per_case_coverage(spans)
    write_parquet(per_case, PER_CASE)
    coverage = coverage_table(
        per_case,
        resamples=positive_int(params, "spans.bootstrap_resamples", minimum=0),
        seed=get(params, "spans.seed", int),
        ci=float(get(params, "spans.ci", float)),
    )
    write_table(coverage, TABLES / "coverage")
    hist = span_histogram(spans)
    write_table(hist, TABLES / "span_histogram")
    boundaries = boundary_counts(corpora.read_cases(CASES), tokenizer)
    write_table(boundaries, TABLES / "line_boundaries_inside_tokens")
    framing = get(params, "spans.chart_framing", str)
    for level in LEVELS:
        save_chart(histogram_chart(hist, level, framing), FIGURES / f"span_histogram_{level}")
    metrics = {
        f"{r['level']}/{r['framing']}/{r['corpus']}": {
            "coverage": r["coverage"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "n_cases": r["n_cases"],
        }
        for r in coverage.iter_rows(named=True)
    }
    write_json({"coverage": metrics, "seconds": round(time.perf_counter() - started, 3)}, METRICS / "coverage.json")
    return {"n_spans": spans.height, "seconds": round(time.perf_counter() - started, 3)}
