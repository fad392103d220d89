"""`copydecode corpora`: every selected corpus -> data/corpora/cases.parquet."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis import corpora, probeedit
from analysis.config import Config
from analysis.errors import CorpusError, ParamsError
from analysis.io import write_json, write_parquet
from analysis.layout import CASES, METRICS, PROBEEDIT_EDITS
from analysis.params import choice, choices, get, positive_int
from analysis.stages.common import timed


@dataclass(frozen=True)
class HumanEvalPackSettings:
    languages: tuple[str, ...]
    framings: tuple[str, ...]
    local_dir: str
    source: str
    verify_sha256: bool


@dataclass(frozen=True)
class CorporaSettings:
    humanevalpack: HumanEvalPackSettings | None  # None: no HumanEvalPack language asked for
    probeedit: probeedit.ProbeEditParams | None  # None: disabled


HEP_SOURCES = ("auto", "local", "hub")


def settings(cfg: Config) -> CorporaSettings:
    p, hep = cfg.params, "corpora.humanevalpack"
    languages = choices(p, f"{hep}.languages", tuple(corpora.HUMANEVALPACK_LANGUAGES), nonempty=False)
    framings = choices(p, f"{hep}.framings", corpora.FRAMINGS)
    humanevalpack = HumanEvalPackSettings(
        languages=languages, framings=framings,
        local_dir=get(p, f"{hep}.local_dir", str),
        source=choice(p, f"{hep}.source", HEP_SOURCES),
        verify_sha256=get(p, f"{hep}.verify_sha256", bool),
    ) if languages else None
    pe = None
    if get(p, "corpora.probeedit.enabled", bool):
        pe = probeedit_settings(p)
    if humanevalpack is None and pe is None:
        raise ParamsError("params: no corpus selected (corpora.humanevalpack.languages is empty and "
                          "corpora.probeedit.enabled is false); an empty corpus has nothing to analyse")
    return CorporaSettings(humanevalpack, pe)


def probeedit_settings(p: dict) -> probeedit.ProbeEditParams:
    group = "corpora.probeedit"
    mix = get(p, f"{group}.mix", dict)
    weights = []
    for kind, weight in mix.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ParamsError(f"params: '{group}.mix.{kind}' must be a number, got {weight!r}")
        weights.append((str(kind), float(weight)))
    min_lines = positive_int(p, f"{group}.min_lines")
    max_lines = positive_int(p, f"{group}.max_lines")
    if max_lines < min_lines:
        raise ParamsError(f"params: '{group}.max_lines' ({max_lines}) is below min_lines ({min_lines})")
    return probeedit.ProbeEditParams(
        n_cases=positive_int(p, f"{group}.n_cases"),
        seed=get(p, f"{group}.seed", int),
        min_lines=min_lines, max_lines=max_lines,
        mix=tuple(weights),
        stdlib_dir=str(get(p, f"{group}.stdlib_dir", str)),
    )


def build_cases(settings: CorporaSettings) -> tuple[list[corpora.Case], pl.DataFrame, list[dict]]:
    """All cases, the ProbeEdit-S edit table (empty when disabled) and where each corpus came from."""
    cases: list[corpora.Case] = []
    origins: list[dict] = []
    hep = settings.humanevalpack
    if hep is not None:
        for language in hep.languages:
            records, origin = corpora.load_humanevalpack(language, hep.local_dir, hep.source, hep.verify_sha256)
            cases += corpora.hevalfix_cases(records, language, hep.framings)
            origins.append(origin.__dict__)
    edits = pl.DataFrame(schema=probeedit.EDITS_SCHEMA)
    if settings.probeedit is not None:
        pe_cases, edits = probeedit.build_probeedit(settings.probeedit)
        cases += pe_cases
        origins.append({"corpus": probeedit.CORPUS, "origin": "stdlib (pinned manifest)",
                        "sha256": None, "n_records": len(pe_cases)})
    if not cases:
        raise CorpusError("the selected corpora hold no case; nothing to analyse")
    return cases, edits, origins


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("corpora"):
        cases, edits, origins = build_cases(s)
        frame = corpora.cases_frame(cases)
        write_parquet(frame, CASES)
        write_parquet(edits, PROBEEDIT_EDITS)
    counts = frame.group_by("corpus", "framing").len().sort("corpus", "framing")
    metrics = {
        "n_cases": frame.height,
        "cases": {f"{r['corpus']}/{r['framing']}": r["len"] for r in counts.iter_rows(named=True)},
        "origins": origins,
    }
    write_json(metrics, METRICS / "corpora.json")
    return metrics
