"""The project's own git repository, read: one `git` runner (`git`) and the working tree's state
(`git_state`: the commit and the tracked files that differ from it).

Every read of the project's repository goes through here: the page foot's commit
(analysis.present.provenance), a frozen run's record (analysis.pipeline.runrecord), the README's committed
outputs (analysis.present.readme), committed per-case tables (analysis.results.percase) and the revisions
`copydecode compare` resolves (analysis.tools.compare). The commit miner reads other repositories, bundles
included, through its own plumbing (analysis.corpora.git).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

STATE_TIMEOUT = 30  # seconds for `rev-parse` and `status` (a hung git leaves the state unknown)


@dataclass(frozen=True)
class GitRun:
    """One `git` command's outcome: `error` when git could not run at all (not installed, timed out),
    else its exit status and output."""

    returncode: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0

    @property
    def text(self) -> str:
        """The output as text, stripped."""
        return self.stdout.decode(errors="replace").strip()


def git(root: Path | str, *args: str, timeout: float | None = None) -> GitRun:
    """`git ARGS` in `root` (argument lists, never a shell)."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return GitRun(None, error=str(exc))
    return GitRun(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class GitState:
    """The working tree: its commit (None when unknown) and the tracked files that differ from it (None
    when unknown); `error` says why git could not run."""

    commit: str | None
    changed: tuple[str, ...] | None
    error: str | None = None

    @property
    def dirty(self) -> bool | None:
        """Whether tracked files differ from the commit (None when unknown)."""
        return None if self.changed is None else bool(self.changed)


def git_state(root: Path | str = ".") -> GitState:
    """The commit of the tree at `root` and its uncommitted changes to tracked files."""
    head = git(root, "rev-parse", "HEAD", timeout=STATE_TIMEOUT)
    status = git(root, "status", "--porcelain", "--untracked-files=no", timeout=STATE_TIMEOUT)
    error = head.error or status.error
    changed = (tuple(line[3:].split(" -> ")[-1] for line in status.stdout.decode(errors="replace").splitlines()
                     if line.strip()) if status.ok else None)
    return GitState(head.text if head.ok else None, changed, error)
