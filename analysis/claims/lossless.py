"""Claim 5: every oracle program round-trips (resolve(program) == target, byte for byte)."""

from __future__ import annotations

from pathlib import Path

from analysis.claims.registry import register
from analysis.claims.verdict import DIFFERS, REPRODUCED, Claim, Scope, judge, metric_input
from analysis.results.numbers import fmt_int


@register("losslessness")
def lossless_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    rt = metric_input(spec, 0, tables, metrics_dir)
    ok = judge(spec, rt["failed"], spec["max_failures"])
    ours = f"{fmt_int(rt['passed'])}/{fmt_int(rt['programs'])} programs (line and token level, every framing)"
    reason = "no program failed" if ok else f"{rt['failed']} programs did not round-trip"
    scope = Scope("every program", spec["text"].split(" ")[0], ours, REPRODUCED if ok else DIFFERS, reason,
                  value=float(rt["failed"]), paper_value=float(spec["max_failures"]), cases=int(rt["programs"]))
    return Claim(claim=f"5. {spec['title']}", paper=spec["text"], ours=ours, verdict=scope.verdict, reason=reason,
                 method="resolve(oracle) == target, byte for byte [roundtrip]", scopes=(scope,))
