"""`copydecode optimal`: the cost-optimal oracle (analysis.oracle.optimal) beside the coverage-maximising one,
and the token-level min_copy sweep.

For each kernel (this suite's fitted latency model for `optimal.baseline`, with the bounds' model,
dtype, device and form; and the paper's kernel curve), every selected case gets the program that
minimises predicted time at line and at token level, with directive tokens decoded
(t_directive = t_step: the `overhead` variant, the honest floor). One price for the DP and the tables:
the bounds' own (`analysis.bounds.fixed_cost_settings`: bounds.step_cost, bounds.steady_max_n and
bounds.extrapolate at the one KV-cache length bounds.context, since the DP is exact at one context).
The DP minimises `analysis.bounds.fixed_price` (the steady step per decoded token, directives included,
the first-step overhead once per decode run, T_prefill per copy); both oracles' programs are costed
by the one bound (`analysis.bounds.case_costs`, whose check refuses costs outside the profiled range
unless bounds.extrapolate is set, and every table counts the extrapolated spans) and summarised by
`analysis.bounds.bounds_table` (per corpus, and pooled both ways under analysis.pooling's pooling
rule, with case-bootstrap CIs; kernel repeats are not resampled here). Until this round the stage
priced every decoded token at the first step, T_ar(1, c), with no overhead.

Tables:
  optimal          one row per (kernel, level, corpus, framing, pooling): coverage and floor (overhead
                   bound) of the coverage-maximising oracle (`covmax_*`, the programs stage's programs)
                   beside those of the cost-optimal oracle (`optimal_*`), and the covmax ideal bound;
                   t_step (the price of a decoded token), first_step_overhead, step_cost and context
                   say what the DP minimised
  min_copy_sweep   token level, one row per (kernel, oracle, min_copy, corpus, framing, pooling):
                   coverage and floor of token_oracle(min_copy) for each `optimal.min_copies`, and of
                   the cost-optimal program (oracle "optimal", min_copy null)

Cases: every corpus in cases.parquet at the `optimal.framings` (single-framing corpora always join).

Bounded memory: cases are read `parallel.shard_cases` at a time (analysis.parallel.shards); each shard's span
frames (every oracle, every kernel) are reduced at once to per-case rows (the bound's costs and copy
span counts, a few numbers per case), and the tables are built from those rows gathered across shards.
`case_costs` sorts its rows by case, so the tables do not depend on the shard size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.bounds import bounds_table, case_costs, fixed_price
from analysis.errors import ParamsError
from analysis.layout import METRICS, TABLES
from analysis.latency.model import LatencyModel
from analysis.latency.sources import kernels_for
from analysis.oracle.optimal import CostModel, TokenizerDirectives, dp_cost
from analysis.oracle.settings import OptimalSettings, settings  # noqa: F401 (the CLI's settings(params))
from analysis.oracle.span_frames import OracleCase, oracle_cases, parallel_span_frame
from analysis.parallel.progress import timed
from analysis.parallel.shards import Spill
from analysis.parallel.tables import program_shards
from analysis.parallel.workers import cluster_session
from analysis.pipeline.io import write_json, write_table
from analysis.pooling import MEAN_OF_CORPORA, pooled_groups
from analysis.text.tokens import load_tokenizer

TABLE_KEYS = ["kernel_source", "baseline", "level", "corpus", "framing", "pooling"]


# `copydecode optimal`: its help line and what it reads and writes (the CLI's --help)
HELP = "cost-optimal oracle beside the coverage oracle; token min_copy sweep"
READS_WRITES = ("reads cases, programs and the latency model; writes reports/tables/optimal.*, "
                "reports/tables/min_copy_sweep.*, reports/metrics/optimal.json")


def case_shards(framings: tuple[str, ...], levels: tuple[str, ...], tokenizer, shard: int):
    """The selected cases, about `shard` cases at a time (a case's programs are never split)."""
    for table in program_shards(shard):
        cases = oracle_cases(table, framings, levels, tokenizer)
        if cases:
            yield cases


# ---------------------------------------------------------------- summaries

def copy_span_counts(spans: pl.DataFrame) -> pl.DataFrame:
    """Copy spans of each (case, level): a shard's counts, gathered across shards."""
    return spans.group_by("case_id", "corpus", "framing", "level").agg(n_copy_spans=(pl.col("kind") == "copy").sum())


def mean_copy_spans(per_case: pl.DataFrame) -> pl.DataFrame:
    """Mean copy spans per case for each (level, corpus, framing), pooled groups included, from per-case
    counts (`copy_span_counts`, of one or more shards)."""
    records = []
    for level in sorted(set(per_case["level"])):
        for corpus, framing, rows in pooled_groups(per_case.filter(pl.col("level") == level)):
            records.append({"level": level, "corpus": corpus, "framing": framing,
                            "copy_spans_per_case": float(rows["n_copy_spans"].mean())})
    return pl.DataFrame(records, schema={"level": pl.String, "corpus": pl.String, "framing": pl.String,
                                         "copy_spans_per_case": pl.Float64})


@dataclass
class PerCase:
    """One oracle's programs reduced to per-case rows: the bound's costs (`case_costs`, sorted by
    case) and copy span counts; `add` gathers a shard's, `summary` tables them."""

    costs: list[pl.DataFrame | pl.LazyFrame]   # lazy: spilled to disk (`spill`), read back by `summary`
    copies: list[pl.DataFrame | pl.LazyFrame]

    @classmethod
    def of(cls, spans: pl.DataFrame, model: LatencyModel, s: OptimalSettings) -> "PerCase":
        # the price the DP minimises, the bounds' own (s.cost)
        return cls([case_costs(spans, model, s.cost)],
                   [copy_span_counts(spans)])

    def add(self, other: "PerCase") -> "PerCase":
        self.costs += other.costs
        self.copies += other.copies
        return self

    def spill(self, spill: Spill) -> "PerCase":
        """The rows held in memory written to disk; `summary` reads them back."""
        self.costs = [spill.put(f) if isinstance(f, pl.DataFrame) else f for f in self.costs]
        self.copies = [spill.put(f) if isinstance(f, pl.DataFrame) else f for f in self.copies]
        return self

    def summary(self, s: OptimalSettings) -> pl.DataFrame:
        """bounds_table of these programs (both variants, pooled both ways) with copy spans per case."""
        costs = Spill.concat(self.costs)
        if len(self.costs) > 1:
            costs = costs.sort(COST_ORDER)
        boot = s.bootstrap
        table = bounds_table(costs, boot.resamples, boot.seed, boot.ci)
        return table.join(mean_copy_spans(Spill.concat(self.copies)), on=["level", "corpus", "framing"], how="left")


COST_ORDER = ["level", "corpus", "framing", "case_id"]  # case_costs' row order (unique per row)


def _side(table: pl.DataFrame, prefix: str) -> pl.DataFrame:
    keys = ["level", "corpus", "framing", "pooling"]
    floor = table.filter(pl.col("variant") == "overhead").select(
        *keys, "n_cases",
        *(pl.col(c).alias(f"{prefix}_{c}") for c in ("coverage", "bound", "ci_low", "ci_high",
                                                      "copy_spans_per_case", "extrapolated_spans")))
    ideal = table.filter(pl.col("variant") == "ideal").select(*keys, pl.col("bound").alias(f"{prefix}_bound_ideal"))
    return floor.join(ideal, on=keys, how="left", validate="1:1")


def beside(covmax: pl.DataFrame, optimal: pl.DataFrame) -> pl.DataFrame:
    """One row per (level, corpus, framing, pooling): the two oracles' coverage and floor side by side."""
    keys = ["level", "corpus", "framing", "pooling"]
    left = _side(covmax, "covmax")
    right = _side(optimal, "optimal").drop("n_cases", "optimal_bound_ideal")
    return left.join(right, on=keys, how="full", coalesce=True, validate="1:1").with_columns(
        floor_gain=pl.col("optimal_bound") / pl.col("covmax_bound") - 1)


def sweep_rows(table: pl.DataFrame, oracle: str, min_copy: int | None) -> pl.DataFrame:
    floor = table.filter(pl.col("variant") == "overhead")
    ideal = table.filter(pl.col("variant") == "ideal").select("corpus", "framing", "pooling",
                                                              pl.col("bound").alias("bound_ideal"))
    return floor.join(ideal, on=["corpus", "framing", "pooling"], how="left", validate="1:1").select(
        pl.lit(oracle).alias("oracle"), pl.lit(min_copy, dtype=pl.Int64).alias("min_copy"),
        "corpus", "framing", "pooling", "n_cases", "coverage", "bound", "ci_low", "ci_high", "bound_ideal",
        "copy_spans_per_case", "extrapolated_spans")


# ---------------------------------------------------------------- the stage

@dataclass(frozen=True)
class Programs:
    """Model-independent span frames: the coverage oracle per level, token_oracle per min_copy."""

    covmax: pl.DataFrame
    sweep: dict[int, pl.DataFrame]


def model_free_programs(cases: list[OracleCase], s: OptimalSettings, directives) -> Programs:
    covmax = parallel_span_frame(cases, s.levels, "covmax", None, directives, s.parallel)
    sweep = {}
    if "token" in s.levels:
        for k in s.min_copies:
            sweep[k] = parallel_span_frame(cases, ("token",), "token_oracle", k, directives, s.parallel)
    return Programs(covmax, sweep)


def optimal_spans(cases: list[OracleCase], s: OptimalSettings, cost: CostModel, directives, label: str) -> pl.DataFrame:
    return parallel_span_frame(cases, s.levels, "optimal", cost, directives, s.parallel)


@dataclass
class KernelRows:
    """One kernel's per-case rows of every oracle: the coverage oracle, the cost-optimal one, and
    token_oracle at each min_copy of the sweep."""

    covmax: PerCase
    optimal: PerCase
    sweep: dict[int, PerCase]

    def add(self, other: "KernelRows") -> "KernelRows":
        self.covmax.add(other.covmax)
        self.optimal.add(other.optimal)
        for k, rows in other.sweep.items():
            self.sweep[k].add(rows)
        return self

    def spill(self, spill: Spill) -> "KernelRows":
        for per_case in (self.covmax, self.optimal, *self.sweep.values()):
            per_case.spill(spill)
        return self


def kernel_rows(cases, programs: Programs, s: OptimalSettings, directives, source: str, baseline: str,
                model: LatencyModel) -> KernelRows:
    """One shard's per-case rows for one kernel (its cost-optimal programs are computed here). The
    coverage oracle's programs are priced first, so a price outside the profiled range is refused
    (case_costs, unless bounds.extrapolate) before the DP runs."""
    covmax = PerCase.of(programs.covmax, model, s)
    best = optimal_spans(cases, s, dp_cost(model, s.cost), directives, f"{source}/{baseline}")
    return KernelRows(covmax, PerCase.of(best, model, s),
                      {k: PerCase.of(frame, model, s) for k, frame in programs.sweep.items()})


def rows_tables(rows: KernelRows, s: OptimalSettings, source: str, baseline: str,
                model: LatencyModel) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The optimal table's and the sweep's rows of one kernel, from its per-case rows."""
    price = fixed_price(model, s.cost)
    optimal_summary = rows.optimal.summary(s)
    table = beside(rows.covmax.summary(s), optimal_summary)
    sweeps = [sweep_rows(per_case.summary(s), "coverage", k) for k, per_case in rows.sweep.items()]
    if rows.sweep:
        sweeps.append(sweep_rows(optimal_summary.filter(pl.col("level") == "token"), "optimal", None))
    label = dict(kernel_source=pl.lit(source), baseline=pl.lit(baseline), t_step=pl.lit(price.step),
                 first_step_overhead=pl.lit(price.overhead), step_cost=pl.lit(s.cost.step_cost),
                 context=pl.lit(s.cost.context))
    sweep = pl.concat(sweeps).with_columns(**label) if sweeps else None
    return table.with_columns(**label), sweep


def _key(r: dict, *parts: str) -> str:
    return "/".join(str(r[p]) for p in parts) + (f"/{MEAN_OF_CORPORA}" if r["pooling"] == MEAN_OF_CORPORA else "")


def optimal_metrics(table: pl.DataFrame, sweep: pl.DataFrame | None) -> dict:
    out = {"optimal": {
        _key(r, "kernel_source", "baseline", "level", "framing", "corpus"): {
            k: r[k] for k in ("covmax_coverage", "covmax_bound", "optimal_coverage", "optimal_bound",
                              "floor_gain", "covmax_extrapolated_spans", "optimal_extrapolated_spans")}
        for r in table.iter_rows(named=True)}}
    if sweep is not None:
        out["min_copy_sweep"] = {
            _key({**r, "oracle": r["oracle"] if r["min_copy"] is None else f"min_copy_{r['min_copy']}"},
                 "kernel_source", "baseline", "oracle", "framing", "corpus"): {
                k: r[k] for k in ("coverage", "bound", "extrapolated_spans")}
            for r in sweep.iter_rows(named=True)}
    return out


def run(s: OptimalSettings) -> dict:
    with timed("optimal"), cluster_session(s.parallel), Spill() as spill:  # dask/ray: one cluster for the stage
        kernels = kernels_for(s.kernel, s.kernel_sources, [s.baseline])
        tokenizer = load_tokenizer(s.tokenizer)
        directives = TokenizerDirectives(tokenizer)
        rows: list[KernelRows] = []
        n_cases = 0
        for cases in case_shards(s.framings, s.levels, tokenizer, s.shard_cases):  # one shard's spans at a time
            n_cases += len(cases)
            programs = model_free_programs(cases, s, directives)
            shard = [kernel_rows(cases, programs, s, directives, k.source, k.baseline, k.model).spill(spill)
                     for k in kernels]  # the shard's per-case rows on disk until the summaries
            rows = shard if not rows else [mine.add(theirs) for mine, theirs in zip(rows, shard)]
        if not n_cases:
            raise ParamsError(f"optimal: no case at the framings {list(s.framings)} and levels {list(s.levels)}; "
                              "nothing to compare")
        tables, sweeps = [], []
        for kernel, kernel_case_rows in zip(kernels, rows):
            table, sweep = rows_tables(kernel_case_rows, s, kernel.source, kernel.baseline, kernel.model)
            tables.append(table)
            if sweep is not None:
                sweeps.append(sweep)
        table = pl.concat(tables).select(*TABLE_KEYS, pl.exclude(TABLE_KEYS)).sort(TABLE_KEYS)
        write_table(table, TABLES / "optimal", digits=4)
        sweep = None
        if sweeps:
            keys = ["kernel_source", "baseline", "oracle", "min_copy", "corpus", "framing", "pooling"]
            sweep = pl.concat(sweeps).select(*keys, pl.exclude(keys)).sort(keys, nulls_last=True)
            write_table(sweep, TABLES / "min_copy_sweep", digits=4)
    write_json({**optimal_metrics(table, sweep), "model": s.kernel.model, "dtype": s.kernel.dtype,
                "device": s.kernel.device, "latency_form": s.kernel.latency_form, "context": s.cost.context,
                "step_cost": s.cost.step_cost, "baseline": s.baseline,
                "n_cases": n_cases, "framings": list(s.framings)},
               METRICS / "optimal.json")
    return {"cases": n_cases, "rows": table.height, "sweep_rows": 0 if sweep is None else sweep.height,
            "extrapolated_spans": int(np.sum(table["optimal_extrapolated_spans"].fill_null(0).to_numpy()))}
