"""The pilot stage's metrics read back (reports/metrics/pilot.json): its exact-match figures per split and
phase, and the frozen preset runs it carries. Claim 7 reads these; the pilot's own tables and sentences
are analysis.pilot.report's.

Keys (as the pilot stage writes them): `before` (held-out, before fine-tuning: {em}), `after_program`
({seed: {em}}), `humaneval_before` ({em}), `humaneval` ({seed: {em}}); `frozen` ({preset: {run, metrics}})."""

from __future__ import annotations

from dataclasses import dataclass

# (split, phase) -> the pilot.json key holding it
EM_KEYS = {("heldout", "before"): "before", ("heldout", "after"): "after_program",
           ("humaneval", "before"): "humaneval_before", ("humaneval", "after"): "humaneval"}


def em_values(node) -> list[float]:
    """Every EM in a pilot metrics node: {'em': x}, or {seed: {'em': x}, ...}; [] when absent."""
    if not isinstance(node, dict):
        return []
    if isinstance(node.get("em"), (int, float)):
        return [float(node["em"])]
    return [float(v["em"]) for v in node.values() if isinstance(v, dict) and isinstance(v.get("em"), (int, float))]


@dataclass(frozen=True)
class PilotEM:
    """The pilot's exact-match figures as recorded (lists over seeds; empty when not recorded)."""

    heldout_before: list[float]
    heldout_after: list[float]
    humaneval_before: list[float]
    humaneval_after: list[float]


def pilot_em(m: dict) -> PilotEM:
    return PilotEM(*(em_values(m.get(EM_KEYS[key])) for key in (("heldout", "before"), ("heldout", "after"),
                                                              ("humaneval", "before"), ("humaneval", "after"))))


def pilot_runs(m: dict) -> list[tuple[str, dict]]:
    """The default pilot run and every frozen preset run kept in its metrics (label, metrics)."""
    runs = [("default", m)]
    for name, frozen in sorted((m.get("frozen") or {}).items()):
        if isinstance(frozen, dict) and isinstance(frozen.get("metrics"), dict):
            commit = (frozen.get("run") or {}).get("commit", "?")
            runs.append((f"{name}, frozen run of {commit}", frozen["metrics"]))
    return runs
