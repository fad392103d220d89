"""`copydecode perturb`: exact match under off-by-one span noise."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis import charts, corpora
from analysis.config import Config, tokenizer_spec
from analysis.io import save_chart, write_csv, write_json, write_parquet, write_table
from analysis.layout import (
    FIGURES,
    LEVELS,
    METRICS,
    PERTURB_RESULTS,
    POOLED,
    TABLES,
    framing_filter,
)
from analysis.params import choices, get, number_list, positive_int
from analysis.perturb import KINDS, PerturbCase, em_table, run_perturbation
from analysis.program import parse
from analysis.stages.common import progress, timed
from analysis.stages.tables import joined_programs
from analysis.tokenization import load_tokenizer


@dataclass(frozen=True)
class PerturbSettings:
    tokenizer: str
    levels: tuple[str, ...]
    framings: tuple[str, ...]
    kinds: tuple[str, ...]
    rates: tuple[float, ...]
    seeds: tuple[int, ...]


def settings(cfg: Config) -> PerturbSettings:
    p = cfg.params
    first, count = get(p, "perturb.seed", int), positive_int(p, "perturb.seeds")
    return PerturbSettings(
        tokenizer=tokenizer_spec(cfg),
        levels=choices(p, "perturb.levels", LEVELS),
        framings=choices(p, "perturb.framings", corpora.FRAMINGS),
        kinds=choices(p, "perturb.kinds", KINDS),
        rates=number_list(p, "perturb.rates", lo=0.0, hi=1.0),
        seeds=tuple(range(first, first + count)),
    )


def perturb_cases(table: pl.DataFrame, tokenizer, levels: tuple[str, ...]) -> list[PerturbCase]:
    table = table.filter(pl.col("level").is_in(levels))
    needs_tokens = "token" in levels
    sources = tokenizer.encode_many(table["source"].to_list()) if needs_tokens else [None] * table.height
    return [
        PerturbCase(r["case_id"], r["corpus"], r["framing"], r["level"], parse(r["program"]), r["source"],
                    r["target"], src.char_bounds if src is not None and r["level"] == "token" else None)
        for r, src in zip(table.iter_rows(named=True), sources)
    ]


def selected_programs(framings: tuple[str, ...]) -> pl.DataFrame:
    table = joined_programs()
    return table.filter(pl.any_horizontal(framing_filter(f) for f in framings))


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("perturb"):
        tokenizer = load_tokenizer(s.tokenizer)
        cases = perturb_cases(selected_programs(s.framings), tokenizer, s.levels)
        results = run_perturbation(list(progress(cases, "perturbation", len(cases))), list(s.kinds), list(s.rates),
                                   list(s.seeds))
        table = em_table(results)
        write_parquet(results, PERTURB_RESULTS)
        write_table(table, TABLES / "perturbation", digits=4)
        write_csv(table.filter(pl.col("corpus") == POOLED).select("level", "kind", "rate", "framing", "em"),
                  TABLES / "perturbation_plot.csv")
        save_chart(charts.perturbation(table, s.framings[0]), FIGURES / "perturbation")
    at_one = table.filter(pl.col("rate") == 1.0)
    metrics = {
        f"{r['level']}/{r['kind']}/{r['framing']}/{r['corpus']}": {"em_at_rate_1": r["em"], "invalid": r["invalid"],
                                                                    "no_copy": r["no_copy"]}
        for r in at_one.iter_rows(named=True)
    }
    write_json({"perturbation": metrics}, METRICS / "perturbation.json")
    return {"rows": results.height}
