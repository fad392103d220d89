"""The committed outputs, read from git (test support): the README's Results block and the claims are checked
against the outputs as committed at HEAD, not the workspace's, because a user's own `dvc repro` rewrites
the workspace outputs with that machine's timings, which are not the README's."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from analysis.errors import ParamsError
from analysis.layout import CLAIMS_JSON, E2E_FROZEN, FROZEN_KERNELS, LATENCY_MODEL, METRICS, TABLES, TIMINGS_REPORT
from analysis.pipeline.repo import git
from analysis.present.readme import BUSY_BENCHMARK, README

# every output the Results block reads (analysis.present.readme.results_block and its helpers), the frozen
# GPU sources' environment files included (their provenance line); a path absent at a revision is left out
BLOCK_INPUTS = (CLAIMS_JSON, METRICS, TABLES, LATENCY_MODEL, BUSY_BENCHMARK, TIMINGS_REPORT, Path("reports/bench"),
                FROZEN_KERNELS, E2E_FROZEN)


def _git(root: Path, *args: str) -> bytes:
    """`git ARGS`'s output in `root` (analysis.pipeline.repo), a failure as a named ParamsError."""
    done = git(root, *args)
    if done.error is not None:
        raise ParamsError(f"git is not available to read committed outputs: {done.error}")
    if done.returncode != 0:
        raise ParamsError(f"git {' '.join(args)} failed in {root}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def committed_outputs(dest: Path, root: Path = Path("."), rev: str = "HEAD", paths=BLOCK_INPUTS) -> Path:
    """Write `paths` (files or folders; by default the stage outputs the Results block reads), as committed at
    `rev`, under `dest` (a fresh folder); returns dest."""
    root, dest = Path(root), Path(dest)
    listed = _git(root, "ls-tree", "-r", "--name-only", rev, "--", *(str(p) for p in paths)).decode()
    found = [line for line in listed.splitlines() if line]
    dest.mkdir(parents=True, exist_ok=True)
    if found:
        archive = _git(root, "archive", "--format=tar", rev, "--", *found)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
    return dest


def committed_file(path: str | Path, root: Path = Path("."), rev: str = "HEAD") -> bytes:
    """One file's bytes as committed at `rev`."""
    return _git(Path(root), "show", f"{rev}:{Path(path).as_posix()}")


def committed_readme(root: Path = Path("."), rev: str = "HEAD") -> str:
    """README.md as committed at `rev`."""
    return committed_file(README, root, rev).decode("utf-8")
