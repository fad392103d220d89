"""What every stage module shares: progress bars, run timings, the check that a root holds outputs."""

from __future__ import annotations

import time
from contextlib import contextmanager

from tqdm import tqdm

from analysis.errors import CorpusError
from analysis.io import write_json
from analysis.layout import CASES, TABLES, TIMINGS


def progress(iterable, desc: str, total: int | None = None, unit: str = "case"):
    return tqdm(iterable, desc=desc, total=total, unit=unit, mininterval=0.5, leave=False)


@contextmanager
def timed(stage: str):
    """Run time of a stage, kept out of the DVC-tracked metrics (a manual rerun must not make
    `dvc status` report the stage modified): it goes to an untracked file under data/timings/."""
    started = time.perf_counter()
    box: dict[str, float] = {}
    yield box
    box["seconds"] = round(time.perf_counter() - started, 3)
    write_json(box, TIMINGS / f"{stage}.json")


def require_outputs(stage: str) -> None:
    """`headline` and `reports` summarise other stages' outputs: on a root that holds none (no cases
    table, no report table) there is nothing to report, which is an error, not an empty success."""
    if not CASES.is_file() and not any(TABLES.glob("*.csv")):
        raise CorpusError(f"nothing to report: this output root holds no stage output (no {CASES}, no {TABLES}/*.csv); "
                          f"run `copydecode corpora` and the stages after it before `copydecode {stage}`")
