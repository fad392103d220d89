"""The corpus registry: kind -> builder. Each builder takes its typed settings and returns a CorpusBuild.

    humanevalpack  HumanEvalPackSettings  HEvalFix-<Lang> cases, framings body/decl/prompt
    probeedit      ProbeEditParams        ProbeEdit-S, framing "unit" (+ its table of edits)
    commits        CommitSettings         CommitEdits-<name>, framing "file", mined from git history
    pairs          PairsSettings          <name>, framing "pair", a user's JSONL or Parquet file
    hfdataset      HFDatasetSettings      <name>, framing "pair", any dataset `datasets` reads (hub or local)

The settings types and the names a build will have (`corpus_names`, for checks before any build) are
analysis.corpora.entries', which imports no builder. A stage calls `build_corpus(kind, settings)` once per
configured corpus and concatenates the
cases (`analysis.corpora.cases.cases_frame` checks the ids are unique). `report` is JSON-ready for the
metrics file; its timings, where a builder has them, sit under the key "seconds" alone so that a
stage can keep them out of DVC-tracked metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analysis.corpora import commits, hfdataset, humanevalpack, pairs, probeedit
from analysis.corpora.cases import Case
from analysis.corpora.entries import (
    PROBEEDIT_CORPUS,
    CommitSettings,
    HFDatasetSettings,
    HumanEvalPackSettings,
    PairsSettings,
    ProbeEditParams,
    check_framings,
)
from analysis.errors import CorpusError


@dataclass(frozen=True)
class CorpusBuild:
    cases: list[Case]
    report: dict[str, Any] | list[dict[str, Any]]  # one origin per corpus built (a list for humanevalpack)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # side tables, e.g. {"probeedit_edits": ...}


def build_humanevalpack(settings: HumanEvalPackSettings) -> CorpusBuild:
    check_framings(list(settings.framings))
    if not settings.languages:
        raise CorpusError("humanevalpack: languages is empty; list at least one or disable the corpus")
    cases: list[Case] = []
    origins = []
    for language in settings.languages:
        records, origin = humanevalpack.load_humanevalpack(
            language, settings.local_dir, settings.source, settings.verify_sha256
        )
        cases += humanevalpack.hevalfix_cases(records, language, list(settings.framings))
        origins.append(dict(origin.__dict__))
    return CorpusBuild(cases, origins)


def build_probeedit(settings: ProbeEditParams) -> CorpusBuild:
    cases, edits = probeedit.build_probeedit(settings)
    origin = (f"shipped:{probeedit.SHIPPED_ORIGIN}" if settings.stdlib_dir == "auto"
              else f"stdlib:{settings.stdlib_dir}")
    report = {"corpus": PROBEEDIT_CORPUS, "origin": f"{origin} (pinned manifest)", "sha256": None,
              "n_records": len(cases)}
    return CorpusBuild(cases, report, {"probeedit_edits": edits})


def build_commits(settings: CommitSettings) -> CorpusBuild:
    cases, report = commits.mine_commits(settings)
    return CorpusBuild(cases, report.as_dict())


def build_pairs(settings: PairsSettings) -> CorpusBuild:
    cases, report = pairs.load_pairs(settings)
    return CorpusBuild(cases, report.as_dict())


def build_hfdataset(settings: HFDatasetSettings) -> CorpusBuild:
    cases, report = hfdataset.load_hfdataset(settings)
    return CorpusBuild(cases, report.as_dict())


REGISTRY: dict[str, tuple[type, Callable[[Any], CorpusBuild]]] = {
    "humanevalpack": (HumanEvalPackSettings, build_humanevalpack),
    "probeedit": (ProbeEditParams, build_probeedit),
    "commits": (CommitSettings, build_commits),
    "pairs": (PairsSettings, build_pairs),
    "hfdataset": (HFDatasetSettings, build_hfdataset),
}
KINDS: tuple[str, ...] = tuple(REGISTRY)


def build_corpus(kind: str, settings: Any) -> CorpusBuild:
    if kind not in REGISTRY:
        raise CorpusError(f"unknown corpus kind {kind!r}; known: {', '.join(KINDS)}")
    settings_type, builder = REGISTRY[kind]
    if not isinstance(settings, settings_type):
        raise CorpusError(f"corpus kind {kind!r} takes {settings_type.__name__}, got {type(settings).__name__}")
    return builder(settings)
