"""What a `copydecode` run says on the terminal: its one-line summary, error messages cut to a readable
length, the file system's errors named, and Ctrl-C as an interrupt (the console script, `analysis.cli`,
prints them)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

from analysis.layout import SUMMARIES
from analysis.pipeline.io import os_error_text, write_json  # noqa: F401 (the CLI's named path errors)

ERROR_CHARS = 4000  # of one error message: a value quoted whole (a huge --set) would bury the reason

# result keys a person acts on next: printed in full beside the one-line summary
NEXT_STEP_KEYS = {"add_to_kernels_fit_raw": "add to params kernels.fit.raw"}
# A run that is not its pipeline stage's own (a preset, an own-model profile) names itself in its result under
# this key; its summary and run time go under that name, so a one-off never replaces the stage's own files (which
# `copydecode readme` gathers for the README's pipeline time).
RUN_NAME_KEY = "run_name"


def interrupted_workers(exc: BaseException) -> bool:
    """Ctrl-C reaches the parallel workers too: joblib then raises TerminatedWorkerError (exit codes
    {SIGINT(-2)}) in place of KeyboardInterrupt; it is the same interrupt."""
    return type(exc).__name__ == "TerminatedWorkerError" and "SIGINT" in str(exc)


def interruptible() -> None:
    """Ctrl-C or `kill -INT PID` on the main process interrupts the stage (exit 130, finished outputs
    kept), also when it was started in the background of a script: a shell without job control starts
    such a process with SIGINT ignored, and Python keeps an inherited SIG_IGN, so the signal was lost
    and the stage ran to the end. The parallel workers need no handler: the parent stops them."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def error_text(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= ERROR_CHARS else f"{text[:ERROR_CHARS]}... (message cut at {ERROR_CHARS:,} characters)"


def summary_lines(stage: str, result, root: str | None = None) -> list[str]:
    """What a person reads after a stage: one line (its short figures and where the full summary went: the
    result written to data/summaries/<stage>.json, or <run_name>.json, RUN_NAME_KEY) and, for a key to act on
    (NEXT_STEP_KEYS), one line more. `root`: the one-off output root the run wrote under (the process is inside it),
    as the user gave it, so that the path printed is one the user can open.
    A stage's JSON summary used to be dumped on stdout: ~1,400 of 1,600 lines of a `dvc repro` log."""
    name = result.get(RUN_NAME_KEY) if isinstance(result, dict) else None
    path = SUMMARIES / f"{name or stage.replace(' ', '_')}.json"
    write_json(result if isinstance(result, dict) else {"result": result}, path)
    shown_path = path if root is None else Path(root) / path
    items = result.items() if isinstance(result, dict) else []
    short = [(k, v) for k, v in items if isinstance(v, (int, float, str)) and not isinstance(v, bool)
             and len(str(v)) <= 40 and k not in NEXT_STEP_KEYS]
    shown = ", ".join(f"{k.replace('_', ' ')} {_figure(v)}" for k, v in short[:5])
    lines = [f"copydecode {stage}: done{'; ' + shown if shown else ''} (summary: {shown_path})"]
    lines += [f"{label}: {json.dumps(result[key], default=str)}" for key, label in NEXT_STEP_KEYS.items()
              if isinstance(result, dict) and key in result]
    return lines


def _figure(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
