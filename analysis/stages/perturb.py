"""`copydecode perturb`: exact match under off-by-one span noise, for each perturbation definition
(analysis.perturb: strict, clip, one_span), and the rate at which pooled EM crosses the paper's 15.48%.

Outputs: strict keeps today's paths (results parquet, `perturbation` table, plot csv, chart); every other
definition writes `perturbation_<definition>` tables; `perturbation_crossing` holds the crossing rates.

Bounded memory: programs and cases are read `parallel.shard_cases` cases at a time (analysis.parallel.shards);
only the per-draw result rows (numbers, no texts) are kept across shards, in the order a one-shard run
gives them."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.present import charts
from analysis.corpora.entries import FRAMINGS
from analysis.pipeline.config import tokenizer_spec
from analysis.errors import ParamsError
from analysis.pipeline.io import save_chart, write_csv, write_json, write_parquet, write_table
from analysis.layout import FIGURES, LEVELS, METRICS, PERTURB_RESULTS, TABLES
from analysis.pooling import POOLED, framing_filter
from analysis.parallel.workers import ParallelSettings, map_cases, parallel_settings
from analysis.pipeline.params import choices, get, number_list, positive_int
from analysis.perturb import (
    DEFINITIONS,
    KINDS,
    PAPER_EM,
    PAPER_POOL,
    PerturbCase,
    crossing_rates,
    em_table,
    run_perturbation,
)
from analysis.grammar.program import parse
from analysis.parallel.shards import shard_cases
from analysis.parallel.progress import progress, timed
from analysis.parallel.tables import joined_programs, program_shards
from analysis.text.tokens import load_tokenizer


@dataclass(frozen=True)
class PerturbSettings:
    tokenizer: str
    levels: tuple[str, ...]
    framings: tuple[str, ...]
    kinds: tuple[str, ...]
    rates: tuple[float, ...]
    seeds: tuple[int, ...]
    definitions: tuple[str, ...]
    parallel: ParallelSettings
    shard_cases: int


# `copydecode perturb`: its help line and what it reads and writes (the CLI's --help)
HELP = "EM under off-by-one span noise"
READS_WRITES = ("reads cases and programs; writes data/perturb/results.parquet, reports/tables/perturbation*.*, "
                "reports/figures/perturbation.{png,svg}, reports/metrics/perturbation.json")


def settings(params: dict) -> PerturbSettings:
    p = params
    first, count = get(p, "perturb.seed", int), positive_int(p, "perturb.seeds")
    return PerturbSettings(
        tokenizer=tokenizer_spec(p),
        levels=choices(p, "perturb.levels", LEVELS),
        framings=choices(p, "perturb.framings", FRAMINGS),
        kinds=choices(p, "perturb.kinds", KINDS),
        rates=number_list(p, "perturb.rates", lo=0.0, hi=1.0),
        seeds=tuple(range(first, first + count)),
        definitions=_definitions(p),
        parallel=parallel_settings(p),
        shard_cases=shard_cases(p),
    )


def _definitions(p) -> tuple[str, ...]:
    definitions = choices(p, "perturb.definitions", DEFINITIONS)
    if "strict" not in definitions:
        # strict's table is the one the reports and the README read; the others sit beside it
        raise ParamsError(f"params: 'perturb.definitions' must include 'strict' (the reference table), got {list(definitions)}")
    return definitions


def perturb_cases(table: pl.DataFrame, tokenizer, levels: tuple[str, ...]) -> list[PerturbCase]:
    table = table.filter(pl.col("level").is_in(levels))
    needs_tokens = "token" in levels
    sources = tokenizer.encode_many(table["source"].to_list()) if needs_tokens else [None] * table.height
    return [
        PerturbCase(r["case_id"], r["corpus"], r["framing"], r["level"], parse(r["program"]), r["source"],
                    r["target"], src.char_bounds if src is not None and r["level"] == "token" else None)
        for r, src in zip(table.iter_rows(named=True), sources)
    ]


def selected_programs(framings: tuple[str, ...], table: pl.DataFrame | None = None) -> pl.DataFrame:
    """The joined programs (all, or one shard's `table`) at the framings."""
    table = joined_programs() if table is None else table
    return table.filter(pl.any_horizontal(framing_filter(f) for f in framings))


def chunk_results(chunk, kinds: list, rates: list, seeds: list, definition: str) -> list[pl.DataFrame]:
    """run_perturbation on a chunk of cases (its draws are seeded per case, so chunks change nothing)."""
    return [run_perturbation(list(progress(chunk, f"perturbation ({definition})", len(chunk))), kinds, rates, seeds, definition)]


def perturbation_results(cases: list[PerturbCase], s: PerturbSettings, definition: str) -> pl.DataFrame:
    parts = map_cases(chunk_results, cases, s.parallel,
                      list(s.kinds), list(s.rates), list(s.seeds), definition, desc=f"perturbation ({definition})")
    return pl.concat(parts, rechunk=True) if len(parts) > 1 else parts[0]


def table_path(definition: str):
    return TABLES / ("perturbation" if definition == "strict" else f"perturbation_{definition}")


def em_metrics(table: pl.DataFrame) -> dict:
    at_one = table.filter(pl.col("rate") == 1.0)
    return {
        f"{r['level']}/{r['kind']}/{r['framing']}/{r['corpus']}": {"em_at_rate_1": r["em"], "invalid": r["invalid"],
                                                                    "no_copy": r["no_copy"]}
        for r in at_one.iter_rows(named=True)
    }


def crossing_metrics(crossing: pl.DataFrame) -> dict:
    return {
        ("paper" if r["definition"] == "paper" else
         f"{r['definition']}/{r['level']}/{r['kind']}/{r['framing']}" + ("" if r["pool"] == PAPER_POOL else f"/{r['pool']}")): {
            "crossing_rate": r["crossing_rate"], "em_at_max_rate": r["em_at_max_rate"], "note": r["note"],
            "pool": r["pool"], "n_cases": r["n_cases"]}
        for r in crossing.iter_rows(named=True)
    }


def run(s: PerturbSettings) -> dict:
    tables: dict[str, pl.DataFrame] = {}
    with timed("perturb"):
        tokenizer = load_tokenizer(s.tokenizer)
        parts: dict[str, list[pl.DataFrame]] = {d: [] for d in s.definitions}
        for shard in program_shards(s.shard_cases):  # one shard's programs and texts in memory at a time
            cases = perturb_cases(selected_programs(s.framings, shard), tokenizer, s.levels)
            if cases:
                for definition in s.definitions:
                    parts[definition].append(perturbation_results(cases, s, definition))
        if not parts["strict"]:
            raise ParamsError(f"perturb: no program at the framings {list(s.framings)} and levels {list(s.levels)}")
        for definition in s.definitions:
            results = pl.concat(parts.pop(definition), rechunk=True)
            tables[definition] = em_table(results)
            write_table(tables[definition], table_path(definition), digits=4)
            if definition == "strict":
                write_parquet(results, PERTURB_RESULTS)
        table = tables["strict"]
        crossing = crossing_rates(tables)
        write_table(crossing, TABLES / "perturbation_crossing", digits=4)
        write_csv(table.filter(pl.col("corpus") == POOLED).select("level", "kind", "rate", "framing", "em"),
                  TABLES / "perturbation_plot.csv")
        save_chart(charts.perturbation(table, s.framings[0]), FIGURES / "perturbation")
    write_json({"perturbation": em_metrics(table),
                "definitions": {d: em_metrics(tables[d]) for d in s.definitions if d != "strict"},
                "crossing": crossing_metrics(crossing), "paper_em": PAPER_EM},
               METRICS / "perturbation.json")
    return {"rows": sum(t.height for t in tables.values()), "definitions": list(s.definitions)}
