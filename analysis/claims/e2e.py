"""Beyond the paper: measured end to end. Pooled over every measured case (the ratio of summed times, with
the case count; analysis.results.e2e), never the best case; the frozen e2e-wide run beside it when
committed, else "not yet run". No verdict against the paper, which gives no measured figure."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.errors import MissingOutputError
from analysis.layout import E2E_FROZEN, REPORTS
from analysis.results.e2e import noise_note, not_yet_run, pooled_from_speedup, pooled_sentence, read_frozen
from analysis.results.numbers import MISSING

REASON = ("the paper gives no measured end-to-end figure; each figure is pooled: the ratio of summed times over the "
          "cases named (per corpus in the e2e report), never a best case")
METHOD = "teacher-forced oracle programs on a real KV cache, seeded sample stratified by output length [e2e]"


def e2e_noise(metrics_dir: Path) -> str:
    """'; marked NOISY: reasons' when the e2e stage's own environment record says so, else ''."""
    path = Path(metrics_dir) / "e2e.json"
    return noise_note(json.loads(path.read_text())) if path.is_file() else ""


@register("end_to_end")
def e2e_claim(spec: dict, tables: Path, metrics_dir: Path, frozen: Path | None = None) -> Claim:
    e2e = metric_input(spec, 0, tables, metrics_dir)
    if e2e.filter(pl.col("method") != "ar").height == 0:
        raise MissingOutputError("e2e_speedup.csv has no method other than AR")
    frozen = Path(tables).parent / E2E_FROZEN.relative_to(REPORTS) if frozen is None else frozen
    default = pooled_sentence(pooled_from_speedup(e2e))
    scopes = [Scope("default run" + e2e_noise(metrics_dir).replace("; marked", ", marked"), MISSING, default, BEYOND,
                    REASON, cases=int(e2e.filter(pl.col("method") == "ar")["cases"].sum()))]
    wide = read_frozen(frozen)
    if wide is not None:
        scopes.append(Scope(wide.label(), MISSING, pooled_sentence(wide.pooled), BEYOND, REASON, cases=wide.case_count))
    ours = (f"default run: {default}{e2e_noise(metrics_dir).replace('; marked', '; default run marked', 1)}"
            + (f"; {wide.label()}: {pooled_sentence(wide.pooled)}" if wide is not None else f"; {not_yet_run()}")
            + "; see the e2e report")
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours, verdict=BEYOND, reason=REASON, method=METHOD,
                 scopes=tuple(scopes))
