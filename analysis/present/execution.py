"""How a report template runs: the environment its kernel starts in, and the executed notebook made
independent of the machine and the moment it ran; `execute_notebook` runs one template with both
(analysis.present.reports renders its pages from the result).

A run folder is data: the kernel runs in the output root, so the templates read that run's
outputs, but nothing in the root is ever imported; and two renders of the same outputs give the same
notebook but for its timings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from analysis.layout import EXECUTED
from analysis.pipeline.safepath import safe_imports
from analysis.present.templates import TEMPLATES, check_parameters, template_path

# The project beside this package: the one folder of Python code a report kernel imports from.
PROJECT = Path(__file__).resolve().parents[2]
INJECTED_CELL_ID = "injected-parameters"  # papermill gives its cell a random id; pages must not vary


@contextmanager
def kernel_environment() -> Iterator[None]:
    """The environment a report kernel starts in: it runs in the output root (the templates read the
    run's outputs there), but the root is never on its `sys.path` (analysis.pipeline.safepath: PYTHONSAFEPATH
    keeps `python -m ipykernel_launcher` from prepending the working folder and IPython from adding '';
    PYTHONPATH keeps only absolute entries, led by the project). So a module planted in a run folder
    (`altair.py`, `analysis/`) is data, never imported. The CLI already runs under it; this covers a render
    called from Python (tests, `copydecode report`)."""
    with safe_imports(lead=[PROJECT]):
        yield


# An object's default repr names its memory address (`<great_tables._gt_data.Body object at 0x7fadc753a5d0>`
# in a table's text/plain output): a different number on every render
ADDRESS = re.compile(r"(<[^<>\n]* at )0x[0-9a-fA-F]{4,16}>")


def _without_addresses(text: Any) -> Any:
    if isinstance(text, list):
        return [_without_addresses(t) for t in text]
    return ADDRESS.sub(r"\g<1>0x…>", text) if isinstance(text, str) else text


def normalise_executed(path: Path, name: str, out_name: str) -> None:
    """Make an executed notebook independent of where and when it ran, but for its timings: the
    injected parameters cell gets a fixed id, papermill's record names the template and the output
    as the project spells them (no machine path, no temporary name), and the memory addresses in
    outputs' plain-text reprs are blanked."""
    import nbformat

    book = nbformat.read(path, as_version=4)
    for cell in book.cells:
        if INJECTED_CELL_ID in cell.get("metadata", {}).get("tags", []):
            cell["id"] = INJECTED_CELL_ID
        for output in cell.get("outputs", []):
            if "text/plain" in output.get("data", {}):
                output["data"]["text/plain"] = _without_addresses(output["data"]["text/plain"])
            if "text" in output:
                output["text"] = _without_addresses(output["text"])
    record = book.metadata.get("papermill")
    if record is not None:
        record["input_path"] = f"notebooks/{name}.ipynb"
        record["output_path"] = (EXECUTED / f"{out_name}.ipynb").as_posix()
    nbformat.write(book, path)


def execute_notebook(name: str, parameters: Mapping[str, Any], root: Path, out_name: str,
                     templates: Path | None = None) -> Path:
    """Run the template into reports/notebooks/<out_name>.ipynb. papermill writes into a temporary
    file beside it, renamed only once every cell ran: a failed run leaves no half-executed notebook.
    The kernel runs in `root` (so `root` is "." to the template) under `kernel_environment`."""
    import os
    import tempfile

    import papermill

    templates = TEMPLATES if templates is None else templates
    parameters = check_parameters(name, parameters, templates)
    source = template_path(name, templates)
    executed = root / EXECUTED / f"{out_name}.ipynb"
    executed.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{out_name}.", suffix=".ipynb", dir=executed.parent)
    os.close(handle)
    try:
        with kernel_environment():
            papermill.execute_notebook(
                str(source), temp, parameters={**parameters, "root": "."},
                kernel_name="python3", cwd=str(root), progress_bar=False, log_output=False,
            )
        normalise_executed(Path(temp), name, out_name)
        os.replace(temp, executed)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        executed.unlink(missing_ok=True)  # a previous run's notebook would no longer match this run's pages
        raise
    return executed
