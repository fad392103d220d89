"""`copydecode reports`: render the papermill report templates into reports/ (see analysis.reports)."""

from __future__ import annotations

from pathlib import Path

from analysis.config import Config, reports_settings
from analysis.reports import run_reports
from analysis.stages.common import timed


def run(cfg: Config, args=None) -> dict:
    settings = reports_settings(cfg)
    with timed("reports"):
        return run_reports(settings.parameters, Path("."))
