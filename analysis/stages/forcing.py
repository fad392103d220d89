"""`copydecode forcing`: llguidance under each source's forced-span grammar, over every line-level oracle
program of every corpus (analysis.grammar.forcing): does `compute_ff_tokens()` after each directive give
the copied text's tokens?

Writes reports/tables/grammar_forcing.{csv,md} (one row per corpus and one over all of them), the per-span
records data/grammar/forcing_spans.parquet, and reports/metrics/grammar_forcing.json (the forms' line
limits, the longest source checked, the programs llguidance refused or rejected, the first spans whose ff
tokens differ). Timings (compile, mask, ff) vary from run to run; every other column is determined by the
corpora and the tokenizer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.grammar.export import MAX_FORCED_EBNF_LINES, MAX_FORCED_LARK_LINES
from analysis.grammar.forcing import ProgramCheck, check_program
from analysis.layout import FORCING_SPANS, METRICS, TABLES
from analysis.parallel.progress import progress, timed
from analysis.parallel.tables import joined_programs
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.io import write_json, write_parquet, write_table
from analysis.pipeline.params import get, positive_int
from analysis.text.tokens import load_tokenizer
from analysis.grammar.llg import StepMasks, ll_tokenizer, suite_pieces

ALL = "all corpora"
TABLE = TABLES / "grammar_forcing"


@dataclass(frozen=True)
class ForcingSettings:
    tokenizer: str
    eos_token: str      # the text of the tokenizer's EOS token, which ends every program
    limit: int          # programs per corpus, 0: all of them (a smaller number is a rehearsal)


# `copydecode forcing`: its help line and what it reads and writes (the CLI's --help)
HELP = ("llguidance under each source's forced-span grammar: does it fast-forward every copy of every line-level "
        "oracle program?")
READS_WRITES = ("reads cases and programs; writes data/grammar/forcing_spans.parquet, "
                "reports/tables/grammar_forcing.*, reports/metrics/grammar_forcing.json")


def settings(params: dict) -> ForcingSettings:
    eos = get(params, "forcing.eos_token", str)
    if not eos:
        raise ParamsError("params: forcing.eos_token is empty; give the tokenizer's EOS token, e.g. <|endoftext|>")
    return ForcingSettings(tokenizer_spec(params), eos, positive_int(params, "forcing.limit", minimum=0))


def eos_id(tokenizer, text: str) -> int:
    token = tokenizer.backend.token_to_id(text)
    if token is None:
        raise ParamsError(f"params: forcing.eos_token {text!r} is not a token of {tokenizer.name}")
    return int(token)


def line_programs(limit: int) -> pl.DataFrame:
    table = joined_programs().filter(pl.col("level") == "line").sort("corpus", "case_id", "framing")
    return table.group_by("corpus", maintain_order=True).head(limit) if limit else table


def span_rows(row: dict, check: ProgramCheck) -> list[dict]:
    keys = {k: row[k] for k in ("case_id", "corpus", "framing")}
    return [{**keys, "n_lines": check.n_lines, **asdict(s)} for s in check.spans]


def _q(values: list[float], q: float, scale: float) -> float | None:
    return float(np.percentile(np.asarray(values) * scale, q)) if values else None


def summary_row(corpus: str, checks: list[tuple[dict, ProgramCheck]], spans: pl.DataFrame) -> dict:
    compile_s = [c.compile_seconds for _, c in checks if c.compile_seconds is not None]
    masks = [t for _, c in checks for t in c.mask_seconds]
    n = spans.height
    share = (lambda col: spans[col].mean() if n else None)
    prefix = spans.filter(~pl.col("ff_equal") & pl.col("ff_prefix")).height if n else 0
    return {
        "corpus": corpus, "cases": len(checks), "copy_spans": n,
        "ff_equal_share": share("ff_equal"), "ff_prefix_share": prefix / n if n else None,
        "header_forced_share": share("header_forced"),
        "noncanonical_edge_spans": int(spans["noncanonical_edge"].sum()) if n else 0,
        "noncanonical_edge_share": share("noncanonical_edge"),
        "refused": sum(c.refused is not None for _, c in checks), "rejected": sum(c.rejected is not None for _, c in checks),
        "max_lines": max((c.n_lines for _, c in checks), default=0),
        "compile_p50_ms": _q(compile_s, 50, 1e3), "compile_p99_ms": _q(compile_s, 99, 1e3),
        "mask_p50_us": _q(masks, 50, 1e6), "mask_p99_us": _q(masks, 99, 1e6),
        "ff_p50_us": _q(spans["ff_seconds"].to_list() if n else [], 50, 1e6),
        "ff_p99_us": _q(spans["ff_seconds"].to_list() if n else [], 99, 1e6),
    }


def run(s: ForcingSettings) -> dict:
    with timed("forcing"):
        tokenizer = load_tokenizer(s.tokenizer)
        eos = eos_id(tokenizer, s.eos_token)
        lltok = ll_tokenizer(tokenizer, (eos,))
        masks = StepMasks(suite_pieces(tokenizer, (eos,), lltok.vocab_size), lltok.vocab_size)
        programs = line_programs(s.limit)
        checks = [(row, check_program(lltok, masks, tokenizer, row["program"], row["source"], eos))
                  for row in progress(programs.iter_rows(named=True), "forcing check", programs.height)]
        spans = pl.DataFrame([r for row, c in checks for r in span_rows(row, c)], schema=SPAN_SCHEMA)
        rows = [summary_row(corpus, [rc for rc in checks if rc[0]["corpus"] == corpus], spans.filter(pl.col("corpus") == corpus))
                for corpus in sorted({row["corpus"] for row, _ in checks})]
        rows.append(summary_row(ALL, checks, spans))
        table = pl.DataFrame(rows)
        write_parquet(spans, FORCING_SPANS)
        write_table(table, TABLE, digits=4)
    failures = [{"case_id": row["case_id"], "framing": row["framing"], "refused": c.refused, "rejected": c.rejected}
                for row, c in checks if c.refused or c.rejected]
    unequal = spans.filter(~pl.col("ff_equal")).head(20).to_dicts()
    total = rows[-1]
    metrics = {
        "programs": total["cases"], "copy_spans": total["copy_spans"], "ff_equal_share": total["ff_equal_share"],
        "noncanonical_edge_share": total["noncanonical_edge_share"], "longest_source_lines": total["max_lines"],
        "forced_form_line_limit": {"lark": MAX_FORCED_LARK_LINES, "ebnf": MAX_FORCED_EBNF_LINES},
        "failures": failures, "first_unequal_spans": unequal, "mask_statistic": MASK_STATISTIC,
    }
    write_json(metrics, METRICS / "grammar_forcing.json")
    return {k: metrics[k] for k in ("programs", "copy_spans", "ff_equal_share", "noncanonical_edge_share",
                                    "longest_source_lines")} | {"failures": len(failures)}


MASK_STATISTIC = ("p50/p99 over every token the model writes (directive, <gen> and EOS tokens) of computing "
                  "the next-token mask (analysis.grammar.llg.StepMasks); ff: compute_ff_tokens() after each "
                  "directive; compile: building the matcher for the source's forced-span grammar, per program")

SPAN_SCHEMA = {"case_id": pl.String, "corpus": pl.String, "framing": pl.String, "n_lines": pl.Int64,
               "start": pl.Int64, "end": pl.Int64, "tokens": pl.Int64, "ff_tokens": pl.Int64, "ff_equal": pl.Boolean,
               "ff_prefix": pl.Boolean, "noncanonical_edge": pl.Boolean, "header_forced": pl.Boolean,
               "ff_seconds": pl.Float64}
