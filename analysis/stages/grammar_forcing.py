"""`copydecode grammar-forcing`: llguidance's fast-forward after every copy of every line-level oracle program.

For each line-level program of every corpus, the source's forced-span grammar is compiled with
llguidance and walked in the decoder's layout (analysis.grammar.forcing); after each copy directive
the fast-forward tokens are compared with the copied text's tokens. Writes, per corpus and pooled:
cases, copy spans, the ff-equal share, the spans whose ff stops short and the non-canonical edge
spans, compile time p50/p99 and llguidance's per-token mask time p50/p99 (reports/tables/
grammar_forcing.{csv,md}, reports/metrics/grammar_forcing.json), and every span's row
(data/grammar/forcing_spans.parquet). Timings are this machine's, in worker processes
(params parallel); every count is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.grammar.export import FORCED_LARK_MAX_LINES
from analysis.grammar.forcing import check_chunk, span_rows, summary
from analysis.layout import GRAMMAR_FORCING_SPANS, METRICS, TABLES
from analysis.parallel.progress import timed
from analysis.parallel.shards import shard_cases
from analysis.parallel.tables import program_shards
from analysis.parallel.workers import ParallelSettings, map_cases, parallel_settings
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.io import write_json, write_parquet, write_table
from analysis.pipeline.params import get, positive_int
from analysis.text.tokens import load_tokenizer


@dataclass(frozen=True)
class ForcingSettings:
    tokenizer: str
    eos_token: str          # the token that ends a program (the tokenizer's own spelling)
    cases_per_corpus: int   # 0: every program; a smaller number for a rehearsal
    parallel: ParallelSettings
    shard_cases: int


def settings(params: dict) -> ForcingSettings:
    eos = get(params, "grammar_forcing.eos_token", str)
    if not eos:
        raise ParamsError("params: 'grammar_forcing.eos_token' is empty; name the tokenizer's end-of-text token")
    return ForcingSettings(tokenizer_spec(params), eos, positive_int(params, "grammar_forcing.cases_per_corpus", minimum=0),
                           parallel_settings(params), shard_cases(params))


def _eos_id(tokenizer, eos: str) -> int:
    token_id = tokenizer.backend.token_to_id(eos)
    if token_id is None:
        raise ParamsError(f"params: grammar_forcing.eos_token {eos!r} is not a token of {tokenizer.name}")
    return int(token_id)


def _rows(s: ForcingSettings) -> list[tuple]:
    rows, taken = [], {}
    for table in program_shards(s.shard_cases):
        lines = table.filter(pl.col("level") == "line").sort("corpus", "case_id", "framing", maintain_order=True)
        for r in lines.iter_rows(named=True):
            if s.cases_per_corpus and taken.get(r["corpus"], 0) >= s.cases_per_corpus:
                continue
            taken[r["corpus"]] = taken.get(r["corpus"], 0) + 1
            rows.append((r["case_id"], r["corpus"], r["framing"], r["source"], r["program"]))
    if not rows:
        raise ParamsError("grammar-forcing: programs.parquet holds no line-level program")
    return rows


def run(s: ForcingSettings) -> dict:
    with timed("grammar_forcing"):
        tokenizer = load_tokenizer(s.tokenizer)
        eos = _eos_id(tokenizer, s.eos_token)
        rows = _rows(s)
        corpora = list(dict.fromkeys(r[1] for r in rows))
        checks = map_cases(check_chunk, rows, s.parallel, tokenizer, eos, desc="grammar forcing")
        table = summary(checks, corpora)
        write_parquet(span_rows(checks), GRAMMAR_FORCING_SPANS)
        write_table(table, TABLES / "grammar_forcing", digits=4)
    metrics = {
        "statistic": "per corpus: ff-equal share of copy spans; compile ms and llguidance mask us per token, p50/p99",
        "tokenizer": tokenizer.name,
        "forced_lark_max_lines": FORCED_LARK_MAX_LINES,
        "longest_source_lines": max(c.n_lines for c in checks),
        "per_corpus": {r["corpus"]: {k: v for k, v in r.items() if k != "corpus"} for r in table.iter_rows(named=True)},
    }
    write_json(metrics, METRICS / "grammar_forcing.json")
    return {k: metrics[k] for k in ("longest_source_lines",)} | {
        "ff_equal_share": metrics["per_corpus"]["all"]["ff_equal_share"], "cases": len(checks)}
