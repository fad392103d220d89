"""`copydecode headline`: the headline metrics files that `dvc metrics show` prints (analysis.present.headline)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from analysis.pipeline.digest import stale_stages
from analysis.errors import ParamsError, StaleInputError
from analysis.present.headline import HEADLINE_DIR, HeadlineSettings, build_headline, write_headline
from analysis.latency.sources import names_from_params
from analysis.pipeline.params import get, known_keys, number, number_list, positive_int
from analysis.results.outputs import require_outputs
from analysis.parallel.progress import timed


@dataclass(frozen=True)
class HeadlineStageSettings:
    chosen: HeadlineSettings                # params `headline`: which slice of each table is the headline
    kernel_sources: tuple[str, ...]         # params `kernel.sources` (the paper's curve is a row when `paper` is one)


# `copydecode headline`: its help line and what it reads and writes (the CLI's --help)
HELP = "headline metrics for `dvc metrics show`: a few dozen figures, one small file per measure"
READS_WRITES = ("reads reports/tables (coverage, bounds, kernel_speedup, perturbation, e2e_pooled, pilot_em, serving_claim, "
                "rivals_fastest) and reports/metrics (roundtrip, kernels, e2e, rivals); writes metrics/*.json")


def settings(params: dict) -> HeadlineStageSettings:
    known_keys(params, "headline", [f.name for f in fields(HeadlineSettings)])
    framing = get(params, "headline.framing", str)
    if not framing:
        raise ParamsError("params: 'headline.framing' must be a framing name, got ''")
    decimals = positive_int(params, "headline.decimals", minimum=0)
    if decimals > 8:
        raise ParamsError(f"params: 'headline.decimals' must be an integer 0-8, got {decimals}")
    chosen = HeadlineSettings(
        framing=framing,
        kernel_ns=number_list(params, "headline.kernel_ns", lo=1, integer=True),
        perturb_rate=number(params, "headline.perturb_rate", lo=0.0, hi=1.0),
        decimals=decimals,
    )
    return HeadlineStageSettings(chosen, names_from_params(params, "kernel.sources"))


def run(s: HeadlineStageSettings) -> dict:
    require_outputs("headline")
    stale = stale_stages()
    if stale:  # the headline figures would combine outputs of two corpora
        raise StaleInputError("; ".join(stale.values()))
    with timed("headline"):
        head = build_headline(s.chosen, list(s.kernel_sources))
        written = write_headline(head, HEADLINE_DIR)
    return {"files": len(written), "figures": sum(len(v) for v in head.rows.values()),
            "left_out_absent_inputs": head.missing}
