"""Perturbation study: how exact match falls when copy spans are off by one.

Each copy span of an oracle program is perturbed independently with probability `rate`:

    start   start += d          (d = -1 or +1, each with probability 1/2)
    end     end += d
    both    start += d1, end += d2   (independent signs)
    shift   start += d, end += d     (the whole span moves)

The perturbed program is resolved against the source. Exact match (EM) means the output equals the
gold target. A program whose span becomes invalid (start < 1, start > end, end past the source) fails
to resolve: it counts as a miss, and is counted separately as `invalid`.

EM stays above 0 at rate 1 because programs with no copy span at all (every line rewritten; column
`no_copy`) are never perturbed. Apart from those, a perturbed line-level program almost never
survives: every line holds at least its newline, so moving one edge always changes the copied
length, and a whole-span shift keeps the text only when the span lies inside a run of identical
lines, which every perturbed span of the program must then do. The report shows EM next to
`no_copy`, so the two can be compared directly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError, ProgramError
from analysis.layout import POOLED, pool_framings, pool_rows
from analysis.program import Copy, Program
from analysis.resolver import resolve

KINDS = ("start", "end", "both", "shift")


@dataclass(frozen=True)
class PerturbCase:
    case_id: str
    corpus: str
    framing: str
    level: str
    program: Program
    source: str
    target: str
    token_bounds: tuple[int | None, ...] | None


def _sign(rng: random.Random) -> int:
    return 1 if rng.random() < 0.5 else -1


def perturb_span(op: Copy, kind: str, rng: random.Random) -> Copy:
    if kind == "start":
        return Copy(op.start + _sign(rng), op.end, op.unit)
    if kind == "end":
        return Copy(op.start, op.end + _sign(rng), op.unit)
    if kind == "both":
        return Copy(op.start + _sign(rng), op.end + _sign(rng), op.unit)
    if kind == "shift":
        d = _sign(rng)
        return Copy(op.start + d, op.end + d, op.unit)
    raise ParamsError(f"unknown perturbation kind {kind!r}; known: {', '.join(KINDS)}")


def perturb_program(program: Program, kind: str, rate: float, rng: random.Random) -> tuple[Program, int]:
    """The perturbed program and how many spans were touched."""
    ops, touched = [], 0
    for op in program.ops:
        if isinstance(op, Copy) and rng.random() < rate:
            ops.append(perturb_span(op, kind, rng))
            touched += 1
        else:
            ops.append(op)
    return Program(tuple(ops)), touched


def outcome(case: PerturbCase, program: Program) -> str:
    try:
        out = resolve(program, case.source, case.token_bounds)
    except ProgramError:
        return "invalid"
    return "match" if out == case.target else "miss"


def run_perturbation(cases: list[PerturbCase], kinds, rates, seeds) -> pl.DataFrame:
    """One row per (case, kind, rate, seed): outcome and spans touched. Seeded per combination,
    so any subset of the grid reproduces the same draws."""
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ParamsError(f"perturb.kinds: unknown {bad}; known: {', '.join(KINDS)}")
    if any(not 0 <= r <= 1 for r in rates):
        raise ParamsError(f"perturb.rates must lie in [0, 1], got {list(rates)}")
    columns: dict[str, list] = {k: [] for k in ("case_id", "corpus", "framing", "level", "kind", "rate",
                                               "seed", "outcome", "touched", "n_copies")}
    for ci, case in enumerate(cases):
        n_copies = len(case.program.copies)
        for kind in kinds:
            for rate in rates:
                for seed in seeds:
                    rng = random.Random(f"{seed}/{kind}/{rate}/{case.case_id}/{case.framing}/{case.level}")
                    program, touched = perturb_program(case.program, kind, rate, rng)
                    result = outcome(case, program) if touched else "match"
                    for key, value in (("case_id", case.case_id), ("corpus", case.corpus), ("framing", case.framing),
                                       ("level", case.level), ("kind", kind), ("rate", float(rate)), ("seed", seed),
                                       ("outcome", result), ("touched", touched), ("n_copies", n_copies)):
                        columns[key].append(value)
    return pl.DataFrame(columns)


def em_table(results: pl.DataFrame) -> pl.DataFrame:
    """EM per (level, kind, rate, corpus|pooled, framing): mean over cases and seeds, with the spread
    over seeds (min and max of the per-seed EM) and the invalid and no-copy shares."""
    per_seed_keys = ["level", "kind", "rate", "seed", "corpus", "framing"]
    pooled = pl.concat([
        pool_rows(results, f).with_columns(corpus=pl.lit(POOLED), framing=pl.lit(f))
        for f in pool_framings(results["framing"])
    ])
    both = pl.concat([results, pooled])
    per_seed = both.group_by(per_seed_keys).agg(
        em=(pl.col("outcome") == "match").mean(),
        invalid=(pl.col("outcome") == "invalid").mean(),
        no_copy=(pl.col("n_copies") == 0).mean(),
        n_cases=pl.len(),
    )
    keys = ["level", "kind", "rate", "corpus", "framing"]
    # sorted, order-keeping and rounded: a parallel group-by sums in varying order, and the same
    # params must give the same table to the last digit
    per_seed = per_seed.sort(per_seed_keys)
    table = per_seed.group_by(keys, maintain_order=True).agg(
        em=pl.col("em").mean(), em_min=pl.col("em").min(), em_max=pl.col("em").max(),
        invalid=pl.col("invalid").mean(), no_copy=pl.col("no_copy").mean(),
        n_cases=pl.col("n_cases").first(), seeds=pl.len(),
    )
    return table.with_columns(pl.col(pl.Float64).round(12)).sort(keys)
