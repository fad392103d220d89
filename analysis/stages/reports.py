"""`copydecode reports`: render the papermill report templates into reports/ (see analysis.reports)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.config import Config
from analysis.errors import ParamsError
from analysis.io import write_json
from analysis.layout import TIMINGS, TIMINGS_REPORT
from analysis.params import get
from analysis.readme import write_readme_results
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


def gather_timings() -> None:
    """Copy each stage's untracked run time (data/timings) into one committed report file, which the
    README's generated block reads; it is no DVC output, so a rerun never makes `dvc status` dirty."""
    import json

    times = {p.stem: json.loads(p.read_text()) for p in sorted(TIMINGS.glob("*.json"))}
    if times:
        write_json(times, TIMINGS_REPORT)


def run(cfg: Config, args=None) -> dict:
    s = settings(cfg)
    with timed("reports"):
        gather_timings()
        result = run_reports(s.parameters, Path("."))
        if Path("README.md").is_file():  # absent under a one-off output root (--out), whose results stay there
            write_readme_results(Path("."))  # the README's Results block, from the metrics and tables just rendered
    return result
