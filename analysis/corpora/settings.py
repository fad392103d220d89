"""The corpora settings: every corpus entry of params `corpora` (and the corpora stage's command line)
-> the registry builds, type- and range-checked by name, known before any build runs; shared by the
corpora stage and by every stage whose settings name a corpus (e2e.constrained.corpus). It reads params
through analysis.corpora.entries alone and imports no builder, so such a stage does not depend on them."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.corpora.entries import (
    FRAMINGS,
    HUMANEVALPACK_LANGUAGES,
    CommitSettings,
    HFDatasetSettings,
    HumanEvalPackSettings,
    PairsSettings,
    check_pin,
    check_settings,
    corpus_names,
    expand_repositories,
    probeedit_params,
)
from analysis.errors import CorpusError, ParamsError
from analysis.pooling import PAPER_CORPORA, POOLED
from analysis.pipeline.params import choice, choices, did_you_mean, get, get_or, positive_int, typed_entry

HEP_SOURCES = ("auto", "local", "hub")
PAIRS_FORMATS = ("auto", "jsonl", "parquet")


@dataclass(frozen=True)
class CorporaSettings:
    builds: tuple[tuple[str, object], ...]  # (registry kind, its settings), in build order
    max_text_bytes: int                     # params corpora.max_text_bytes: the largest source or target of a case


def _humanevalpack(p: dict) -> HumanEvalPackSettings | None:
    hep = "corpora.humanevalpack"
    languages = choices(p, f"{hep}.languages", tuple(HUMANEVALPACK_LANGUAGES), nonempty=False)
    if not languages:
        return None
    return HumanEvalPackSettings(
        languages=languages, framings=choices(p, f"{hep}.framings", FRAMINGS),
        local_dir=get(p, f"{hep}.local_dir", str), source=choice(p, f"{hep}.source", HEP_SOURCES),
        verify_sha256=get(p, f"{hep}.verify_sha256", bool),
    )


def _listed(p: dict, key: str) -> list:
    entries = get_or(p, key, [], list)
    return entries or []


# the configured corpus kinds `--only KIND,...` may keep, by their params key under `corpora`
CONFIGURED_KINDS = ("humanevalpack", "probeedit", "commits", "pairs", "datasets")


@dataclass(frozen=True)
class CommandLine:
    """The corpora stage's command-line inputs (`copydecode corpora --pairs/--repo/--only/--language/--name`)."""

    pairs: tuple[str, ...] = ()
    repos: tuple[str, ...] = ()
    only: bool = False
    language: str | None = None
    name: str | None = None
    keep: tuple[str, ...] = ()   # `--only KIND,...`: the configured corpus kinds (CONFIGURED_KINDS) built too

    def check(self) -> None:
        given = len(self.pairs) + len(self.repos)
        unknown = [k for k in self.keep if k not in CONFIGURED_KINDS]
        if unknown:
            raise ParamsError(f"--only {','.join(self.keep)}: unknown corpus kind {unknown[0]!r}; known: "
                              f"{', '.join(CONFIGURED_KINDS)}" + did_you_mean(unknown[0], CONFIGURED_KINDS))
        if self.only and not given and not self.keep:
            raise ParamsError("--only builds just the --pairs/--repo inputs, and none was given (--only KIND,... "
                              "builds configured kinds too, e.g. --only datasets)")
        if self.name is not None and given != 1:
            raise ParamsError(f"--name names one input, but {given} --pairs/--repo inputs were given")
        if (self.language is not None or self.name is not None) and not given:
            raise ParamsError("--language and --name apply to --pairs/--repo inputs, and none was given")
        for option, paths in (("--pairs", self.pairs), ("--repo", self.repos)):
            for path in paths:
                check_utf8_name(path, option)


def check_utf8_name(path: str, where: str) -> None:
    """A file or folder name that is not UTF-8 (Python holds its bytes as surrogates) cannot become a
    corpus name, a case id or a table cell: refused by name, with the offending byte."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(str(path)[exc.start]) - 0xDC00 if 0xDC80 <= ord(str(path)[exc.start]) <= 0xDCFF else None
        shown = str(path).encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise ParamsError(f"{where} {shown}: the path is not valid UTF-8"
                          + (f" (byte 0x{byte:02x})" if byte is not None else "")
                          + "; rename it to UTF-8") from None


def commits_entry(entry: dict, where: str, defaults: dict) -> CommitSettings:
    """A commits entry over corpora.commit_defaults, typed and range-checked at settings time; an
    error names the key the value came from (the entry's, the defaults', or --language/--name)."""
    build = typed_entry(CommitSettings, entry, where, defaults, "corpora.commit_defaults")

    def key(field: str) -> str:
        if where.startswith("--") and field in ("name", "language") and field in entry:
            return f"--{field} {getattr(build, field)!r}"
        return f"'{where}.{field}'" if field in entry and not where.startswith("--") else f"'corpora.commit_defaults.{field}'"

    check_settings(build, key)
    return build


def pairs_entry(entry: dict, where: str) -> PairsSettings:
    build = typed_entry(PairsSettings, entry, where)
    if build.format not in PAIRS_FORMATS:
        raise ParamsError(f"params: '{where}.format' must be one of {', '.join(PAIRS_FORMATS)}, got {build.format!r}"
                          + did_you_mean(build.format, PAIRS_FORMATS))
    return build


def datasets_entry(entry: dict, where: str) -> HFDatasetSettings:
    """A corpora.datasets entry, typed; its sha256 pin checked at settings time (64 hex digits, a local file)."""
    build = typed_entry(HFDatasetSettings, entry, where)
    try:
        check_pin(build, f"'{where}.sha256'")
    except CorpusError as exc:
        raise ParamsError(f"params: {exc}") from None
    return build


def _command_line_builds(line: CommandLine, commit_defaults: dict) -> list[tuple[str, object]]:
    builds: list[tuple[str, object]] = []
    extra = {k: v for k, v in (("language", line.language), ("name", line.name)) if v is not None}
    for repo in line.repos:
        builds.append(("commits", commits_entry({"repo": repo, **extra}, f"--repo {repo}", commit_defaults)))
    for path in line.pairs:
        builds.append(("pairs", pairs_entry({"path": path, **extra}, f"--pairs {path}")))
    return builds


def check_names(builds: list[tuple[str, object]], user: set[int]) -> None:
    """Refuse a corpus name that is the pooled row's, one of the paper's corpora for a user's input,
    or given twice (two inputs would merge into one corpus)."""
    seen: dict[str, int] = {}
    for index, (kind, corpus_settings) in enumerate(builds):
        for name in corpus_names(kind, corpus_settings):
            where = (getattr(corpus_settings, "path", None) or getattr(corpus_settings, "repo", None)
                     or getattr(corpus_settings, "dataset", None) or kind)
            if name.lower() == POOLED:
                raise ParamsError(f"corpus name {name!r} ({where}) is reserved for the pooled rows; choose another name")
            if index in user and name in PAPER_CORPORA:
                raise ParamsError(f"corpus name {name!r} ({where}) is one of the paper's corpora "
                                  f"({', '.join(PAPER_CORPORA)}); a user's corpus needs another name")
            if name in seen:
                raise ParamsError(f"corpus name {name!r} is given twice ({where}, and input {seen[name] + 1} of this "
                                  "run): the same input listed twice, or two inputs with one name; remove one or "
                                  "set a different name")
            seen[name] = index


def settings(params: dict, pairs=None, repo=None, only: bool | str | None = False, language: str | None = None,
             name: str | None = None) -> CorporaSettings:
    """params `corpora`, plus the command line's --pairs/--repo/--only/--language/--name. `only`: False (every
    configured corpus), True or "" (`--only`: the command line's inputs alone), or "KIND,..." (`--only datasets`:
    those configured kinds beside the command line's inputs, none of the others)."""
    p = params
    keep = tuple(k.strip() for k in only.split(",") if k.strip()) if isinstance(only, str) else ()
    line = CommandLine(tuple(pairs or ()), tuple(repo or ()), only is True or isinstance(only, str), language, name,
                       keep)
    line.check()
    builds: list[tuple[str, object]] = []
    commit_defaults = get(p, "corpora.commit_defaults", dict)

    def wanted(kind: str) -> bool:
        return not line.only or kind in line.keep

    if wanted("humanevalpack") and (hep := _humanevalpack(p)) is not None:
        builds.append(("humanevalpack", hep))
    if wanted("probeedit") and (pe := probeedit_params(p)) is not None:
        builds.append(("probeedit", pe))
    for i, entry in enumerate(_listed(p, "corpora.commits") if wanted("commits") else []):
        where = f"corpora.commits[{i}]"
        entries = expand_repositories(entry, where) if isinstance(entry, dict) and "repos" in entry else [entry]
        for one in entries:
            builds.append(("commits", commits_entry(one, where, commit_defaults)))
    for i, entry in enumerate(_listed(p, "corpora.pairs") if wanted("pairs") else []):
        builds.append(("pairs", pairs_entry(entry, f"corpora.pairs[{i}]")))
    for i, entry in enumerate(_listed(p, "corpora.datasets") if wanted("datasets") else []):
        builds.append(("hfdataset", datasets_entry(entry, f"corpora.datasets[{i}]")))
    paper = len([b for b in builds if b[0] in ("humanevalpack", "probeedit")])
    user = set(range(paper, len(builds) + len(line.pairs) + len(line.repos)))
    builds += _command_line_builds(line, commit_defaults)
    if not builds:
        raise ParamsError("params: no corpus selected (no HumanEvalPack language, ProbeEdit-S disabled, no commits "
                          "or pairs); an empty corpus has nothing to analyse")
    for kind, build in builds:  # the paths params name (corpora.pairs[].path, corpora.commits[].repo)
        for field in ("path", "repo"):
            if isinstance(getattr(build, field, None), str):
                check_utf8_name(getattr(build, field), f"{kind} {field}")
    check_names(builds, user)
    return CorporaSettings(tuple(builds), positive_int(p, "corpora.max_text_bytes"))


def configured_corpora(params: dict) -> tuple[str, ...]:
    """The corpus names params `corpora` configures (the paper's and the user's), in build order, known
    before any build runs: what another stage's corpus setting (e2e.constrained.corpus) may name."""
    s = settings(params)
    return tuple(name for kind, build in s.builds for name in corpus_names(kind, build))
