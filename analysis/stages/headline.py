"""`copydecode headline`: the headline metrics files that `dvc metrics show` prints (analysis.headline)."""

from __future__ import annotations

from analysis.config import Config
from analysis.headline import HEADLINE_DIR, HeadlineSettings, build_headline, write_headline
from analysis.stages.common import timed


def settings(cfg: Config) -> tuple[HeadlineSettings, list[str]]:
    """params `headline`, and the bound's kernel sources (the paper's curve is a row when `paper` is one)."""
    sources = (cfg.params.get("bounds") or {}).get("kernel_sources") or []
    return HeadlineSettings.from_params(cfg.params.get("headline")), [str(s) for s in sources]


def run(cfg: Config, args=None) -> dict:
    chosen, sources = settings(cfg)
    with timed("headline"):
        head = build_headline(chosen, sources)
        written = write_headline(head, HEADLINE_DIR)
    return {"files": len(written), "figures": sum(len(v) for v in head.rows.values()),
            "left_out_absent_inputs": head.missing}
