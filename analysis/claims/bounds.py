"""Claim 3: the closed-form bound, line level, ideal: 29.0x ProbeEdit / 3.4x HEvalFix-Py / 4.2x HEvalFix-JS /
13.0x pooled.

Like with like: the paper's kernel curve composed with this suite's spans, one verdict per corpus (the
paper's bound inside our 95% CI widened by rel_tolerance). ProbeEdit-S is this suite's stand-in for the
unpublished ProbeEdit, so its row and any pool holding it are `not comparable` (shown with what the
test would read, and why a bound can sit above the paper's: the 1 / generated-share cap); the pool of
every corpus holds corpora the paper does not. Only judged rows count in the tally. Every other kernel
source (the fitted CPU kernel, frozen GPU measurements) is shown beside it, not judged."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import (
    DIFFERS,
    NOT_COMPARABLE,
    PAPER,
    REPRODUCED,
    Claim,
    Scope,
    bounds_input,
    claim_verdict,
    judge,
    paper_claims,
    tally,
)
from analysis.errors import MissingOutputError
from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
from analysis.layout import TABLES
from analysis.pooling import ALL_POOL, PAPER_NAMES, PAPER_POOL, POOLED, RATIO_OF_SUMS, is_stand_in, pool_label, star
from analysis.results.bounds import (
    bound_text,
    cases_text,
    generated_share,
    line_ideal,
    other_kernel_sources,
    paper_pool_rows,
    per_corpus,
    pooled_rows,
    pooled_text,
    source_label,
)
from analysis.results.numbers import MISSING, fmt_int, fmt_pct, fmt_x
from analysis.results.outputs import bounds_frame

METHOD = "spans x the paper's kernel curve (judged per corpus); every other kernel source beside it, not judged [bounds]"


def cap_reason(name: str, row: dict, paper_value: float, tables: Path) -> str:
    """Why a bound sits above the paper's, from the coverage table: with free copies a program still
    decodes every generated token, so bound <= 1 / (generated share) (the ideal variant's cap)."""
    share = generated_share(tables, name)
    if share is None or share <= 0 or row["bound"] <= paper_value:
        return ""
    return (f"; a bound cannot exceed 1 / (share of gold tokens generated): {fmt_x(paper_value)} needs at least "
            f"{fmt_pct(1 / paper_value)} generated, {star(name)} generates {fmt_pct(share)} (cap {fmt_x(1 / share)})")


def _scope(name: str, row: dict, paper_value: float | None, spec: dict, verdict: str | None, why: str) -> Scope:
    inside = None if paper_value is None else judge(spec, (row["ci_low"], row["ci_high"]), paper_value)
    test = ("" if inside is None else
            f"the paper's {fmt_x(paper_value)} {'inside' if inside else 'outside'} our CI widened by "
            f"{100 * spec['rel_tolerance']:.0f}%")
    if verdict is None:
        verdict = REPRODUCED if inside else DIFFERS
        reason = test
    else:
        reason = f"{why}; read against the paper: {test}" if test else why
    return Scope(scope=name, paper=MISSING if paper_value is None else fmt_x(paper_value), ours=bound_text(row),
                 verdict=verdict, reason=reason, value=row["bound"], paper_value=paper_value,
                 ci=(row["ci_low"], row["ci_high"]), cases=int(row["n_cases"]))


def corpus_scopes(ours: dict[str, dict], spec: dict, tables: Path) -> list[Scope]:
    out = []
    for key, name in PAPER_NAMES.items():
        if name not in ours or key not in spec:
            continue
        if is_stand_in(name):
            why = (f"{star(name)} is this suite's stand-in for the paper's unpublished {key}"
                   + cap_reason(name, ours[name], spec[key], tables))
            out.append(_scope(star(name), ours[name], spec[key], spec, NOT_COMPARABLE, why))
        else:
            out.append(_scope(name, ours[name], spec[key], spec, None, ""))
    return out


def pool_scopes(composed: pl.DataFrame, ours: dict[str, dict], spec: dict, tables: Path,
                bounds: pl.DataFrame) -> list[Scope]:
    """The paper's pool (judged unless it holds a stand-in) and the pool of every corpus (never judged)."""
    rule = spec.get("pooling", RATIO_OF_SUMS)
    everything = pooled_rows(composed).get(rule)
    paper_corpora = [n for n in PAPER_NAMES.values() if n in ours]
    extra = sorted(set(ours) - set(paper_corpora))
    paper = paper_pool_rows(tables, PAPER_SOURCE, bounds=bounds).get(rule)
    if paper is None and everything is not None and not extra:
        paper = everything  # a run of the paper's corpora alone: its pool of every corpus is the paper's
    out = []
    label = f"{pool_label(PAPER_POOL)} ({rule.replace('_', ' ')})"
    if paper is not None and POOLED in spec:
        stand_ins = [star(n) for n in paper_corpora if is_stand_in(n)]
        verdict = NOT_COMPARABLE if stand_ins else None
        why = f"the pool holds the stand-in {', '.join(stand_ins)}" if stand_ins else ""
        out.append(_scope(label, paper, spec[POOLED], spec, verdict, why))
    if everything is not None and extra:
        why = (f"holds {', '.join(extra)}, which the paper does not ({fmt_int(everything['n_cases'])} cases against "
               f"{fmt_int(sum(ours[n]['n_cases'] for n in paper_corpora))})")
        out.append(_scope(f"{pool_label(ALL_POOL)} ({rule.replace('_', ' ')})", everything, spec.get(POOLED), spec,
                          NOT_COMPARABLE, why))
    return out


def beside_text(bounds: pl.DataFrame, names: list[str], tables: Path) -> str:
    """Every other kernel source's bounds, per corpus and over both pools (not judged)."""
    parts = []
    for source, baseline in other_kernel_sources(bounds):
        rows = line_ideal(bounds, source, baseline)
        mine, mine_all = per_corpus(rows), pooled_rows(rows)
        mine_paper = paper_pool_rows(tables, source, baseline, bounds)
        parts.append(f"{source_label(source, baseline, rows)}: "
                     + "; ".join(f"{star(n)} {fmt_x(mine[n]['bound'])}" for n in names if n in mine)
                     + (f"; {pool_label(PAPER_POOL)} {pooled_text(mine_paper)}{cases_text(mine_paper)}" if mine_paper else "")
                     + (f"; {pool_label(ALL_POOL)} {pooled_text(mine_all)}{cases_text(mine_all)}" if mine_all else ""))
    return "".join(f". Beside it, {p}" for p in parts)


@register("bounds")
def bounds_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    bounds = bounds_input(spec, 0, tables, metrics_dir)
    composed = line_ideal(bounds, PAPER_SOURCE)
    if composed.height == 0:
        raise MissingOutputError("bounds.csv has no paper-kernel rows; add `paper` to kernel.sources")
    ours = per_corpus(composed)
    scopes = tuple(corpus_scopes(ours, spec, tables) + pool_scopes(composed, ours, spec, tables, bounds))
    names = [n for n in PAPER_NAMES.values() if n in ours]
    text = ("paper kernel x this suite's spans: " + "; ".join(f"{s.scope} {s.ours}" for s in scopes)
            + beside_text(bounds, names, tables))
    return Claim(claim=f"3. {spec['title']}", paper=spec["text"], ours=text, verdict=claim_verdict(scopes),
                 reason=f"{tally(scopes)}. " + "; ".join(f"{s.scope}: {s.reason}" for s in scopes) if scopes
                 else "nothing to compare", method=METHOD, scopes=scopes)


def paper_comparison(tables: Path = TABLES, paper_path: Path = PAPER) -> pl.DataFrame:
    """Claim 3 like with like, one row per scope: the paper's bound, the paper's kernel composed with this
    suite's spans (95% CI), the scope's verdict, and every other kernel source's bound beside it."""
    spec = paper_claims(paper_path)["bounds"]
    bounds = bounds_frame(tables)
    composed = line_ideal(bounds, PAPER_SOURCE)
    ours = per_corpus(composed)
    scopes = corpus_scopes(ours, spec, tables) + pool_scopes(composed, ours, spec, tables, bounds)
    others = [(s, b, line_ideal(bounds, s, b)) for s, b in other_kernel_sources(bounds)]
    paper_pool = paper_pool_rows(tables, PAPER_SOURCE, bounds=bounds)
    rows = []
    for scope in scopes:
        row = {"scope": scope.scope, "cases": scope.cases, "paper": scope.paper,
               "paper kernel x our spans": scope.ours, "verdict": scope.verdict}
        for source, baseline, other in others:
            row[_column(source, baseline, spec)] = _other_bound(scope.scope, other, tables, source, baseline, bounds,
                                                                bool(paper_pool))
        rows.append(row)
    return pl.DataFrame(rows)


def _column(source: str, baseline: str, spec: dict) -> str:
    return "fitted kernel" if source == FIT_SOURCE and baseline == spec.get("fit_baseline", "eager") else f"{source} kernel"


def _other_bound(scope: str, rows: pl.DataFrame, tables: Path, source: str, baseline: str, bounds: pl.DataFrame,
                 separate_paper_pool: bool) -> str:
    """Another kernel source's bound for the same scope (a corpus or a pool, ratio of sums)."""
    if scope.startswith(pool_label(PAPER_POOL)):
        pooled = (paper_pool_rows(tables, source, baseline, bounds) if separate_paper_pool else pooled_rows(rows))
        return bound_text(pooled[RATIO_OF_SUMS]) if RATIO_OF_SUMS in pooled else MISSING
    if scope.startswith(pool_label(ALL_POOL)):
        pooled = pooled_rows(rows)
        return bound_text(pooled[RATIO_OF_SUMS]) if RATIO_OF_SUMS in pooled else MISSING
    mine = per_corpus(rows).get(scope.rstrip("*"))
    return bound_text(mine) if mine else MISSING
