"""`copydecode programs`: line- and token-level oracle programs -> data/programs/programs.parquet.

Cases are read and programs written `parallel.shard_cases` cases at a time (analysis.parallel.shards), in
cases.parquet's order (the order the later stages' shard reads rely on).

Schema: case_id, corpus, language, framing (as cases.parquet), level ("line" | "token"), program
(grammar text, `analysis.grammar.program.render`), n_ops. The file's metadata records the digest of the
cases.parquet it was built from (`analysis.pipeline.digest`); the stages that read it refuse a mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.corpora.cases import cases_from_frame
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.digest import parquet_metadata
from analysis.layout import CASES, PROGRAMS
from analysis.oracle.programs import PROGRAMS_SCHEMA, oracle_programs, token_min_copy
from analysis.parallel.workers import ParallelSettings, cluster_session, parallel_settings
from analysis.parallel.shards import ShardWriter, shard_cases
from analysis.parallel.progress import timed
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
    return ProgramsSettings(tokenizer_spec(params), token_min_copy(params), parallel_settings(params), shard_cases(params))


def run(s: ProgramsSettings) -> dict:
    with timed("programs"), cluster_session(s.parallel):  # dask/ray: one cluster for the whole stage
        tokenizer = load_tokenizer(s.tokenizer)
        with ShardWriter(PROGRAMS, PROGRAMS_SCHEMA, metadata=parquet_metadata([CASES])) as out:
            for frame in case_shards(s.shard_cases):  # one shard of cases in memory at a time
                out.write(oracle_programs(cases_from_frame(frame), tokenizer, s.token_min_copy, s.parallel))
    return {"n_programs": out.rows}
