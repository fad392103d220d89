"""`copydecode corpora`: every selected corpus -> data/corpora/cases.parquet."""

from __future__ import annotations

import polars as pl

from analysis import corpora, probeedit
from analysis.config import Config, CorporaSettings, corpora_settings
from analysis.errors import CorpusError
from analysis.io import write_json, write_parquet
from analysis.layout import CASES, METRICS, PROBEEDIT_EDITS
from analysis.stages.common import timed


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
    settings = corpora_settings(cfg)
    with timed("corpora"):
        cases, edits, origins = build_cases(settings)
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
