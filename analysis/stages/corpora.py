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

from analysis.corpora import commits, probeedit, registry
from analysis.corpora.entries import COMMITS_PREFIX, corpus_names
from analysis.corpora.cases import CASES_SCHEMA, Case, cases_frame
from analysis.corpora.checks import DECISIONS, data_checks
from analysis.errors import CorpusError
from analysis.pipeline.io import remove_output, write_json, write_parquet, write_table
from analysis.layout import CASES, COMMIT_CASES, METRICS, PROBEEDIT_EDITS, TABLES
from analysis.parallel.shards import CASE_ROW_GROUP, ShardWriter
from analysis.parallel.progress import timed
from analysis.corpora.settings import CorporaSettings, settings  # noqa: F401 (settings: the CLI's)

# `copydecode corpora`: its help line and what it reads and writes (the CLI's --help)
HELP = "build data/corpora/cases.parquet"
READS_WRITES = ("reads the corpora in params `corpora` (and --pairs/--repo); writes data/corpora/cases.parquet, "
                "data/corpora/probeedit_edits.parquet, data/corpora/commits/, "
                "reports/tables/commit_repositories.{csv,md}, reports/metrics/corpora.json")


def add_arguments(parser) -> None:
    """`corpora`'s own options (settings(params, pairs, repo, only, language, name))."""
    parser.add_argument("--pairs", action="append", metavar="FILE",
                        help="also read this edit-pairs file (JSON Lines or Parquet; fields source, target)")
    parser.add_argument("--repo", action="append", metavar="PATH",
                        help="also mine this git repository or bundle for one-file commits (language: --language)")
    parser.add_argument("--only", nargs="?", const=True, default=False, metavar="KIND,...",
                        help="build only the --pairs/--repo inputs, none of the corpora configured in params; with "
                             "KIND,... also those configured kinds (humanevalpack, probeedit, commits, pairs, "
                             "datasets), e.g. --only datasets builds just params corpora.datasets")
    parser.add_argument("--language", default=None,
                        help="language of the --repo inputs (python, js, ...; default python) and of --pairs "
                             "records without a language field")
    parser.add_argument("--name", default=None,
                        help="corpus name of the one --pairs or --repo input (default: from the file or folder name)")


def iter_builds(s: CorporaSettings, seconds: dict | None = None) -> Iterator[tuple[list[Case], pl.DataFrame | None, list[dict]]]:
    """Each build's cases, its ProbeEdit-S edit table (None when it has none) and its origin records, one
    build at a time; each build's run time goes into `seconds` (kept out of the tracked metrics)."""
    import time

    for kind, corpus_settings in s.builds:
        started = time.perf_counter()
        build = registry.build_corpus(kind, corpus_settings)
        if seconds is not None:
            name = corpus_names(kind, corpus_settings)[0] if kind in ("commits", "pairs", "hfdataset") else kind
            seconds[f"{kind}:{name}"] = round(time.perf_counter() - started, 3)
        reports = build.report if isinstance(build.report, list) else [build.report]
        origins = [{k: v for k, v in r.items() if k != "seconds"} for r in reports]  # run times stay untracked
        yield build.cases, build.tables.get("probeedit_edits"), origins


@dataclass
class Written:
    """What `write_cases` wrote: case counts per (corpus, framing), origins, the ProbeEdit-S edits, and the
    data checks per `<corpus>/<framing>` (analysis.corpora.checks)."""

    counts: Counter
    origins: list[dict]
    edits: pl.DataFrame
    checks: dict[str, dict[str, int]]


def write_cases(s: CorporaSettings, seconds: dict | None = None) -> Written:
    """Build the corpora one at a time into data/corpora/cases.parquet (and each mined repository's
    data/corpora/commits/<corpus>.parquet): only one build's cases are in memory, plus every case's id
    (to refuse an id two builds share)."""
    counts: Counter = Counter()
    origins: list[dict] = []
    edits = pl.DataFrame(schema=probeedit.EDITS_SCHEMA)
    checks: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    with ExitStack() as stack:
        out = None
        for built, table, reports in iter_builds(s, seconds):
            frame = cases_frame(built, s.max_text_bytes)  # checks empty targets, sizes and ids within the build
            if out is None:  # opened after the first build, so a corpus refused up front leaves no data/ behind
                remove_stale_commit_shards([n for kind, b in s.builds if kind == "commits"
                                            for n in corpus_names(kind, b)])
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
            checks.update(data_checks(frame))
            origins += reports
            edits = edits if table is None else table
        if not seen:
            raise CorpusError("the selected corpora hold no case; nothing to analyse")
    return Written(counts, origins, edits, checks)


def write_commit_shard(frame: pl.DataFrame) -> None:
    """data/corpora/commits/<corpus>.parquet for each mined repository in `frame` (the cases.parquet
    schema), so that later work can scan one repository lazily (`polars.scan_parquet`) without the
    whole corpus."""
    for name in commit_corpora(frame):
        write_parquet(frame.filter(pl.col("corpus") == name), COMMIT_CASES / f"{name}.parquet")


def commit_corpora(frame: pl.DataFrame) -> list[str]:
    return sorted(c for c in frame["corpus"].unique() if c.startswith(f"{COMMITS_PREFIX}-"))


def remove_stale_commit_shards(names: list[str]) -> None:
    """Remove the files of repositories no longer configured (not in `names`) with the stage's output
    set (a run that fails keeps them); the temporary files of writes in progress (analysis.pipeline.io: dot
    files) are left to their writers."""
    COMMIT_CASES.mkdir(parents=True, exist_ok=True)
    wanted = {f"{name}.parquet" for name in names}
    for stale in COMMIT_CASES.glob("*.parquet"):
        if stale.name not in wanted and not stale.name.startswith("."):
            remove_output(stale)


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
        "data_checks": {"decisions": DECISIONS, "cases": dict(sorted(written.checks.items()))},
    }
    write_json(metrics, METRICS / "corpora.json")
    return metrics
