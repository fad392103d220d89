"""Read-only git plumbing for the commit miner: a pinned, hook-proof environment, bundles and repository
folders, the history (`git log --raw -z`, parsed with a cursor) and blob contents (`git cat-file --batch`).
Every failure is a CorpusError that names what was being read."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import CorpusError

# `git rev-parse --local-env-vars`
REPO_ENV_VARS = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR",
)


@dataclass(frozen=True)
class Change:
    """One entry of `git log --raw`: a changed path of one commit."""

    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str
    status: str  # A, C, D, M, R, T, U, X (the letter only)
    path: str
    old_path: str


@dataclass(frozen=True)
class LoggedCommit:
    commit: str
    subject: str
    changes: tuple[Change, ...]


def _git_env() -> dict[str, str]:
    # repository variables are set inside git hooks; they would point git at another repository
    env = {k: v for k, v in os.environ.items() if k not in REPO_ENV_VARS}
    env.update({
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",     # never refresh an index or take a lock: read-only
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    })
    return env


_PINNED_CONFIG = (
    "-c", "diff.renames=true", "-c", "diff.renameLimit=1000", "-c", "log.showRoot=true",
    "-c", "log.showSignature=false",
    "-c", "i18n.logOutputEncoding=UTF-8", "-c", "core.quotePath=false",
)


def git(git_dir: Path, *args: str, stdin: bytes | None = None, what: str) -> bytes:
    """Run git on `git_dir` (a .git folder or a bare repository); a failure names `what`."""
    command = ["git", "--git-dir", str(git_dir), *_PINNED_CONFIG, *args]
    return _run(command, stdin, what)


def _run(command: list[str], stdin: bytes | None, what: str) -> bytes:
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, env=_git_env(), check=False)
    except FileNotFoundError as exc:
        raise CorpusError(f"commits: the `git` command is not installed (needed for {what})") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise CorpusError(f"{what}: git failed (exit {done.returncode}): {message}")
    return done.stdout


def repository_git_dir(path: Path) -> Path:
    """The git folder of the repository at `path` (its top level, or a bare repository)."""
    out = _run(
        ["git", "-C", str(path), "rev-parse", "--absolute-git-dir", "--is-bare-repository"],
        None, f"{path}: not a git repository",
    ).decode("utf-8", "surrogateescape").split("\n")
    git_dir, bare = Path(out[0]), out[1] == "true"
    own = path.resolve() if bare else (path / ".git").resolve()
    if git_dir.resolve() == path.resolve():  # the repository's .git folder itself (`--repo x/.git`): the same history
        return git_dir
    if git_dir.resolve() != own:
        raise CorpusError(
            f"{path}: not the top folder of a git repository (it lies inside the repository {git_dir}); "
            f"give the repository's top folder or a bundle file"
        )
    return git_dir


def clone_bundle(bundle: Path, into: Path) -> Path:
    target = into / "repo.git"
    _run(["git", "clone", "--bare", "--quiet", str(bundle), str(target)], None, f"{bundle}: cloning the bundle")
    return target


def resolve_rev(git_dir: Path, rev: str, where: str) -> str:
    """The commit id of `rev`. A bundle names no HEAD, so HEAD falls back to the single branch."""
    try:
        return git(git_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", what=where).decode().strip()
    except CorpusError:
        if rev != "HEAD":
            raise CorpusError(f"{where}: no commit {rev!r} in the repository") from None
    branches = git(git_dir, "for-each-ref", "--format=%(refname)", "refs/heads", what=where).decode().split()
    if not branches:
        raise CorpusError(f"{where}: the repository has no commits (no branch, HEAD names nothing); mine a "
                          "repository with history")
    if len(branches) != 1:
        raise CorpusError(
            f"{where}: HEAD does not name a commit and the repository has {len(branches)} branches "
            f"({', '.join(branches) or 'none'}); set rev to one of them"
        )
    return git(git_dir, "rev-parse", "--verify", f"{branches[0]}^{{commit}}", what=where).decode().strip()


# ---------------------------------------------------------------- pass 1: the log

def read_log(git_dir: Path, head: str, where: str) -> list[LoggedCommit]:
    """Every non-merge commit reachable from `head`, oldest first, with its changed paths."""
    raw = git(
        git_dir, "log", "--no-merges", "-M", "--raw", "-z", "--no-abbrev", "--no-color",
        "--format=format:%x01%H%x02%s", "--reverse", head, "--",
        what=f"{where}: reading the history",
    )
    return parse_log(raw)


def parse_log(raw: bytes) -> list[LoggedCommit]:
    """Parse `--format=%x01%H%x02%s --raw -z` output with a cursor (a subject may hold any byte but
    a newline, so no split on a marker byte is safe)."""
    commits: list[LoggedCommit] = []
    pos, n = 0, len(raw)
    while pos < n:
        if raw[pos] in (0, 10):  # separators between commits
            pos += 1
            continue
        if raw[pos] != 1:
            raise CorpusError(f"commits: unexpected git log output at byte {pos}: {raw[pos:pos + 40]!r}")
        sep = raw.index(b"\x02", pos)
        commit = raw[pos + 1:sep].decode("ascii")
        # the subject ends at a newline, or at a NUL when the commit changes nothing (an empty commit)
        ends = [e for e in (raw.find(b"\n", sep), raw.find(b"\0", sep)) if e >= 0]
        end = min(ends) if ends else n
        subject = raw[sep + 1:end].decode("utf-8", "replace")
        pos = end + 1
        changes = []
        while pos < n and raw[pos] == ord(":"):
            meta_end = raw.index(b"\0", pos)
            old_mode, new_mode, old_blob, new_blob, status = raw[pos + 1:meta_end].decode("ascii").split(" ")
            letter = status[0]
            path_end = raw.index(b"\0", meta_end + 1)
            first = raw[meta_end + 1:path_end].decode("utf-8", "surrogateescape")
            pos = path_end + 1
            second = first
            if letter in "RC":
                second_end = raw.index(b"\0", pos)
                second = raw[pos:second_end].decode("utf-8", "surrogateescape")
                pos = second_end + 1
            changes.append(Change(old_mode, new_mode, old_blob, new_blob, letter, second, first))
        commits.append(LoggedCommit(commit, subject, tuple(changes)))
    return commits


def count_merges(git_dir: Path, head: str, where: str) -> int:
    return int(git(git_dir, "rev-list", "--merges", "--count", head, what=where).decode().strip())


# ---------------------------------------------------------------- pass 2: the blobs

def read_blobs(git_dir: Path, blob_ids: list[str], where: str) -> dict[str, bytes]:
    """Contents of the blobs, in one `git cat-file --batch` call."""
    unique = list(dict.fromkeys(blob_ids))
    if not unique:
        return {}
    out = git(git_dir, "cat-file", "--batch", stdin=("\n".join(unique) + "\n").encode(),
              what=f"{where}: reading file contents")
    blobs: dict[str, bytes] = {}
    pos = 0
    for blob in unique:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].decode("ascii", "replace").split(" ")
        if len(header) != 3 or header[1] != "blob":
            raise CorpusError(f"{where}: object {blob} is not a readable blob ({' '.join(header)})")
        size = int(header[2])
        start = header_end + 1
        blobs[blob] = out[start:start + size]
        pos = start + size + 1
    return blobs
