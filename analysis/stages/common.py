"""What every stage module shares: progress bars, run timings, the check that a root holds outputs."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

from tqdm import tqdm

from analysis.errors import CorpusError
from analysis.io import write_json
from analysis.layout import CASES, TABLES, TIMINGS


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


# Lines a notebook kernel writes on every successful run (ipykernel, started by papermill): the plain-TCP
# notice (a local kernel on the loopback interface) and the interrupt logged when papermill shuts it down.
KERNEL_NOISE = ("Kernel is running over TCP without encryption", "KeyboardInterrupt caught in kernel")


@contextmanager
def kernel_noise_filtered(noise: tuple[str, ...] = KERNEL_NOISE):
    """Collect what this process and the kernels it starts write to stderr (file descriptor 2), then
    write it back without the lines holding one of `noise`; everything else, errors included, is kept
    (also when the block raises)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            sys.stderr.write("".join(line for line in text.splitlines(keepends=True)
                                     if not any(phrase in line for phrase in noise)))
            sys.stderr.flush()


def require_outputs(stage: str) -> None:
    """`headline` and `reports` summarise other stages' outputs: on a root that holds none (no cases
    table, no report table) there is nothing to report, which is an error, not an empty success."""
    if not CASES.is_file() and not any(TABLES.glob("*.csv")):
        raise CorpusError(f"nothing to report: this output root holds no stage output (no {CASES}, no {TABLES}/*.csv); "
                          f"run `copydecode corpora` and the stages after it before `copydecode {stage}`")
