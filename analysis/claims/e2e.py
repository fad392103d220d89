"""Beyond the paper: measured end to end, from e2e_pooled.csv (analysis.results.e2e). Per run (the default
and the frozen e2e-wide run beside it when committed, else "not yet run"), per model, the HEvalFix pool
beside the all-case pool: Copy-as-Decode with directive tokens decoded first (what a deployment pays), the
rivals (prompt lookup at its standard policy and best measured k, suffix decoding), the ideal programs as
upper bounds; each a ratio of summed times with its case-bootstrap CI and case count, never a best case.
No verdict against the paper, which gives no measured figure."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from analysis.claims.registry import register
from analysis.claims.verdict import BEYOND, Claim, Scope, metric_input
from analysis.errors import MissingOutputError
from analysis.layout import E2E_FROZEN, REPORTS
from analysis.pooling import POOLED
from analysis.results.e2e import (
    HEVALFIX_POOL,
    leading,
    noise_note,
    pool_sentence,
    pooled_headline,
    read_frozen,
    respelled,
    stale_columns,
)
from analysis.results.numbers import MISSING
from analysis.rivals.families.ar import AR

REASON = ("the paper gives no measured end-to-end figure; each figure is pooled: the ratio of summed times over the "
          "cases named, with a case-bootstrap CI, never a best case; Copy-as-Decode leads with its directive tokens "
          "decoded, the ideal variant is its upper bound")
METHOD = ("decode phase of teacher-forced oracle programs and gold-acceptance drafters on a real KV cache, from a "
          "cached prompt (its prefill reported beside), seeded sample stratified by output length [e2e]")


def e2e_noise(metrics_dir: Path) -> str:
    """'; marked NOISY: reasons' when the e2e stage's own environment record says so, else ''."""
    path = Path(metrics_dir) / "e2e.json"
    return noise_note(json.loads(path.read_text())) if path.is_file() else ""


def run_scopes(run: str, pooled: pl.DataFrame) -> list[Scope]:
    """One scope per model and pool (HEvalFix where it holds other cases than every case, then every case):
    its sentence, and as its value the leading figure (Copy-as-Decode line with directives decoded)."""
    scopes = []
    for model in sorted(pooled["model"].unique().to_list()):
        part = pooled.filter(pl.col("model") == model)
        cases = dict(part.filter(pl.col("method") == AR).select("pool", "cases").iter_rows())
        pools = ([HEVALFIX_POOL] if cases.get(HEVALFIX_POOL) not in (None, cases.get(POOLED)) else []) + [POOLED]
        for pool in pools:
            lead = leading(pooled, model, pool)
            if not lead or pool not in cases:
                continue
            row = lead[0][1]
            scopes.append(Scope(f"{run}, {model}, {pool}", MISSING, pool_sentence(part.filter(pl.col("pool") == pool)),
                                BEYOND, REASON, value=row["speedup_pooled"], ci=(row["ci_low"], row["ci_high"]),
                                cases=int(cases[pool])))
    return scopes


@register("end_to_end")
def e2e_claim(spec: dict, tables: Path, metrics_dir: Path, frozen: Path | None = None) -> Claim:
    e2e = respelled(metric_input(spec, 0, tables, metrics_dir))
    if e2e.filter(pl.col("method") != AR).height == 0:
        raise MissingOutputError("e2e_pooled.csv has no method other than AR")
    frozen = Path(tables).parent / E2E_FROZEN.relative_to(REPORTS) if frozen is None else frozen
    noise = e2e_noise(metrics_dir)
    # the frozen e2e-wide run (the wider sample, at least 6 HEvalFix cases) leads; the default run follows
    wide = read_frozen(frozen)
    scopes = run_scopes(wide.label(), wide.pooled) if wide is not None and not wide.stale else []
    if not stale_columns(e2e):
        scopes += run_scopes("default run" + noise.replace("; marked", ", marked"), e2e)
    ours = pooled_headline(e2e, frozen, noise.replace("; marked", "; default run marked", 1))
    return Claim(claim=spec["title"], paper=spec["text"], ours=ours + "; see the e2e report", verdict=BEYOND,
                 reason=REASON, method=METHOD, scopes=tuple(scopes))
