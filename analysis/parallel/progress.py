"""What the stages of both packages (analysis.stages, kernels_profile.stages) share around their work: progress
bars, the run time of a stage, and a notebook kernel's stderr noise filtered out."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

from tqdm import tqdm

from analysis.pipeline.io import write_json
from analysis.layout import TIMINGS


_WORKER = threading.local()


@contextmanager
def worker_bars_off():
    """Inside a joblib worker (analysis.parallel.workers.map_cases): `progress` draws nothing there, since a worker's
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


def progress_bar(total: int, desc: str, unit: str, initial: int = 0, disable: bool = False, leave: bool = False,
                 file=None):
    """A bar advanced by hand (`update`) over `total` units, for a loop that is not one iterable (the
    kernels profile's pairs, e2e's cases, a parallel stage's chunks); drawn like `progress`. `leave`
    keeps the final count in the log; `file`: where it draws (default stderr)."""
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, mininterval=0.5, leave=leave,
                disable=disable or getattr(_WORKER, "quiet", False), file=file)


def log_above_bars(message: str) -> None:
    """Print a line without breaking the progress bars drawn below it."""
    tqdm.write(message)


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
    """`stderr_filtered` around the notebook kernels a block starts, their known noise by default."""
    with stderr_filtered(noise) as live:
        yield live


@contextmanager
def stderr_filtered(noise: tuple[str, ...]):
    """Collect what this process and the processes it starts write to stderr (file descriptor 2), then
    write it back without the lines holding one of `noise` (a progress bar's redraws, split at "\r", are
    lines too); everything else, errors included, is kept (also when the block raises). Yields a stream to
    the terminal's stderr itself, for a progress bar that must show while the block runs. Python's
    `sys.stderr` points at descriptor 2 during the block, also where it was another stream (a test's capture)."""
    sys.stderr.flush()
    saved = os.dup(2)
    previous = sys.stderr
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        live = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        try:
            yield live
        finally:
            live.close()
            sys.stderr.flush()
            sys.stderr.close()  # closefd=False: descriptor 2 stays open
            sys.stderr = previous
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            sys.stderr.write("".join(line for line in text.splitlines(keepends=True)
                                     if not any(phrase in line for phrase in noise)))
            sys.stderr.flush()
