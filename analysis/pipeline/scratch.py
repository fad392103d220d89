"""Temporary folders that a later run can clean: the folder's name holds the owning process id, so a
folder left by a killed run (SIGKILL skips every cleanup) is removed by the next run that uses the
same prefix, once its owner is gone."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def stale_dirs(prefix: str, root: str | Path | None = None) -> list[Path]:
    """Folders `<prefix><pid>-*` under the temp root whose process no longer runs."""
    root = Path(root or tempfile.gettempdir())
    stale = []
    for path in root.glob(f"{prefix}*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if path.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            stale.append(path)
    return sorted(stale)


@contextmanager
def owned_temp_dir(prefix: str, root: str | Path | None = None) -> Iterator[Path]:
    """A temporary folder `<prefix><pid>-XXXX`, removed on any exit that runs Python's cleanup; stale
    ones of dead processes are removed first."""
    for path in stale_dirs(prefix, root):
        shutil.rmtree(path, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=root) as tmp:
        yield Path(tmp)
