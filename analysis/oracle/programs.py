"""The programs table: the line- and token-level oracle programs of cases (analysis.oracle.covmax),
rendered as rows, computed over chunks of cases (analysis.parallel.workers). The programs stage writes it
(data/programs/programs.parquet); `copydecode bench throughput` times it."""

from __future__ import annotations

import polars as pl

from analysis.corpora.cases import Case
from analysis.grammar.program import render
from analysis.oracle.covmax import line_oracle, token_oracle
from analysis.parallel.progress import progress
from analysis.parallel.workers import SERIAL, ParallelSettings, map_cases
from analysis.pipeline.params import positive_int


def token_min_copy(params: dict) -> int:
    """params programs.token_min_copy: the token oracle's shortest copy (the programs stage's, the bench's)."""
    return positive_int(params, "programs.token_min_copy")


PROGRAMS_SCHEMA = {
    "case_id": pl.String, "corpus": pl.String, "language": pl.String, "framing": pl.String,
    "level": pl.String, "program": pl.String, "n_ops": pl.Int64,
}


def program_rows(chunk, token_min_copy: int) -> list[dict]:
    """The line and token programs of a chunk of (case, source tokens, target tokens), as rows."""
    rows = []
    for case, src, tgt in progress(chunk, "oracle programs", len(chunk)):
        for level, program in (("line", line_oracle(case.source, case.target)),
                               ("token", token_oracle(src, tgt, token_min_copy))):
            rows.append({
                "case_id": case.case_id, "corpus": case.corpus, "language": case.language,
                "framing": case.framing, "level": level, "program": render(program), "n_ops": len(program),
            })
    return rows


def oracle_programs(cases: list[Case], tokenizer, token_min_copy: int,
                    parallel: ParallelSettings = SERIAL) -> pl.DataFrame:
    sources = tokenizer.encode_many([c.source for c in cases])
    targets = tokenizer.encode_many([c.target for c in cases])
    rows = map_cases(program_rows, list(zip(cases, sources, targets)), parallel, token_min_copy, desc="oracle programs")
    return pl.DataFrame(rows, schema=PROGRAMS_SCHEMA)
