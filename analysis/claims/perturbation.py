"""Claim 6: pooled EM under off-by-one span noise, 100% -> 15.48%.

Line-level EM at rate 1 (body framing), pooled over the paper's three corpora, case-weighted. The paper
states neither the noise rate nor the perturbation definition, and what this can show is narrow: at rate
1 under strict every program with a copy span breaks, so strict EM equals the no-copy share whatever the
mechanism; and EM falls from 100% at rate 0 to that share at rate 1, so under any definition it crosses
the paper's figure at some rate. The crossing rates are shown in the reason, not as evidence."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import DIFFERS, REPRODUCED, UNDERDETERMINED, Claim, Scope, judge, metric_input
from analysis.errors import MissingOutputError
from analysis.pooling import PAPER_POOL, pool_label
from analysis.results.numbers import fmt_int, fmt_pct
from analysis.results.perturbation import crossing_parts, paper_pool_crossings, paper_pool_em
from analysis.stats import clopper_pearson

EM_CI = ("exact Clopper-Pearson 95% intervals of EM x cases (seed means rounded to whole cases): the lowest kind's "
         "lower bound to the highest kind's upper bound")


def em_interval(pooled: pl.DataFrame) -> tuple[float, float]:
    """The kinds' exact intervals joined: the lowest EM's lower bound to the highest's upper bound."""
    ends = [clopper_pearson(round(r["em"] * r["n_cases"]), int(r["n_cases"])) for r in pooled.iter_rows(named=True)]
    return min(e[0] for e in ends), max(e[1] for e in ends)

METHOD = ("line-level oracle programs, every copy span perturbed, mean over seeds, case-weighted pool of "
          "HEvalFix-Py, HEvalFix-JS (body) and ProbeEdit-S [perturb]")


def is_underdetermined(spec: dict, crossings: pl.DataFrame) -> bool:
    """The claim's `underdetermined` rule (paper_claims.json): the paper does not state what its figure
    depends on (`paper_states_rate` false), and some measured definition's EM reaches the paper's figure
    within the rate grid, so the figure lies inside the family this suite measures."""
    return (not spec.get("paper_states_rate", True) and crossings.height > 0
            and crossings["crossing_rate"].drop_nulls().len() > 0)


def cannot_show(no_copy: float, em_pct: float, by_construction: bool) -> str:
    """What the rate-1 figure cannot show, said in the verdict's reason."""
    return ((f"at rate 1 strict EM equals the share of programs with no copy span ({fmt_pct(no_copy, 2)}) whatever "
             "the mechanism, so it cannot test the paper's figure; " if by_construction else "")
            + f"EM falls from 100% at rate 0 to the no-copy share at rate 1, so it crosses {em_pct:.2f}% at some rate "
            "under any definition: a crossing is not evidence for the paper's setting")


@register("perturbation")
def perturb_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    pooled = paper_pool_em(metric_input(spec, 0, tables, metrics_dir)).filter(pl.col("rate") == 1.0)
    if pooled.height == 0 or pooled["corpora"].min() == 0:
        raise MissingOutputError("perturbation.csv has no line-level rows at rate 1 for the paper's corpora")
    tol, target = spec["tolerance_pp"], spec["em_pct"] / 100
    off = [r for r in pooled.iter_rows(named=True) if not judge(spec, r["em"], target)]
    crossings = paper_pool_crossings(tables, target)
    cases, no_copy = int(pooled["n_cases"].max()), float(pooled["no_copy"][0])
    ours = (f"at rate 1, {pool_label(PAPER_POOL)} ({fmt_int(cases)} cases): "
            + "; ".join(f"{r['kind']} {fmt_pct(r['em'], 2)}" for r in pooled.iter_rows(named=True))
            + f"; programs with no copy span {fmt_pct(no_copy, 2)}")
    by_construction = bool(off) and all(abs(r["em"] - r["no_copy"]) < 0.005 for r in off)
    family = ", ".join(crossing_parts(crossings))
    if off and is_underdetermined(spec, crossings):
        verdict = UNDERDETERMINED
        reason = (cannot_show(no_copy, spec["em_pct"], by_construction)
                  + "; the paper states neither the noise rate nor the perturbation definition"
                  + f"; {spec['em_pct']:.2f}% lies inside the measured family (shown, not evidence: {family})")
    elif off:
        verdict = DIFFERS
        reason = (f"{len(off)} of {pooled.height} kinds more than {tol:g} pp from {spec['em_pct']:.2f}%"
                  + (f": our EM equals the share of programs with no copy span ({fmt_pct(no_copy, 2)}), which no "
                     "perturbation touches" if by_construction else "")
                  + f"; where EM over the paper's corpora crosses {spec['em_pct']:.2f}%: {family or 'no definition measured'}")
    else:
        verdict, reason = REPRODUCED, f"within {tol:g} pp for every kind"
    scope = Scope(f"{pool_label(PAPER_POOL)}, rate 1", f"{spec['em_pct']:.2f}%",
                  "; ".join(f"{r['kind']} {fmt_pct(r['em'], 2)}" for r in pooled.iter_rows(named=True)),
                  verdict, reason, value=tuple(float(v) for v in pooled["em"]), paper_value=target, cases=cases,
                  ci=em_interval(pooled), ci_kind=EM_CI)
    return Claim(claim=f"6. {spec['title']}", paper=spec["text"], ours=ours, verdict=verdict, reason=reason,
                 method=METHOD, scopes=(scope,))
