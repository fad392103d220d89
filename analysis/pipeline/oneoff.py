"""`--out DIR`: a one-off run under its own output root.

The stage runs with DIR as its working folder, so every path of `analysis.layout` (data/, reports/)
lands under DIR and the committed reports/ stay untouched. What the run reads keeps its meaning: the
params file, the --pairs/--repo paths and the input paths inside the params file, given relative to
the folder the command was started in, are rewritten relative to DIR (no machine path reaches its
reports); absolute ones stay as given. The committed models that stages read but no per-case stage
writes are copied into DIR once (a later run keeps DIR's copy, so DIR stays self-consistent): the latency
model (bounds, optimal, rivals) and the batched step-cost model with its two tables (`serving simulate`,
`serving replay`, the serving page).

Every run into DIR writes DIR/params.effective.yaml: the params it ran with, `--set` applied (`record_params`), and
says when they differ from those an earlier run in DIR recorded (its outputs were then built from other params);
`copydecode compare` reads that file for a run folder.
"""

from __future__ import annotations

import copy
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from analysis.pipeline.config import Config
from analysis.errors import ParamsError
from analysis.layout import LATENCY_MODEL, STEP_COST, TABLES
from analysis.pipeline.confine import check_output_root, confined
from analysis.pipeline.io import write_with
from analysis.pipeline.params import load_params

# Input paths a params file may hold (dotted; `[]` marks a list of entries), resolved before the move.
PATH_KEYS = ("corpora.humanevalpack.local_dir", "corpora.probeedit.stdlib_dir", "corpora.commits[].repo",
             "corpora.commits[].repos", "corpora.pairs[].path", "corpora.datasets[].dataset", "tokenizer.spec")
# The project's own folders (in a checkout, beside dvc.yaml): a one-off run never writes into them.
PROJECT_FOLDERS = ("analysis", "kernels_profile", "notebooks", "reports", "tests", "data", ".git", ".dvc")
KEEP = ("auto",)  # values that are not paths
# what `enter_out_root` copies from the folder the command starts in, when there and not yet in DIR
COPIED_MODELS = (LATENCY_MODEL, STEP_COST, TABLES / "step_cost_terms.csv", TABLES / "step_cost_residuals.csv")

EFFECTIVE_PARAMS = Path("params.effective.yaml")  # under DIR: the params the last run there used, --set applied


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def changed_keys(before: dict, after: dict) -> list[str]:
    """Dotted keys whose value differs between two params dicts (either side absent counts)."""
    a, b = _flat(before), _flat(after)
    return sorted(k for k in set(a) | set(b) if a.get(k, object()) != b.get(k, object()))


def record_params(params: dict, stage: str, overrides: list[str], folder: Path = Path(".")) -> list[str]:
    """Write FOLDER/params.effective.yaml (the params `stage` runs with, --set applied, as a header says) and return
    the keys where they differ from the file an earlier run there wrote ([] for the first run or the same params)."""
    import yaml

    path = Path(folder) / EFFECTIVE_PARAMS
    before = None
    if path.is_file() and not path.is_symlink():
        try:  # the params reader: aliases and deep nesting refused, never expanded
            before = load_params(path, check_keys=False)
        except ParamsError:
            before = None
    changed = changed_keys(before, params) if isinstance(before, dict) else []
    confined(path, "the effective params", Path(folder))
    header = (f"# the params `copydecode {stage}` ran with in this folder"
              + (f", with --set {' '.join(overrides)}" if overrides else "") + "; written by copydecode, data only\n")
    text = header + yaml.safe_dump(params, sort_keys=False, allow_unicode=True)
    write_with(lambda tmp: tmp.write_text(text), path)
    return changed


def from_root(path: Path, root: Path | None) -> str:
    """`path` (absolute) as the run inside `root` reads it: relative to the resolved root, so reports and
    metrics of a one-off run hold no machine paths (its folders resolved, its own name kept: a link stays
    a link); absolute when `root` is None or on another drive."""
    if root is None:
        return str(path)
    try:
        return os.path.relpath(Path(path).parent.resolve() / Path(path).name, Path(root).resolve())
    except ValueError:
        return str(path)


def _absolute(value: Any, start: Path, root: Path | None = None) -> Any:
    if not isinstance(value, str) or value in KEEP or not value or Path(value).is_absolute():
        return value
    candidate = start / value
    try:
        exists = candidate.exists()
    except OSError:  # a name too long to be a path: a hub id or name, left for its reader to judge
        exists = False
    # tokenizer.spec may be a name (qwen2.5) or a hub id: only an existing path is rewritten there
    return from_root(candidate, root) if exists or value.startswith(".") else value


def absolute_params(params: dict, start: Path, root: Path | None = None) -> dict:
    """A copy of `params` whose relative input paths are absolute against `start` (with `root`: relative
    to the run root instead, pointing at the same files)."""
    params = copy.deepcopy(params)
    for dotted in PATH_KEYS:
        head, _, tail = dotted.partition("[].")
        *parents, last = head.split(".")
        node: Any = params
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or last not in node:
            continue
        if tail:
            for entry in node[last] or []:
                if isinstance(entry, dict) and tail in entry:
                    entry[tail] = _absolute(entry[tail], start, root)
        else:
            node[last] = _absolute(node[last], start, root)
    return params


def check_out_root(out: str | Path, root: Path, start: Path) -> None:
    """Refuse an output root that is a file, a folder above the current one (`/`, `..`: the run would
    write data/ and reports/ there), or one of the project's own folders (`reports`, `notebooks`, ...)."""
    try:
        str(out).encode("utf-8")
    except UnicodeEncodeError:  # every page and metrics file names its root: refused before anything is made
        shown = str(out).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise ParamsError(f"--out {shown}: the folder name is not valid UTF-8; give a UTF-8 name") from None
    if any(len(part.encode("utf-8")) > 255 for part in Path(out).parts):
        raise ParamsError(f"--out: a folder name over 255 bytes ({str(out)[:60]}...); give a shorter name")
    if root.exists() and not root.is_dir():
        raise ParamsError(f"--out {out}: exists and is not a folder")
    resolved, here = root.resolve(), start.resolve()
    if resolved in here.parents:
        raise ParamsError(f"--out {out}: a folder above the current one; give a separate folder for a one-off run")
    for mark in ("dvc.yaml", ".git"):  # another checkout: its committed reports/ are not a run's to overwrite
        if (resolved / mark).exists():
            raise ParamsError(f"--out {out}: holds {mark}, so it is a project checkout, not a run folder; a one-off "
                              "run writes only into a folder of its own (for example runs/NAME)")
    if (here / "dvc.yaml").is_file() and resolved.is_relative_to(here):
        first = resolved.relative_to(here).parts[0]
        if first in PROJECT_FOLDERS:
            raise ParamsError(f"--out {out}: lies in the project's own {first}/ folder; give a separate folder "
                              "(for example runs/NAME)")


def enter_out_root(out: str | Path, cfg: Config, args) -> Config:
    """Resolve what the run reads, create DIR and move into it; returns the config to use there."""
    start = Path.cwd()
    root = Path(out).expanduser()
    root = root if root.is_absolute() else start / root
    if root.resolve() == start.resolve():
        raise ParamsError("--out names the current folder; give a separate folder for a one-off run")
    check_out_root(out, root, start)
    for name in ("pairs", "repo"):
        given = getattr(args, name, None)
        if given:
            setattr(args, name, [from_root(start / p, root) if not Path(p).is_absolute() else p for p in given])
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParamsError(f"--out {out}: cannot create the folder ({exc.strerror})") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise ParamsError(f"--out {out}: the folder is not writable")
    # DIR is data (docs/run-folders.md): its links are refused before the first write into it, the model copy
    # included (a linked reports/ used to receive it outside the root, a dangling link its bytes)
    check_output_root(root)
    for committed in COPIED_MODELS:
        copy = root / committed
        if (start / committed).is_file() and not copy.exists():
            confined(copy, f"the copy of {committed}", root)
            # a temporary file of our own, renamed onto the path: a link left there is replaced, never written through
            write_with(lambda tmp, c=committed: shutil.copy2(start / c, tmp), copy)
    # no notebooks/ link: the reports stage reads its templates from the project (analysis.present.templates.TEMPLATES),
    # never from DIR, which holds outputs only
    os.chdir(root)
    params_path = Path(cfg.path) if Path(cfg.path).is_absolute() else Path(from_root(start / cfg.path, root))
    return replace(cfg, params=absolute_params(cfg.params, start, root), path=params_path)


def discard_unused_root(root: Path) -> bool:
    """Remove a one-off root that a failed run created, when it holds nothing but what `enter_out_root` and
    `record_params` put there (the model copies, the effective params) and empty folders; returns whether it was
    removed."""
    root = Path(root)
    if not root.is_dir() or root.is_symlink():
        return False
    files = [p for p in root.rglob("*") if not p.is_dir() or p.is_symlink()]
    copies = {root / committed for committed in (*COPIED_MODELS, EFFECTIVE_PARAMS)}
    if any(p not in copies for p in files):
        return False
    if Path.cwd().resolve().is_relative_to(root.resolve()):
        os.chdir(root.resolve().parent)  # the run moved into it
    for copy in copies:
        copy.unlink(missing_ok=True)
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        folder.rmdir()
    root.rmdir()
    return True
