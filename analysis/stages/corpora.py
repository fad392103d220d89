"""`copydecode corpora`: every configured corpus -> data/corpora/cases.parquet.

Corpora come from the registry (`analysis.registry`): HumanEvalPack languages, ProbeEdit-S, commits
mined from git repositories or bundles (`corpora.commits`), and a user's edit-pairs files
(`corpora.pairs`). `--pairs FILE` and `--repo PATH` on the command line add to what params.yaml lists,
for a one-off analysis outside `dvc repro`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import polars as pl

from analysis import commits, corpora, pairs, probeedit, registry
from analysis.config import Config
from analysis.errors import CorpusError, ParamsError
from analysis.io import write_json, write_parquet, write_table
from analysis.layout import CASES, COMMIT_CASES, METRICS, PROBEEDIT_EDITS, TABLES
from analysis.params import choice, choices, get, get_or, positive_int
from analysis.stages.common import timed

HEP_SOURCES = ("auto", "local", "hub")


@dataclass(frozen=True)
class CorporaSettings:
    builds: tuple[tuple[str, object], ...]  # (registry kind, its settings), in build order


def _humanevalpack(p: dict) -> registry.HumanEvalPackSettings | None:
    hep = "corpora.humanevalpack"
    languages = choices(p, f"{hep}.languages", tuple(corpora.HUMANEVALPACK_LANGUAGES), nonempty=False)
    if not languages:
        return None
    return registry.HumanEvalPackSettings(
        languages=languages, framings=choices(p, f"{hep}.framings", corpora.FRAMINGS),
        local_dir=get(p, f"{hep}.local_dir", str), source=choice(p, f"{hep}.source", HEP_SOURCES),
        verify_sha256=get(p, f"{hep}.verify_sha256", bool),
    )


def probeedit_params(p: dict) -> probeedit.ProbeEditParams | None:
    group = "corpora.probeedit"
    if not get(p, f"{group}.enabled", bool):
        return None
    mix = get(p, f"{group}.mix", dict)
    for kind, weight in mix.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ParamsError(f"params: '{group}.mix.{kind}' must be a number, got {weight!r}")
    min_lines, max_lines = positive_int(p, f"{group}.min_lines"), positive_int(p, f"{group}.max_lines")
    if max_lines < min_lines:
        raise ParamsError(f"params: '{group}.max_lines' ({max_lines}) is below min_lines ({min_lines})")
    return probeedit.ProbeEditParams(
        n_cases=positive_int(p, f"{group}.n_cases"), seed=get(p, f"{group}.seed", int),
        min_lines=min_lines, max_lines=max_lines,
        mix=tuple((str(k), float(v)) for k, v in mix.items()),
        stdlib_dir=str(get(p, f"{group}.stdlib_dir", str)),
    )


def _typed(kind: type, entry: object, where: str, defaults: dict | None = None):
    """A settings dataclass from a params mapping: unknown keys and wrong types are named."""
    if not isinstance(entry, dict):
        raise ParamsError(f"params: {where} must be a mapping, got {entry!r}")
    known = {f.name: f for f in fields(kind)}
    values = {**(defaults or {}), **entry}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ParamsError(f"params: {where} has unknown keys {unknown}; known: {', '.join(known)}")
    for key, value in values.items():
        if isinstance(value, list):
            values[key] = tuple(value)
    try:
        return kind(**values)
    except TypeError as exc:
        raise ParamsError(f"params: {where}: {exc}") from exc


def _listed(p: dict, key: str) -> list:
    entries = get_or(p, key, [], list)
    return entries or []


def settings(cfg: Config, extra_pairs: tuple[str, ...] = (), extra_repos: tuple[str, ...] = ()) -> CorporaSettings:
    p = cfg.params
    builds: list[tuple[str, object]] = []
    if (hep := _humanevalpack(p)) is not None:
        builds.append(("humanevalpack", hep))
    if (pe := probeedit_params(p)) is not None:
        builds.append(("probeedit", pe))
    commit_defaults = get_or(p, "corpora.commit_defaults", {}, dict)
    for i, entry in enumerate(_listed(p, "corpora.commits")):
        where = f"corpora.commits[{i}]"
        entries = commits.expand_repositories(entry, where) if isinstance(entry, dict) and "repos" in entry else [entry]
        for one in entries:
            builds.append(("commits", _typed(commits.CommitSettings, one, where, commit_defaults)))
    for repo in extra_repos:
        builds.append(("commits", _typed(commits.CommitSettings, {"repo": repo}, f"--repo {repo}", commit_defaults)))
    for i, entry in enumerate(_listed(p, "corpora.pairs")):
        builds.append(("pairs", _typed(pairs.PairsSettings, entry, f"corpora.pairs[{i}]")))
    for path in extra_pairs:
        builds.append(("pairs", pairs.PairsSettings(path=path)))
    if not builds:
        raise ParamsError("params: no corpus selected (no HumanEvalPack language, ProbeEdit-S disabled, no commits "
                          "or pairs); an empty corpus has nothing to analyse")
    return CorporaSettings(tuple(builds))


def build_cases(s: CorporaSettings, seconds: dict | None = None) -> tuple[list[corpora.Case], pl.DataFrame, list[dict]]:
    """All cases, the ProbeEdit-S edit table (empty when disabled) and one origin record per corpus;
    each build's run time goes into `seconds` (kept out of the tracked metrics)."""
    import time

    cases: list[corpora.Case] = []
    origins: list[dict] = []
    edits = pl.DataFrame(schema=probeedit.EDITS_SCHEMA)
    for kind, corpus_settings in s.builds:
        started = time.perf_counter()
        build = registry.build_corpus(kind, corpus_settings)
        if seconds is not None:
            name = getattr(corpus_settings, "name", None) or kind
            seconds[f"{kind}:{name}"] = round(time.perf_counter() - started, 3)
        cases += build.cases
        reports = build.report if isinstance(build.report, list) else [build.report]
        origins += [{k: v for k, v in r.items() if k != "seconds"} for r in reports]  # run times stay untracked
        edits = build.tables.get("probeedit_edits", edits)
    if not cases:
        raise CorpusError("the selected corpora hold no case; nothing to analyse")
    return cases, edits, origins


def write_commit_shards(frame: pl.DataFrame) -> None:
    """data/corpora/commits/<corpus>.parquet for each mined repository (the cases.parquet schema), so
    that later work can scan one repository lazily (`polars.scan_parquet`) without the whole corpus;
    files of repositories no longer configured are removed."""
    COMMIT_CASES.mkdir(parents=True, exist_ok=True)
    names = sorted(c for c in frame["corpus"].unique() if c.startswith(f"{commits.CORPUS_PREFIX}-"))
    wanted = {f"{name}.parquet" for name in names}
    for stale in COMMIT_CASES.glob("*.parquet"):
        if stale.name not in wanted:
            stale.unlink()
    for name in names:
        write_parquet(frame.filter(pl.col("corpus") == name), COMMIT_CASES / f"{name}.parquet")


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg, tuple(getattr(args, "pairs", None) or ()), tuple(getattr(args, "repo", None) or ()))
    with timed("corpora") as box:
        box["builds"] = {}
        cases, edits, origins = build_cases(s, box["builds"])
        frame = corpora.cases_frame(cases)
        write_parquet(frame, CASES)
        write_parquet(edits, PROBEEDIT_EDITS)
        write_commit_shards(frame)
        write_table(commits.repository_table(origins), TABLES / "commit_repositories")
    counts = frame.group_by("corpus", "framing").len().sort("corpus", "framing")
    metrics = {
        "n_cases": frame.height,
        "cases": {f"{r['corpus']}/{r['framing']}": r["len"] for r in counts.iter_rows(named=True)},
        "origins": origins,
    }
    write_json(metrics, METRICS / "corpora.json")
    return metrics
