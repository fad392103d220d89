"""What several stage modules share: progress bars, the joined programs table, run timings."""

from __future__ import annotations

import time
from contextlib import contextmanager

import polars as pl
from tqdm import tqdm

from analysis import corpora
from analysis.errors import CorpusError
from analysis.io import read_parquet, write_json
from analysis.layout import CASES, PROGRAMS, TIMINGS


def progress(iterable, desc: str, total: int | None = None, unit: str = "case"):
    return tqdm(iterable, desc=desc, total=total, unit=unit, mininterval=0.5, leave=False)


def read_programs() -> pl.DataFrame:
    frame = read_parquet(PROGRAMS, "copydecode programs", CorpusError)
    missing = {"case_id", "corpus", "framing", "level", "program"} - set(frame.columns)
    if missing:
        raise CorpusError(f"{PROGRAMS}: missing columns {sorted(missing)}; rerun `copydecode programs`")
    return frame


def joined_programs() -> pl.DataFrame:
    """programs.parquet with each case's source and target (and instruction) joined on."""
    cases = corpora.read_cases(CASES).select("case_id", "framing", "source", "target")
    programs = read_programs()
    joined = programs.join(cases, on=["case_id", "framing"], how="left", validate="m:1")
    orphans = joined.filter(pl.col("source").is_null())
    if orphans.height:
        raise CorpusError(f"{PROGRAMS}: {orphans.height} programs name cases not in {CASES} "
                          f"(e.g. {orphans['case_id'][0]!r}); rerun `copydecode programs`")
    return joined


@contextmanager
def timed(stage: str):
    """Run time of a stage, kept out of the DVC-tracked metrics (a manual rerun must not make
    `dvc status` report the stage modified): it goes to an untracked file under data/timings/."""
    started = time.perf_counter()
    box: dict[str, float] = {}
    yield box
    box["seconds"] = round(time.perf_counter() - started, 3)
    write_json(box, TIMINGS / f"{stage}.json")
