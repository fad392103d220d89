"""analysis.stages.programs: a line and a token oracle program per case, in the cases' order, each
resolving to its case's target."""

import polars as pl
from fixtures import toy_cases

from analysis.grammar.program import parse
from analysis.grammar.resolver import resolve
from analysis.oracle.programs import PROGRAMS_SCHEMA, oracle_programs


def test_one_line_and_one_token_program_per_case_in_case_order(qwen):
    cases = toy_cases()
    table = oracle_programs(cases, qwen, token_min_copy=1)
    assert table.schema == pl.Schema(PROGRAMS_SCHEMA)
    assert table.select("case_id", "level").rows() == [(c.case_id, level) for c in cases for level in ("line", "token")]
    assert table["n_ops"].to_list() == [len(parse(p)) for p in table["program"]]
    assert table.select("corpus", "language", "framing").rows() == [
        (c.corpus, c.language, c.framing) for c in cases for _ in range(2)]


def test_every_program_resolves_to_its_target(qwen):
    cases = {c.case_id: c for c in toy_cases()}
    for row in oracle_programs(list(cases.values()), qwen, token_min_copy=1).iter_rows(named=True):
        case = cases[row["case_id"]]
        bounds = qwen.encode(case.source).char_bounds
        assert resolve(parse(row["program"]), case.source, bounds) == case.target, row


def test_a_longer_token_min_copy_never_copies_more(qwen):
    def copies(min_copy):
        table = oracle_programs(toy_cases(), qwen, token_min_copy=min_copy).filter(pl.col("level") == "token")
        return [len(parse(p).copies) for p in table["program"]]

    short, long = copies(1), copies(50)
    assert all(b <= a for a, b in zip(short, long)) and sum(long) < sum(short)


def test_no_case_gives_an_empty_table_of_the_schema(qwen):
    table = oracle_programs([], qwen, token_min_copy=1)
    assert table.height == 0 and table.schema == pl.Schema(PROGRAMS_SCHEMA)
