"""What every stage module shares: progress bars and run timings."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from tqdm import tqdm

from analysis.io import write_json
from analysis.layout import TIMINGS


_WORKER = threading.local()


@contextmanager
def worker_bars_off():
    """Inside a joblib worker (analysis.parallel.map_cases): `progress` draws nothing there, since a worker's
    bar is never refreshed on the parent's terminal; the parent draws one bar for the stage instead."""
    before = getattr(_WORKER, "quiet", False)
    _WORKER.quiet = True
    try:
        yield
    finally:
        _WORKER.quiet = before


def progress(iterable, desc: str, total: int | None = None, unit: str = "case"):
    return tqdm(iterable, desc=desc, total=total, unit=unit, mininterval=0.5, leave=False,
                disable=getattr(_WORKER, "quiet", False))


@contextmanager
def timed(stage: str):
    """Run time of a stage, kept out of the DVC-tracked metrics (a manual rerun must not make
    `dvc status` report the stage modified): it goes to an untracked file under data/timings/."""
    started = time.perf_counter()
    box: dict[str, float] = {}
    yield box
    box["seconds"] = round(time.perf_counter() - started, 3)
    write_json(box, TIMINGS / f"{stage}.json")
