"""No process the suite starts imports code from a run folder or the working folder.

A run folder is data (docs/run-folders.md), and a one-off run moves into it (`--out DIR`). Python puts the
working folder on an import path three ways: `python -c` and `python -m` put it first (loky's resource
tracker and workers, multiprocessing's spawn behind a local dask cluster, `python -m ipykernel_launcher`
behind papermill); a relative or empty PYTHONPATH entry names it; and a process that hands its own
`sys.path` to its children (loky and spawn do, after their bootstrap) passes on a '' entry. So a `joblib/`
planted in DIR ran in every worker of the per-case stages.

`safe_imports()` closes all three for the process and everything it starts: PYTHONSAFEPATH=1 (Python 3.11:
`-c`, `-m` and a script path add nothing to `sys.path`), PYTHONPATH with its absolute entries only, and
`sys.path` without '' or relative entries. The CLI enters it once, first thing, so every child inherits it.
Ray adds the driver's working folder to its workers' path by itself; `analysis.parallel.workers` starts a
local ray elsewhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

SAFE_PATH = "PYTHONSAFEPATH"


def absolute_entries(entries: Iterable[str]) -> list[str]:
    """The entries that name a fixed folder: '' and relative ones name whatever folder is current."""
    return [e for e in entries if e and Path(e).is_absolute()]


def safe_pythonpath(value: str | None, lead: Iterable[str] = ()) -> str:
    """PYTHONPATH with only its absolute entries, after `lead`, without repeats."""
    given = absolute_entries((value or "").split(os.pathsep))
    return os.pathsep.join(dict.fromkeys([*lead, *given]))


@contextmanager
def safe_imports(lead: Iterable[str | Path] = ()) -> Iterator[None]:
    """The block, and every process it starts, import nothing from the working folder (module docstring);
    `lead`: absolute folders put first on the children's PYTHONPATH (the project, for a report kernel).
    The environment and `sys.path` are restored afterwards (the CLI's `main` is also called in-process)."""
    saved_env = {key: os.environ.get(key) for key in (SAFE_PATH, "PYTHONPATH")}
    saved_path = list(sys.path)
    os.environ[SAFE_PATH] = "1"
    pythonpath = safe_pythonpath(saved_env["PYTHONPATH"], [str(p) for p in lead])
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = absolute_entries(sys.path)
    try:
        yield
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.path[:] = saved_path
