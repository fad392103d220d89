"""The optimal oracle's per-case work, over chunks of cases (analysis.parallel.workers): the selected
cases with their gold tokenizations and the coverage oracle's programs (`OracleCase`), and the span rows
(the bound's input) of each oracle's programs for them: the coverage oracle's, the token oracle's at a
min_copy, or the cost-optimal one's under a CostModel (analysis.oracle.optimal). The optimal stage
writes their tables; `copydecode bench throughput` times them."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.grammar.program import Program, parse
from analysis.oracle.covmax import token_oracle
from analysis.oracle.optimal import optimal_program, program_span_rows
from analysis.parallel.progress import progress
from analysis.parallel.workers import ParallelSettings, map_cases
from analysis.pooling import framing_filter
from analysis.text.tokens import TokenizedText

SPAN_COLUMNS = {"case_id": pl.String, "corpus": pl.String, "framing": pl.String, "level": pl.String,
                "op_index": pl.Int64, "kind": pl.String, "n_tokens": pl.Int64, "n_tokens_src": pl.Int64,
                "directive_tokens": pl.Int64}


@dataclass(frozen=True)
class OracleCase:
    """One case with its gold tokenizations and the coverage oracle's program per level."""

    case_id: str
    corpus: str
    framing: str
    source: TokenizedText
    target: TokenizedText
    covmax: dict[str, Program]


def oracle_cases(table: pl.DataFrame, framings: tuple[str, ...], levels: tuple[str, ...], tokenizer) -> list[OracleCase]:
    """OracleCases of joined programs (`joined_programs` rows) at the framings and levels."""
    table = table.filter(pl.any_horizontal(framing_filter(f) for f in framings) & pl.col("level").is_in(levels))
    per_case = (table.sort("corpus", "framing", "case_id", "level")
                .group_by("case_id", "framing", maintain_order=True)
                .agg(pl.col("corpus").first(), pl.col("source").first(), pl.col("target").first(),
                     pl.col("level"), pl.col("program")))
    incomplete = per_case.filter(pl.col("level").list.len() != len(levels))
    if incomplete.height:
        raise ParamsError(f"programs table lacks a level of {list(levels)} for case {incomplete['case_id'][0]!r} "
                          f"({incomplete['framing'][0]}); rerun `copydecode programs`")
    sources = tokenizer.encode_many(per_case["source"].to_list())
    targets = tokenizer.encode_many(per_case["target"].to_list())
    return [OracleCase(r["case_id"], r["corpus"], r["framing"], src, tgt,
                       {lv: parse(text) for lv, text in zip(r["level"], r["program"])})
            for r, src, tgt in zip(per_case.iter_rows(named=True), sources, targets)]


def span_columns(entries, directives) -> dict[str, list]:
    """Span rows (the bound's input) of (case, level, program) entries, as columns."""
    columns: dict[str, list] = {name: [] for name in SPAN_COLUMNS}
    for case, level, program in entries:
        for row in program_span_rows(program, case.source, case.target, directives):
            for key, value in (("case_id", case.case_id), ("corpus", case.corpus), ("framing", case.framing),
                               ("level", level), ("op_index", row.op_index), ("kind", row.kind),
                               ("n_tokens", row.n_tokens), ("n_tokens_src", row.n_tokens_src),
                               ("directive_tokens", row.directive_tokens)):
                columns[key].append(value)
    return columns


def chunk_span_columns(chunk, levels: tuple[str, ...], oracle: str, param, directives) -> list[dict[str, list]]:
    """Span columns of a chunk of cases for one oracle: "covmax" (the programs stage's programs),
    "token_oracle" (param = min_copy) or "optimal" (param = the CostModel)."""
    entries = []
    for case in progress(chunk, f"{oracle} programs", len(chunk)):
        for level in levels:
            if oracle == "covmax":
                program = case.covmax[level]
            elif oracle == "token_oracle":
                program = token_oracle(case.source, case.target, param)
            else:
                program = optimal_program(level, case.source, case.target, param, directives).program
            entries.append((case, level, program))
    return [span_columns(entries, directives)]


def parallel_span_frame(cases: list[OracleCase], levels: tuple[str, ...], oracle: str, param, directives,
                        parallel: ParallelSettings) -> pl.DataFrame:
    """The span rows of one oracle's programs for every case, computed over chunks of cases (in order)."""
    parts = map_cases(chunk_span_columns, cases, parallel, levels, oracle, param, directives,
                      desc=f"{oracle} programs")
    columns = {name: [v for part in parts for v in part[name]] for name in SPAN_COLUMNS}
    return pl.DataFrame(columns, schema=SPAN_COLUMNS)
