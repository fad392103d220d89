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

Definitions. The paper reports EM 15.48% under span noise but states neither the rate nor what
happens to a span pushed out of range, so its definition is underdetermined; three are offered
(`definition`, orthogonal to `kind`):

    strict    every copy span is perturbed with probability `rate` (above); an out-of-range or inverted
              span is an `invalid` miss. The default; its RNG stream and table are unchanged.
    clip      the same draws as strict (same RNG stream), then each perturbed span is projected onto the
              spans the FSM can emit, in the order it emits them: start clamped into [1, n_units], then
              end clamped into [start, n_units] (n_units: source lines, or source tokens). A start pushed
              past the end therefore drags the end with it; an end pulled before the start stays at the
              start (the span is then unchanged). A token span that lands inside a UTF-8 character is
              still invalid.
    one_span  with probability `rate` the program gets exactly one perturbed span, chosen uniformly
              among its copy spans (one draw decides, one picks the span, then `kind`'s draws), clipped
              as in `clip`; with probability 1 - rate it is untouched. At rate 1 every program with a
              copy has exactly one moved span.

`crossing_rates` gives, per pool (the paper's three corpora first, then every corpus of the run),
definition, level, kind and framing, the rate at which pooled EM first falls to the paper's 15.48%
(linear interpolation between grid rates; None if it never does within the grid).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real

import polars as pl

from analysis.errors import ParamsError, ProgramError
from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED, paper_pool, pool_framings, pool_rows
from analysis.grammar.program import Copy, Program
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines

KINDS = ("start", "end", "both", "shift")
DEFINITIONS = ("strict", "clip", "one_span")
PAPER_EM = 0.1548
DEFINITION_NOTES = {
    "strict": "each span with probability rate; an out-of-range or inverted span is an invalid miss",
    "clip": "each span with probability rate; start clamped to [1, n], then end to [start, n]",
    "one_span": "with probability rate, one uniformly chosen span per program, clipped",
}
PAPER_NOTE = ("underdetermined: the paper reports EM 15.48% but neither the noise rate nor how spans "
              "pushed out of range or inverted are treated")


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


def clip_span(op: Copy, n_units: int) -> Copy:
    """Project a span onto the ones the FSM can emit, in its order: start first, then end >= start."""
    start = min(max(op.start, 1), n_units)
    return Copy(start, min(max(op.end, start), n_units), op.unit)


def perturb_program(program: Program, kind: str, rate: float, rng: random.Random,
                    definition: str = "strict", n_units: int | None = None) -> tuple[Program, int]:
    """The perturbed program and how many spans were touched (module docstring for `definition`;
    `clip` and `one_span` need `n_units`, the source's lines or tokens)."""
    if definition not in DEFINITIONS:
        raise ParamsError(f"unknown perturbation definition {definition!r}; known: {', '.join(DEFINITIONS)}")
    if definition != "strict" and n_units is None:
        raise ParamsError(f"perturbation definition {definition!r} needs the source's unit count, got {n_units!r}")
    if definition == "one_span":
        return _perturb_one(program, kind, rate, rng, n_units)
    ops, touched = [], 0
    for op in program.ops:
        if isinstance(op, Copy) and rng.random() < rate:
            moved = perturb_span(op, kind, rng)
            ops.append(clip_span(moved, n_units) if definition == "clip" else moved)
            touched += 1
        else:
            ops.append(op)
    return Program(tuple(ops)), touched


def _perturb_one(program: Program, kind: str, rate: float, rng: random.Random, n_units: int) -> tuple[Program, int]:
    copies = [i for i, op in enumerate(program.ops) if isinstance(op, Copy)]
    if not copies or not rng.random() < rate:
        return program, 0
    index = copies[rng.randrange(len(copies))]
    ops = list(program.ops)
    ops[index] = clip_span(perturb_span(ops[index], kind, rng), n_units)
    return Program(tuple(ops)), 1


def source_units(case: PerturbCase) -> int:
    """Lines of the source for line-level cases, tokens for token-level ones."""
    if case.level == "token":
        if case.token_bounds is None:
            raise ParamsError(f"case {case.case_id} ({case.framing}): a token-level case needs token_bounds")
        return len(case.token_bounds) - 1
    return len(split_lines(case.source))


def outcome(case: PerturbCase, program: Program) -> str:
    try:
        out = resolve(program, case.source, case.token_bounds)
    except ProgramError:
        return "invalid"
    return "match" if out == case.target else "miss"


# ---------------------------------------------------------------- validation

def _names(field: str, values, known: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ParamsError(f"{field} must be a list, got {values!r}")
    if not values:
        raise ParamsError(f"{field} is empty; give at least one of: {', '.join(known)}")
    for value in values:
        if value not in known:
            raise ParamsError(f"{field}: unknown {value!r}; known: {', '.join(known)}")
    if len(set(values)) != len(values):
        raise ParamsError(f"{field}: {list(values)} repeats a value")
    return tuple(values)


def check_rates(rates, field: str = "perturb.rates") -> tuple[float, ...]:
    """Rates as floats in [0, 1]; a non-number (strings and booleans included) or NaN is named."""
    if isinstance(rates, (str, bytes)) or not isinstance(rates, Sequence):
        raise ParamsError(f"{field} must be a list of numbers in [0, 1], got {rates!r}")
    if not rates:
        raise ParamsError(f"{field} is empty; give at least one rate in [0, 1]")
    for rate in rates:
        if isinstance(rate, bool) or not isinstance(rate, Real):
            raise ParamsError(f"{field}: {rate!r} is not a number; rates are numbers in [0, 1]")
        if math.isnan(rate) or not 0 <= rate <= 1:
            raise ParamsError(f"{field}: {rate!r} is out of range; rates must lie in [0, 1], got {list(rates)}")
    if len(set(rates)) != len(rates):
        raise ParamsError(f"{field}: {list(rates)} repeats a rate")
    return tuple(float(r) for r in rates)


# ---------------------------------------------------------------- running

def run_perturbation(cases: list[PerturbCase], kinds, rates, seeds, definition: str = "strict") -> pl.DataFrame:
    """One row per (case, kind, rate, seed): outcome and spans touched. Seeded per combination,
    so any subset of the grid reproduces the same draws; every definition uses the same seed string,
    so `clip` sees exactly the draws of `strict`. The columns do not depend on the definition: run one
    table per definition."""
    _names("perturb.kinds", kinds, KINDS)
    check_rates(rates)
    _names("perturb.definitions", [definition], DEFINITIONS)
    columns: dict[str, list] = {k: [] for k in ("case_id", "corpus", "framing", "level", "kind", "rate",
                                               "seed", "outcome", "touched", "n_copies")}
    for ci, case in enumerate(cases):
        n_copies = len(case.program.copies)
        n_units = None if definition == "strict" else source_units(case)
        for kind in kinds:
            for rate in rates:
                for seed in seeds:
                    rng = random.Random(f"{seed}/{kind}/{rate}/{case.case_id}/{case.framing}/{case.level}")
                    program, touched = perturb_program(case.program, kind, rate, rng, definition, n_units)
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


# ---------------------------------------------------------------- where EM crosses the paper's figure

def crossing_rate(rates: Sequence[float], ems: Sequence[float], target: float = PAPER_EM) -> float | None:
    """The first rate at which EM falls to `target`, by linear interpolation between the bracketing
    grid rates (EM above target at the previous rate, at or below it at this one). None if EM never
    falls to target within the grid, or is already below it at the smallest rate (the crossing then
    lies below the grid and cannot be placed)."""
    points = sorted(zip(rates, ems))
    if not points:
        return None
    if points[0][1] <= target:
        return points[0][0] if points[0][1] == target else None
    for (r0, e0), (r1, e1) in zip(points, points[1:]):
        if e0 > target >= e1:
            return r0 + (e0 - target) / (e0 - e1) * (r1 - r0)
    return None


CROSSING_SCHEMA = {
    "pool": pl.String, "n_cases": pl.Int64,
    "definition": pl.String, "level": pl.String, "kind": pl.String, "framing": pl.String,
    "crossing_rate": pl.Float64, "em_at_max_rate": pl.Float64, "max_rate": pl.Float64, "note": pl.String,
}


def paper_pool_rows(table: pl.DataFrame) -> pl.DataFrame:
    """An `em_table` output's pooled rows over the paper's three corpora only (analysis.pooling.paper_pool):
    per (level, kind, rate, framing) the case-weighted EM, no-copy and invalid shares, the case count
    and the number of corpora; corpus = pooled."""
    pooled = paper_pool(table, "n_cases", ("em", "no_copy", "invalid"), by=("level", "kind", "rate"))
    return pooled.drop("pool").with_columns(pl.col("n_cases").cast(pl.Int64), pl.col("corpora").cast(pl.UInt32)).sort(
        "level", "kind", "framing", "rate")


def crossing_rates(tables: Mapping[str, pl.DataFrame], target: float = PAPER_EM) -> pl.DataFrame:
    """Per (definition, level, kind, framing): where pooled EM crosses `target`, from `em_table` outputs
    keyed by definition; a last row stands for the paper, whose definition is underdetermined."""
    _names("definitions", list(tables), DEFINITIONS)
    records = []
    for pool in (PAPER_POOL, ALL_POOL):  # the paper's pool first: the one set beside the paper's figure
        for definition, table in tables.items():
            pooled = (paper_pool_rows(table) if pool == PAPER_POOL else table.filter(pl.col("corpus") == POOLED))
            pooled = pooled.sort("level", "kind", "framing", "rate")
            for (level, kind, framing), rows in pooled.group_by("level", "kind", "framing", maintain_order=True):
                last = rows.row(rows.height - 1, named=True)
                records.append({
                    "pool": pool, "n_cases": int(rows["n_cases"].max()),
                    "definition": definition, "level": level, "kind": kind, "framing": framing,
                    "crossing_rate": crossing_rate(rows["rate"].to_list(), rows["em"].to_list(), target),
                    "em_at_max_rate": last["em"], "max_rate": last["rate"], "note": DEFINITION_NOTES[definition],
                })
    records.append({"pool": None, "n_cases": None, "definition": "paper", "level": None, "kind": None, "framing": None,
                    "crossing_rate": None, "em_at_max_rate": target, "max_rate": None, "note": PAPER_NOTE})
    return pl.DataFrame(records, schema=CROSSING_SCHEMA)
