"""Reading the pipeline's case and program tables, for the stages that start from them."""

from __future__ import annotations

import polars as pl

from analysis.corpora.cases import read_cases
from analysis.digest import check_fresh
from analysis.errors import CorpusError
from analysis.io import read_parquet
from analysis.layout import CASES, PROGRAMS


def read_programs() -> pl.DataFrame:
    """programs.parquet, refused when the cases it was built from have changed since (a stale input)."""
    frame = read_parquet(PROGRAMS, "copydecode programs", CorpusError)
    check_fresh(PROGRAMS, "copydecode programs")
    missing = {"case_id", "corpus", "framing", "level", "program"} - set(frame.columns)
    if missing:
        raise CorpusError(f"{PROGRAMS}: missing columns {sorted(missing)}; rerun `copydecode programs`")
    return frame


def joined_programs() -> pl.DataFrame:
    """programs.parquet with each case's source and target joined on."""
    cases = read_cases(CASES).select("case_id", "framing", "source", "target")
    programs = read_programs()
    joined = programs.join(cases, on=["case_id", "framing"], how="left", validate="m:1")
    orphans = joined.filter(pl.col("source").is_null())
    if orphans.height:
        raise CorpusError(f"{PROGRAMS}: {orphans.height} programs name cases not in {CASES} "
                          f"(e.g. {orphans['case_id'][0]!r}); rerun `copydecode programs`")
    return joined
