"""An output root is data: nothing in it decides where the suite writes.

A run folder may come from someone else (unpacked from an archive, a shared `--out`). Its symlinks,
journals and names must not move a write outside it, so every path the suite writes is checked here
before it is opened:

- `confined(path)`: the path lies inside the output root (the working folder of the run) once every
  component is resolved; no `..`, no absolute path elsewhere, no symlinked folder on the way.
- `check_output_root()`: before a stage takes the root's lock, no output folder of the root
  (data/, reports/, metrics/ and everything below) is a symlinked folder, and no symlinked file in them
  points outside the root. A file symlink inside the root is allowed (DVC's `cache.type symlink` with a
  cache in `.dvc/cache`): every write replaces the link itself (`os.replace`), never its target.
- `safe_name(name)`: a name that becomes one path component (a preset, a model label) is letters,
  digits, `.`, `_`, `-`, not starting with a dot.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from analysis.errors import CopyDecodeError


class OutputRootError(CopyDecodeError):
    """A path the suite would write leaves the output root, or the root holds links out of it."""


OUTPUT_FOLDERS = ("data", "reports", "metrics")  # what a stage writes into, under the output root
NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")
MAX_NAME_BYTES = 200  # below the 255 bytes of one path component, leaving room for suffixes


def safe_name(name: object, what: str) -> str:
    """`name` when it can be one path component as it is; else a named error (never a silent rewrite:
    two names must not map onto one file)."""
    if not isinstance(name, str) or not NAME.match(name) or len(name.encode("utf-8")) > MAX_NAME_BYTES:
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        raise OutputRootError(f"{what} {shown} cannot name a file: use letters, digits, '.', '_' and '-' "
                              f"(not starting with '.', at most {MAX_NAME_BYTES} bytes)")
    return name


def relative_to_root(path: Path, root: Path) -> Path | None:
    """`path` relative to `root` (either spelt as given or resolved), or None when it lies elsewhere."""
    absolute = Path(os.path.abspath(path if path.is_absolute() else root / path))
    for base in (Path(os.path.abspath(root)), root.resolve()):
        if absolute.is_relative_to(base):
            return absolute.relative_to(base)
    return None


def confined(path: str | Path, what: str, root: str | Path = ".") -> Path:
    """`path`, refused unless it lies inside `root` with no symlink among the components below the root
    (the file itself may be a link only when it is replaced, never followed: checked by the caller)."""
    path, root = Path(path), Path(root)
    rel = relative_to_root(path, root)
    if rel is None:
        raise OutputRootError(f"{what} {path} lies outside the output root {root.resolve()}; the suite writes "
                              "only under it")
    node = root.resolve()
    for part in rel.parts[:-1]:
        node = node / part
        if node.is_symlink():
            raise OutputRootError(f"{what} {path}: {node} is a symbolic link; the output root's folders must be "
                                  "real folders (a link could send the write outside the root)")
    return path


def check_output_root(root: str | Path = ".") -> None:
    """Refuse an output root whose output folders are symlinks or hold links out of the root (see the
    module docstring), naming the first one found."""
    root = Path(root)
    top = root.resolve()
    for name in OUTPUT_FOLDERS:
        folder = root / name
        if folder.is_symlink():
            raise OutputRootError(f"{folder} is a symbolic link (to {os.readlink(folder)}); the output root's "
                                  f"{name}/ must be a real folder: remove the link")
        if not folder.is_dir():
            continue
        for here, dirs, files in os.walk(folder):
            for entry in dirs:
                path = Path(here) / entry
                if path.is_symlink():
                    raise OutputRootError(f"{path} is a symbolic link to a folder ({os.readlink(path)}); the output "
                                          "root's folders must be real folders: remove the link")
            for entry in files:
                path = Path(here) / entry
                if path.is_symlink() and not path.resolve().is_relative_to(top):
                    raise OutputRootError(f"{path} is a symbolic link out of the output root ({os.readlink(path)}); "
                                          "remove it")
