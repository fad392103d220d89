"""Each corpus kind's params entry without its builder: the typed settings every builder takes, their checks,
and the corpus names a build will give (`corpus_names`), known before any build runs. The corpora settings
(analysis.corpora.settings) read params through these alone, so a stage that checks a corpus name (e2e's
constrained check) or names a framing depends on this module, not on the builders behind the registry (the
git miner, the ProbeEdit-S generator, the hub loaders): a change to a builder does not make such a stage stale.

Case-id conventions every reader shares live here too: a multi-file CommitEdits case is
`CommitEdits-<name>/<12 hex digits>:<path>` (`FILE_SEPARATOR` parts the commit from the path)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import CorpusError, ParamsError
from analysis.pipeline.params import did_you_mean, get, positive_int

# ---------------------------------------------------------------- HumanEvalPack

HUMANEVALPACK_LANGUAGES: dict[str, str] = {
    "python": "Py",
    "js": "JS",
    "cpp": "CPP",
    "go": "Go",
    "java": "Java",
    "rust": "Rust",
}
FRAMINGS: tuple[str, ...] = ("body", "decl", "prompt")


@dataclass(frozen=True)
class HumanEvalPackSettings:
    """params corpora.humanevalpack (no default in code)."""

    languages: tuple[str, ...]
    framings: tuple[str, ...]
    local_dir: str | None
    source: str  # auto | local | hub (see analysis.corpora)
    verify_sha256: bool


def hevalfix_corpus(language: str) -> str:
    """HEvalFix-<Lang>, the corpus a HumanEvalPack language gives."""
    check_language(language)
    return f"HEvalFix-{HUMANEVALPACK_LANGUAGES[language]}"


def check_language(language: str) -> None:
    if language not in HUMANEVALPACK_LANGUAGES:
        raise CorpusError(
            f"unknown HumanEvalPack language {language!r}; known: {', '.join(HUMANEVALPACK_LANGUAGES)}"
        )


def check_framings(framings) -> None:
    bad = [f for f in framings if f not in FRAMINGS]
    if bad or not framings:
        raise CorpusError(f"unknown or empty framings {bad or framings!r}; known: {', '.join(FRAMINGS)}")


# ---------------------------------------------------------------- ProbeEdit-S

PROBEEDIT_CORPUS = "ProbeEdit-S"
PROBEEDIT_MANIFEST = Path(__file__).parents[1] / "data" / "probeedit_sources.json"


@dataclass(frozen=True)
class ProbeEditParams:
    """params corpora.probeedit (no default in code)."""

    n_cases: int
    seed: int
    min_lines: int
    max_lines: int
    mix: tuple[tuple[str, float], ...]
    stdlib_dir: str  # auto: the archive SHIPPED_STDLIB; else a CPython 3.11.7 Lib folder
    manifest: str    # the pinned files' manifest (PROBEEDIT_MANIFEST, shipped with the package)


def probeedit_params(p: dict) -> ProbeEditParams | None:
    """params `corpora.probeedit` (None when disabled), every value checked by name."""
    if not get(p, "corpora.probeedit.enabled", bool):
        return None
    return probeedit_recipe(p)


def probeedit_recipe(p: dict) -> ProbeEditParams:
    """The ProbeEdit-S recipe of params `corpora.probeedit`, enabled or not (the fine-tuning pilot draws
    its cases disjoint from it either way), every value checked by name."""
    group = "corpora.probeedit"
    mix = get(p, f"{group}.mix", dict)
    for kind, weight in mix.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ParamsError(f"params: '{group}.mix.{kind}' must be a number, got {weight!r}")
        if not math.isfinite(weight) or weight < 0:
            raise ParamsError(f"params: '{group}.mix.{kind}' must be a finite weight >= 0, got {weight!r}")
    if not any(w > 0 for w in mix.values()):
        raise ParamsError(f"params: '{group}.mix' needs at least one edit kind with a weight > 0, got {mix!r}")
    min_lines, max_lines = positive_int(p, f"{group}.min_lines"), positive_int(p, f"{group}.max_lines")
    if max_lines < min_lines:
        raise ParamsError(f"params: '{group}.max_lines' ({max_lines}) is below min_lines ({min_lines})")
    return ProbeEditParams(
        n_cases=positive_int(p, f"{group}.n_cases"), seed=get(p, f"{group}.seed", int),
        min_lines=min_lines, max_lines=max_lines,
        mix=tuple((str(k), float(v)) for k, v in mix.items()),
        stdlib_dir=str(get(p, f"{group}.stdlib_dir", str)), manifest=str(PROBEEDIT_MANIFEST),
    )


# ---------------------------------------------------------------- CommitEdits

COMMITS_PREFIX = "CommitEdits"
FILE_SEPARATOR = ":"
BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
LANGUAGE_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "python": (".py",),
    "js": (".js", ".mjs", ".cjs"),
    "ts": (".ts", ".tsx"),
    "cpp": (".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".h"),
    "c": (".c", ".h"),
    "go": (".go",),
    "java": (".java",),
    "rust": (".rs",),
}


@dataclass(frozen=True)
class CommitSettings:
    """One `corpora.commits` entry over params `corpora.commit_defaults` (no default in code: every
    filter that decides which commits become cases is a params key)."""

    repo: str                                  # a repository folder or a git bundle file
    name: str | None                           # corpus "CommitEdits-<name>"; None: the path's stem
    language: str
    extensions: tuple[str, ...] | None         # None: LANGUAGE_EXTENSIONS[language]
    rev: str                                   # history walked; a bundle without HEAD: its one branch
    min_lines: int
    max_lines: int
    max_changed_share: float
    max_cases: int
    seed: int
    sha256: str | None                         # pin for a bundle file
    vendored_dirs: tuple[str, ...]
    minified_suffixes: tuple[str, ...]
    max_line_chars: int
    generated_markers: tuple[str, ...]
    generated_scan_lines: int
    multi_file: bool                           # True: a case per changed source file (see the docstring)


def check_settings(settings: CommitSettings, key: Callable[[str], str] = str) -> tuple[str, ...]:
    """Validate the settings; returns the extensions in use. `key(field)` names a field in a message
    (the corpora stage passes the params key the value came from: `'corpora.commits[0].min_lines'`,
    `'corpora.commit_defaults.min_lines'`, or `--language`)."""
    if settings.extensions is None and settings.language not in LANGUAGE_EXTENSIONS:
        raise CorpusError(
            f"commits: {key('language')}: unknown language {settings.language!r} (known: {', '.join(LANGUAGE_EXTENSIONS)}"
            f"{did_you_mean(settings.language, LANGUAGE_EXTENSIONS)}); or give the file extensions explicitly "
            f"({key('extensions')})"
        )
    extensions = settings.extensions if settings.extensions is not None else LANGUAGE_EXTENSIONS[settings.language]
    if not extensions or any(not e.startswith(".") for e in extensions):
        raise CorpusError(f"commits: {key('extensions')} must be non-empty and start with '.', got {list(extensions)}")
    if not 1 <= settings.min_lines <= settings.max_lines:
        raise CorpusError(f"commits: {key('min_lines')} = {settings.min_lines} and {key('max_lines')} = {settings.max_lines}: "
                          "need 1 <= min_lines <= max_lines")
    if not 0 < settings.max_changed_share <= 1:
        raise CorpusError(f"commits: {key('max_changed_share')} must be in (0, 1], got {settings.max_changed_share}")
    if settings.max_cases < 1:
        raise CorpusError(f"commits: {key('max_cases')} must be >= 1, got {settings.max_cases}")
    if settings.sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", settings.sha256):
        raise CorpusError(f"commits: {key('sha256')} must be 64 hex digits (the bundle file's SHA-256), got {settings.sha256!r}")
    if settings.multi_file and FILE_SEPARATOR in commits_corpus(settings):
        raise CorpusError(f"commits: {key('name')}: a multi-file corpus name may not contain {FILE_SEPARATOR!r} "
                          f"(it separates a case id's commit from its path): {commits_corpus(settings)!r}")
    if not isinstance(settings.multi_file, bool):
        raise CorpusError(f"commits: {key('multi_file')} must be true or false, got {settings.multi_file!r}")
    if settings.max_line_chars < 1:
        raise CorpusError(f"commits: {key('max_line_chars')} must be >= 1, got {settings.max_line_chars}")
    if settings.generated_scan_lines < 0:
        raise CorpusError(f"commits: {key('generated_scan_lines')} must be >= 0, got {settings.generated_scan_lines}")
    return tuple(extensions)


def commits_corpus(settings: CommitSettings) -> str:
    return f"{COMMITS_PREFIX}-{settings.name or repository_name(Path(settings.repo))}"


def is_bundle(path: Path) -> bool:
    if not path.is_file():  # a FIFO or device named like a bundle would block the open() forever
        return False
    with path.open("rb") as fh:
        head = fh.read(max(len(s) for s in BUNDLE_SIGNATURES))
    return any(head.startswith(s) for s in BUNDLE_SIGNATURES)


def is_repository_folder(path: Path) -> bool:
    """A working tree's top folder (has .git) or a bare repository (HEAD, objects/ and refs/)."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir()
                                         and (path / "refs").is_dir())


def list_repositories(path: str | Path) -> list[Path]:
    """The repositories a `repos` entry names: a folder's bundle files and repository folders (its
    direct children, sorted by name), or a list file (one path a line, relative to the file's folder;
    blank lines and lines starting with # are skipped). Anything else in a folder is ignored; a listed
    path that is neither a bundle nor a repository, or an empty result, is a CorpusError."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"commits: repos {path} does not exist (expected a folder of bundles/repositories or a list file)")
    if path.is_dir():
        if is_repository_folder(path):
            raise CorpusError(f"commits: repos {path} is itself a repository; name it with `repo`, not `repos`")
        found = sorted(p for p in path.iterdir()
                       if (p.is_file() and is_bundle(p)) or (p.is_dir() and is_repository_folder(p)))
        where = f"the folder {path}"
    else:
        found = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            entry = Path(line) if Path(line).is_absolute() else path.parent / line
            if not ((entry.is_file() and is_bundle(entry)) or (entry.is_dir() and is_repository_folder(entry))):
                raise CorpusError(f"commits: {path}:{number}: {entry} is neither a git bundle nor a repository folder")
            found.append(entry)
        where = f"the list file {path}"
    if not found:
        raise CorpusError(f"commits: {where} names no git bundle or repository")
    return found


def repository_name(path: Path) -> str:
    """A repository's name from its path: the stem of a bundle or a bare `NAME.git`; for a `.git`
    folder (`--repo x/.git`), the folder that holds it."""
    resolved = path.resolve()
    if resolved.name == ".git":
        resolved = resolved.parent
    return resolved.name.removesuffix(".bundle").removesuffix(".git")


def expand_repositories(entry: dict, where: str) -> list[dict]:
    """A commits params entry with `repos` -> one entry per repository (same filters), named
    `<name>-<repository>` when the entry has a name, else `<repository>`; two repositories of one
    name are an error (their corpora would merge)."""
    entry = dict(entry)
    repos = entry.pop("repos")
    if "repo" in entry or "sha256" in entry:
        raise CorpusError(f"commits: {where}: `repos` names many repositories; it takes no `repo` or `sha256`")
    prefix = entry.pop("name", None)
    out, names = [], {}
    for repo in list_repositories(repos):
        name = f"{prefix}-{repository_name(repo)}" if prefix else repository_name(repo)
        if name in names:
            raise CorpusError(f"commits: {where}: {names[name]} and {repo} both give the corpus name {name!r}")
        names[name] = repo
        out.append({**entry, "repo": str(repo), "name": name})
    return out


# ---------------------------------------------------------------- pairs files and Hugging Face datasets

PAIRS_PREFIX = "Pairs"
HF_PREFIX = "HF"
FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet", ".csv": "csv"}


@dataclass(frozen=True)
class PairsSettings:
    path: str
    name: str | None = None     # corpus name; default "Pairs-<file stem>"
    format: str = "auto"        # auto (by suffix: .jsonl/.ndjson, .parquet) | jsonl | parquet
    language: str = "unknown"   # for records without a `language`
    fields: dict[str, str] | None = None  # this suite's field -> the file's field, e.g. {source: before, target: after}


def pairs_corpus(settings: PairsSettings) -> str:
    return settings.name or f"{PAIRS_PREFIX}-{Path(settings.path).stem}"


@dataclass(frozen=True)
class HFDatasetSettings:
    dataset: str                          # hub id, save_to_disk folder, or .json/.jsonl/.parquet/.csv file
    split: str = "train"
    fields: dict[str, str] | None = None  # this suite's field -> the dataset's column
    name: str | None = None               # corpus name; default "HF-<dataset's last path part>"
    language: str = "unknown"             # for records without a `language`
    config: str | None = None             # the hub dataset's configuration (subset), if it has several
    revision: str | None = None           # hub revision (a commit sha pins it)
    sha256: str | None = None             # pin of a local file: refused by name when its bytes differ


def hfdataset_is_local_file(settings: HFDatasetSettings) -> bool:
    """The dataset names a .json/.jsonl/.parquet/.csv file (present or not), not a folder or a hub id."""
    path = Path(settings.dataset)
    return not path.is_dir() and path.suffix.lower() in FILE_BUILDERS


def check_pin(settings: HFDatasetSettings, where: str) -> None:
    """A sha256 pin is 64 hex digits and applies to a local file only (a hub dataset pins with `revision`)."""
    pin = settings.sha256
    if pin is None:
        return
    if not re.fullmatch(r"[0-9a-fA-F]{64}", pin):
        raise CorpusError(f"{where}: sha256 must be 64 hex digits (the file's SHA-256), got {pin!r}")
    if not hfdataset_is_local_file(settings):
        raise CorpusError(f"{where}: sha256 pins a local .json/.jsonl/.parquet/.csv file; "
                          + ("a folder cannot be pinned" if Path(settings.dataset).is_dir()
                             else "pin a hub dataset with revision: <commit sha>"))


def hfdataset_corpus(settings: HFDatasetSettings) -> str:
    if settings.name:
        return settings.name
    stem = Path(settings.dataset.rstrip("/")).stem if Path(settings.dataset).suffix in FILE_BUILDERS \
        else Path(settings.dataset.rstrip("/")).name
    return f"{HF_PREFIX}-{re.sub(r'[^A-Za-z0-9._+-]+', '-', stem).strip('-') or 'dataset'}"


# ---------------------------------------------------------------- every kind

def corpus_names(kind: str, settings: Any) -> list[str]:
    """The corpus names a build of `kind` gives (HumanEvalPack: one per language), known before it runs."""
    if kind == "commits":
        return [commits_corpus(settings)]
    if kind == "pairs":
        return [pairs_corpus(settings)]
    if kind == "hfdataset":
        return [hfdataset_corpus(settings)]
    if kind == "probeedit":
        return [PROBEEDIT_CORPUS]
    return [hevalfix_corpus(lang) for lang in settings.languages]
