"""`copydecode reports`: render the papermill report templates into reports/ (see analysis.reports).

Writes only its declared outputs (dvc.yaml). README.md's Results block and reports/timings.json are
tracked files that no stage writes: `python -m analysis.readme`, run after `dvc repro`, refreshes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.config import Config
from analysis.errors import ParamsError
from analysis.params import get
from analysis.reports import REPORTS, run_reports
from analysis.stages.common import timed


@dataclass(frozen=True)
class ReportsSettings:
    parameters: dict[str, dict[str, Any]]  # report name -> papermill parameters


def settings(cfg: Config) -> ReportsSettings:
    per_report = get(cfg.params, "reports.parameters", dict)
    unknown = sorted(set(per_report) - set(REPORTS))
    if unknown:
        raise ParamsError(f"params: reports.parameters names unknown reports {unknown}; known: {', '.join(REPORTS)}")
    for name, values in per_report.items():
        if values is not None and not isinstance(values, dict):
            raise ParamsError(f"params: reports.parameters.{name} must be a mapping, got {values!r}")
    return ReportsSettings({name: dict(per_report.get(name) or {}) for name in REPORTS})


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("reports"):
        result = run_reports(s.parameters, Path("."))
    return result
