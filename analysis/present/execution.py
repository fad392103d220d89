"""How a report template runs: the environment its kernel starts in, and the executed notebook made
independent of the machine and the moment it ran (analysis.present.reports.execute_notebook uses both).

A run folder is data (issue 39): the kernel runs in the output root, so the templates read that run's
outputs, but nothing in the root is ever imported (H2); and two renders of the same outputs give the same
notebook but for its timings (L1).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analysis.layout import EXECUTED

# The project beside this package: the one folder of Python code a report kernel imports from (H2).
PROJECT = Path(__file__).resolve().parents[2]
INJECTED_CELL_ID = "injected-parameters"  # papermill gives its cell a random id; pages must not vary (L1)


@contextmanager
def kernel_environment() -> Iterator[None]:
    """The environment a report kernel starts in: it runs in the output root (the templates read the
    run's outputs there), but the root is never on its `sys.path`. PYTHONSAFEPATH keeps `python -m
    ipykernel_launcher` from prepending the working folder and IPython from adding '' (sys.flags.safe_path);
    PYTHONPATH keeps only absolute entries (a relative one, or an empty one, names the working folder), led
    by the project. So a module planted in a run folder (`altair.py`, `analysis/`) is data, never imported."""
    import os

    saved = {key: os.environ.get(key) for key in ("PYTHONSAFEPATH", "PYTHONPATH")}
    given = [p for p in (saved["PYTHONPATH"] or "").split(os.pathsep) if p and Path(p).is_absolute()]
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(PROJECT), *given]))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def normalise_executed(path: Path, name: str, out_name: str) -> None:
    """Make an executed notebook independent of where and when it ran, but for its timings (L1): the
    injected parameters cell gets a fixed id, and papermill's record names the template and the output
    as the project spells them (no machine path, no temporary name)."""
    import nbformat

    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if INJECTED_CELL_ID in cell.get("metadata", {}).get("tags", []):
            cell["id"] = INJECTED_CELL_ID
    record = book.metadata.get("papermill")
    if record is not None:
        record["input_path"] = f"notebooks/{name}.ipynb"
        record["output_path"] = (EXECUTED / f"{out_name}.ipynb").as_posix()
    nbformat.write(book, path)
