"""`copydecode headline`: the headline metrics files that `dvc metrics show` prints (analysis.headline)."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.headline import HEADLINE_DIR, HeadlineSettings, build_headline, write_headline
from analysis.stages.common import timed


@dataclass(frozen=True)
class HeadlineStageSettings:
    chosen: HeadlineSettings                # params `headline`: which slice of each table is the headline
    kernel_sources: tuple[str, ...]         # params `bounds.kernel_sources` (the paper's curve is a row when `paper` is one)


def settings(params: dict) -> HeadlineStageSettings:
    sources = (params.get("bounds") or {}).get("kernel_sources") or []
    return HeadlineStageSettings(HeadlineSettings.from_params(params.get("headline")), tuple(str(s) for s in sources))


def run(s: HeadlineStageSettings) -> dict:
    with timed("headline"):
        head = build_headline(s.chosen, list(s.kernel_sources))
        written = write_headline(head, HEADLINE_DIR)
    return {"files": len(written), "figures": sum(len(v) for v in head.rows.values()),
            "left_out_absent_inputs": head.missing}
