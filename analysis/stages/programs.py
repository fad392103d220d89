"""`copydecode programs`: line- and token-level oracle programs -> data/programs/programs.parquet.

Cases are read and programs written `parallel.shard_cases` cases at a time (analysis.parallel.shards), in
cases.parquet's order (the order the later stages' shard reads rely on).

Schema: case_id, corpus, language, framing (as cases.parquet), level ("line" | "token"), program
(grammar text, `analysis.grammar.program.render`), n_ops. The file's metadata records the digest of the
cases.parquet it was built from (`analysis.pipeline.digest`); the stages that read it refuse a mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.corpora.cases import Case, cases_from_frame
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.digest import parquet_metadata
from analysis.layout import CASES, PROGRAMS
from analysis.oracle.covmax import line_oracle, token_oracle
from analysis.parallel.workers import SERIAL, ParallelSettings, cluster_session, map_cases, parallel_settings
from analysis.pipeline.params import positive_int
from analysis.grammar.program import render
from analysis.parallel.shards import ShardWriter, shard_cases
from analysis.parallel.progress import progress, timed
from analysis.parallel.tables import case_shards
from analysis.text.tokens import load_tokenizer


@dataclass(frozen=True)
class ProgramsSettings:
    tokenizer: str
    token_min_copy: int
    parallel: ParallelSettings
    shard_cases: int


# `copydecode programs`: its help line and what it reads and writes (the CLI's --help)
HELP = "write line- and token-level oracle programs"
READS_WRITES = "reads data/corpora/cases.parquet; writes data/programs/programs.parquet"


def settings(params: dict) -> ProgramsSettings:
    return ProgramsSettings(tokenizer_spec(params), positive_int(params, "programs.token_min_copy"),
                            parallel_settings(params), shard_cases(params))


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


def run(s: ProgramsSettings) -> dict:
    with timed("programs"), cluster_session(s.parallel):  # dask/ray: one cluster for the whole stage
        tokenizer = load_tokenizer(s.tokenizer)
        with ShardWriter(PROGRAMS, PROGRAMS_SCHEMA, metadata=parquet_metadata([CASES])) as out:
            for frame in case_shards(s.shard_cases):  # one shard of cases in memory at a time
                out.write(oracle_programs(cases_from_frame(frame), tokenizer, s.token_min_copy, s.parallel))
    return {"n_programs": out.rows}
