"""Claim 5: every oracle program round-trips (resolve(program) == target, byte for byte)."""

from __future__ import annotations

from pathlib import Path

from analysis.claims.registry import register
from analysis.claims.verdict import DIFFERS, REPRODUCED, STALE, Claim, Scope, judge, metric_input
from analysis.results.numbers import fmt_int
from analysis.stats import clopper_pearson
from analysis.pipeline.digest import stale_stages


def stale_round_trip(metrics_dir: Path) -> str | None:
    """Why the round-trip report is stale (it checked a cases table other than the one on disk now), from
    the corpus record of the output root holding `metrics_dir` (reports/metrics); None when it is not."""
    import contextlib

    root = Path(metrics_dir).parent.parent
    if not root.is_dir():
        return None
    with contextlib.chdir(root):
        return stale_stages().get("roundtrip")


def failure_interval(failed: int, programs: int) -> tuple[float, float]:
    """The failure count's exact interval: its share's Clopper-Pearson bounds times the programs."""
    low, high = clopper_pearson(failed, programs)
    return low * programs, high * programs


@register("losslessness")
def lossless_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    rt = metric_input(spec, 0, tables, metrics_dir)
    ok = judge(spec, rt["failed"], spec["max_failures"])
    ours = f"{fmt_int(rt['passed'])}/{fmt_int(rt['programs'])} programs (line and token level, every framing)"
    reason = "no program failed" if ok else f"{rt['failed']} programs did not round-trip"
    verdict = REPRODUCED if ok else DIFFERS
    stale = stale_round_trip(metrics_dir)
    if stale is not None:  # the report checked another corpus's programs: shown, not judged
        verdict, reason = STALE, stale
    scope = Scope("every program", spec["text"].split(" ")[0], ours, verdict, reason,
                  value=float(rt["failed"]), paper_value=float(spec["max_failures"]), cases=int(rt["programs"]),
                  ci=failure_interval(int(rt["failed"]), int(rt["programs"])),
                  ci_kind="exact Clopper-Pearson 95% interval of the failure count (share x programs)")
    return Claim(claim=f"5. {spec['title']}", paper=spec["text"], ours=ours, verdict=scope.verdict, reason=reason,
                 method="resolve(oracle) == target, byte for byte [roundtrip]", scopes=(scope,))
