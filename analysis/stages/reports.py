"""`copydecode reports`: render the papermill report templates into reports/ (see analysis.present.reports).

Writes only its declared outputs (dvc.yaml). README.md's Results block and reports/timings.json are
tracked files that no stage writes: `copydecode readme`, run after `dvc repro`, refreshes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.pipeline.params import DEFAULT_PARAMS, get
from analysis.results.outputs import require_outputs
from analysis.present.reports import run_reports
from analysis.present.templates import REPORTS, check_parameters
from analysis.parallel.progress import kernel_noise_filtered, timed
from analysis.layout import CASES


@dataclass(frozen=True)
class ReportsSettings:
    parameters: dict[str, dict[str, Any]]  # report name -> papermill parameters
    params_path: Path                      # the params file, hashed into each report's provenance


# `copydecode reports`: its help line and what it reads and writes (the CLI's --help)
HELP = "render the papermill reports into reports/ (html, notebooks, index)"
READS_WRITES = ("reads every stage's tables and metrics; writes reports/html/, reports/notebooks/, "
                "reports/index.html, reports/metrics/headline.json, reports/claims.json")


def settings(params: dict, params_path: str | Path = DEFAULT_PARAMS) -> ReportsSettings:
    per_report = get(params, "reports.parameters", dict)
    unknown = sorted(set(per_report) - set(REPORTS))
    if unknown:
        raise ParamsError(f"params: reports.parameters names unknown reports {unknown}; known: {', '.join(REPORTS)}")
    for name, values in per_report.items():
        if values is not None and not isinstance(values, dict):
            raise ParamsError(f"params: reports.parameters.{name} must be a mapping, got {type(values).__name__}")
    # names only from each template's own parameters cell (papermill writes a name as code): refused here,
    # before any notebook runs
    return ReportsSettings({name: check_parameters(name, per_report.get(name) or {}) for name in REPORTS},
                           Path(params_path))


def explore_case(parameters: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The explore page's case: the configured one when this run holds it, else the run's first case
    (a run of a user's corpus lacks the default HEvalFix case); the substitution is printed."""
    import sys

    import polars as pl

    want = dict(parameters.get("explore") or {})
    if not CASES.is_file() or "case_id" not in want:
        return parameters
    cases = pl.read_parquet(CASES, columns=["case_id", "framing"])
    if cases.height == 0 or cases.filter((pl.col("case_id") == want["case_id"])
                                         & (pl.col("framing") == want.get("framing"))).height:
        return parameters
    first = cases.sort("case_id", "framing").row(0, named=True)
    print(f"copydecode reports: the explore case {want['case_id']!r} ({want.get('framing')}) is not in this run; "
          f"showing {first['case_id']!r} ({first['framing']}) (set reports.parameters.explore)", file=sys.stderr)
    return {**parameters, "explore": {**want, "case_id": first["case_id"], "framing": first["framing"]}}


def run(s: ReportsSettings) -> dict:
    require_outputs("reports")
    with timed("reports"), kernel_noise_filtered() as live:  # the page bar draws live, past the kernels' filter
        result = run_reports(explore_case(s.parameters), Path("."), s.params_path, progress_to=live)
    return result
