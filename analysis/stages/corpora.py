"""`copydecode corpora`: every configured corpus -> data/corpora/cases.parquet.

Corpora come from the registry (`analysis.corpora.registry`): HumanEvalPack languages, ProbeEdit-S,
commits mined from git repositories or bundles (params `corpora.commits`), and a user's edit-pairs
files (params `corpora.pairs`). `--pairs FILE` and `--repo PATH` on the command line add to what params.yaml lists,
for a one-off analysis outside `dvc repro`; with `--only` they are the whole run (`--language`,
`--name` set what params would). Every corpus-entry field is type- and range-checked by name, and a
corpus name that is reserved (`pooled`, the paper's corpora) or given twice is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import polars as pl

from analysis.corpora import commits, humanevalpack, probeedit, registry
from analysis.corpora.cases import CASES_SCHEMA, Case, cases_frame
from analysis.corpora.hfdataset import HFDatasetSettings
from analysis.corpora.pairs import PairsSettings
from analysis.errors import CorpusError, ParamsError
from analysis.io import remove_output, write_json, write_parquet, write_table
from analysis.layout import CASES, COMMIT_CASES, METRICS, PAPER_CORPORA, POOLED, PROBEEDIT_EDITS, TABLES
from analysis.params import choice, choices, did_you_mean, get, get_or, positive_int, typed_entry
from analysis.shards import CASE_ROW_GROUP, ShardWriter
from analysis.stages.common import timed

HEP_SOURCES = ("auto", "local", "hub")
PAIRS_FORMATS = ("auto", "jsonl", "parquet")


@dataclass(frozen=True)
class CorporaSettings:
    builds: tuple[tuple[str, object], ...]  # (registry kind, its settings), in build order
    max_text_bytes: int                     # params corpora.max_text_bytes: the largest source or target of a case


def _humanevalpack(p: dict) -> registry.HumanEvalPackSettings | None:
    hep = "corpora.humanevalpack"
    languages = choices(p, f"{hep}.languages", tuple(humanevalpack.HUMANEVALPACK_LANGUAGES), nonempty=False)
    if not languages:
        return None
    return registry.HumanEvalPackSettings(
        languages=languages, framings=choices(p, f"{hep}.framings", humanevalpack.FRAMINGS),
        local_dir=get(p, f"{hep}.local_dir", str), source=choice(p, f"{hep}.source", HEP_SOURCES),
        verify_sha256=get(p, f"{hep}.verify_sha256", bool),
    )


def _listed(p: dict, key: str) -> list:
    entries = get_or(p, key, [], list)
    return entries or []


@dataclass(frozen=True)
class CommandLine:
    """The corpora stage's command-line inputs (`copydecode corpora --pairs/--repo/--only/--language/--name`)."""

    pairs: tuple[str, ...] = ()
    repos: tuple[str, ...] = ()
    only: bool = False
    language: str | None = None
    name: str | None = None

    def check(self) -> None:
        given = len(self.pairs) + len(self.repos)
        if self.only and not given:
            raise ParamsError("--only builds just the --pairs/--repo inputs, and none was given")
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


def commits_entry(entry: dict, where: str, defaults: dict) -> commits.CommitSettings:
    """A commits entry over corpora.commit_defaults, typed and range-checked at settings time; an
    error names the key the value came from (the entry's, the defaults', or --language/--name)."""
    build = typed_entry(commits.CommitSettings, entry, where, defaults, "corpora.commit_defaults")

    def key(field: str) -> str:
        if where.startswith("--") and field in ("name", "language") and field in entry:
            return f"--{field} {getattr(build, field)!r}"
        return f"'{where}.{field}'" if field in entry and not where.startswith("--") else f"'corpora.commit_defaults.{field}'"

    commits.check_settings(build, key)
    return build


def pairs_entry(entry: dict, where: str) -> PairsSettings:
    build = typed_entry(PairsSettings, entry, where)
    if build.format not in PAIRS_FORMATS:
        raise ParamsError(f"params: '{where}.format' must be one of {', '.join(PAIRS_FORMATS)}, got {build.format!r}"
                          + did_you_mean(build.format, PAIRS_FORMATS))
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
        for name in registry.corpus_names(kind, corpus_settings):
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


def settings(params: dict, pairs=None, repo=None, only: bool = False, language: str | None = None,
             name: str | None = None) -> CorporaSettings:
    """params `corpora`, plus the command line's --pairs/--repo/--only/--language/--name."""
    p = params
    line = CommandLine(tuple(pairs or ()), tuple(repo or ()), bool(only), language, name)
    line.check()
    builds: list[tuple[str, object]] = []
    commit_defaults = get(p, "corpora.commit_defaults", dict)
    if not line.only:
        if (hep := _humanevalpack(p)) is not None:
            builds.append(("humanevalpack", hep))
        if (pe := probeedit.probeedit_params(p)) is not None:
            builds.append(("probeedit", pe))
        for i, entry in enumerate(_listed(p, "corpora.commits")):
            where = f"corpora.commits[{i}]"
            entries = commits.expand_repositories(entry, where) if isinstance(entry, dict) and "repos" in entry else [entry]
            for one in entries:
                builds.append(("commits", commits_entry(one, where, commit_defaults)))
        for i, entry in enumerate(_listed(p, "corpora.pairs")):
            builds.append(("pairs", pairs_entry(entry, f"corpora.pairs[{i}]")))
        for i, entry in enumerate(_listed(p, "corpora.datasets")):
            builds.append(("hfdataset", typed_entry(HFDatasetSettings, entry, f"corpora.datasets[{i}]")))
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
    return tuple(name for kind, build in s.builds for name in registry.corpus_names(kind, build))


def iter_builds(s: CorporaSettings, seconds: dict | None = None) -> Iterator[tuple[list[Case], pl.DataFrame | None, list[dict]]]:
    """Each build's cases, its ProbeEdit-S edit table (None when it has none) and its origin records, one
    build at a time; each build's run time goes into `seconds` (kept out of the tracked metrics)."""
    import time

    for kind, corpus_settings in s.builds:
        started = time.perf_counter()
        build = registry.build_corpus(kind, corpus_settings)
        if seconds is not None:
            name = registry.corpus_names(kind, corpus_settings)[0] if kind in ("commits", "pairs", "hfdataset") else kind
            seconds[f"{kind}:{name}"] = round(time.perf_counter() - started, 3)
        reports = build.report if isinstance(build.report, list) else [build.report]
        origins = [{k: v for k, v in r.items() if k != "seconds"} for r in reports]  # run times stay untracked
        yield build.cases, build.tables.get("probeedit_edits"), origins


def build_cases(s: CorporaSettings, seconds: dict | None = None) -> tuple[list[Case], pl.DataFrame, list[dict]]:
    """All cases, the ProbeEdit-S edit table (empty when disabled) and one origin record per corpus."""
    cases: list[Case] = []
    origins: list[dict] = []
    edits = pl.DataFrame(schema=probeedit.EDITS_SCHEMA)
    for built, table, reports in iter_builds(s, seconds):
        cases += built
        origins += reports
        edits = edits if table is None else table
    if not cases:
        raise CorpusError("the selected corpora hold no case; nothing to analyse")
    return cases, edits, origins


@dataclass
class Written:
    """What `write_cases` wrote: case counts per (corpus, framing), origins, the ProbeEdit-S edits."""

    counts: Counter
    origins: list[dict]
    edits: pl.DataFrame


def write_cases(s: CorporaSettings, seconds: dict | None = None) -> Written:
    """Build the corpora one at a time into data/corpora/cases.parquet (and each mined repository's
    data/corpora/commits/<corpus>.parquet): only one build's cases are in memory, plus every case's id
    (to refuse an id two builds share)."""
    counts: Counter = Counter()
    origins: list[dict] = []
    edits = pl.DataFrame(schema=probeedit.EDITS_SCHEMA)
    seen: set[tuple[str, str]] = set()
    with ExitStack() as stack:
        out = None
        for built, table, reports in iter_builds(s, seconds):
            frame = cases_frame(built, s.max_text_bytes)  # checks empty targets, sizes and ids within the build
            if out is None:  # opened after the first build, so a corpus refused up front leaves no data/ behind
                remove_stale_commit_shards([n for kind, b in s.builds if kind == "commits"
                                            for n in registry.corpus_names(kind, b)])
                out = stack.enter_context(ShardWriter(CASES, CASES_SCHEMA, row_group_rows=CASE_ROW_GROUP))
            keys = list(zip(frame["case_id"].to_list(), frame["framing"].to_list()))
            again = [k[0] for k in keys if k in seen]
            if again:
                raise CorpusError(f"duplicate case ids: {again[:5]}: two inputs give the same case id (e.g. a --pairs "
                                  "file whose ids another input uses); set distinct ids or corpus names")
            seen.update(keys)
            out.write(frame)
            write_commit_shard(frame)
            counts.update(zip(frame["corpus"].to_list(), frame["framing"].to_list()))
            origins += reports
            edits = edits if table is None else table
        if not seen:
            raise CorpusError("the selected corpora hold no case; nothing to analyse")
    return Written(counts, origins, edits)


def write_commit_shard(frame: pl.DataFrame) -> None:
    """data/corpora/commits/<corpus>.parquet for each mined repository in `frame` (the cases.parquet
    schema), so that later work can scan one repository lazily (`polars.scan_parquet`) without the
    whole corpus."""
    for name in commit_corpora(frame):
        write_parquet(frame.filter(pl.col("corpus") == name), COMMIT_CASES / f"{name}.parquet")


def commit_corpora(frame: pl.DataFrame) -> list[str]:
    return sorted(c for c in frame["corpus"].unique() if c.startswith(f"{commits.CORPUS_PREFIX}-"))


def remove_stale_commit_shards(names: list[str]) -> None:
    """Remove the files of repositories no longer configured (not in `names`) with the stage's output
    set (a run that fails keeps them); the temporary files of writes in progress (analysis.io: dot
    files) are left to their writers."""
    COMMIT_CASES.mkdir(parents=True, exist_ok=True)
    wanted = {f"{name}.parquet" for name in names}
    for stale in COMMIT_CASES.glob("*.parquet"):
        if stale.name not in wanted and not stale.name.startswith("."):
            remove_output(stale)


def write_commit_shards(frame: pl.DataFrame) -> None:
    """The per-repository files of a whole cases table; files of repositories not in it are removed."""
    remove_stale_commit_shards(commit_corpora(frame))
    write_commit_shard(frame)


def run(s: CorporaSettings) -> dict:
    with timed("corpora") as box:
        box["builds"] = {}
        written = write_cases(s, box["builds"])
        write_parquet(written.edits, PROBEEDIT_EDITS)
        write_table(commits.repository_table(written.origins), TABLES / "commit_repositories")
    metrics = {
        "n_cases": sum(written.counts.values()),
        "cases": {f"{corpus}/{framing}": n for (corpus, framing), n in sorted(written.counts.items())},
        "origins": written.origins,
    }
    write_json(metrics, METRICS / "corpora.json")
    return metrics
