"""Every stage output that a page, `headline`, the claims or the README reads is in the stale-input records
(qa-review round 6, H2: `serving simulate` was in none, so its figures of an earlier corpus were shown as fresh).
The test walks dvc.yaml, so a new stage downstream of the cases table cannot be left out again."""

from __future__ import annotations

from pathlib import Path

import yaml
from fixtures import ROOT

from analysis.layout import CASES
from analysis.pipeline.commands import CORPUS_SETS, STAGES
from analysis.present.reports import REPORT_STAGES

JUDGES = ("headline", "reports")  # they read the records (headline refuses, reports marks its pages)
SELF_RECORDED = ("roundtrip",)    # records its own, beside a report it writes also when it fails


def dvc_stages() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def command(spec: dict) -> str:
    cmd = spec["cmd"].strip()
    assert cmd.startswith("copydecode "), cmd
    return cmd.removeprefix("copydecode ")


def outs(spec: dict) -> list[str]:
    return [next(iter(o)) if isinstance(o, dict) else str(o) for kind in ("outs", "metrics", "plots")
            for o in spec.get(kind) or []]


def _meets(dep: str, out: str) -> bool:
    """A dependency on `dep` reads `out` (the same path, or one inside the other: folder outputs and deps)."""
    a, b = Path(dep), Path(out)
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def downstream_of_cases(stages: dict[str, dict]) -> set[str]:
    """The dvc.yaml stages whose inputs derive from the cases table, through any chain of outputs."""
    reached, found = {CASES.as_posix()}, set()
    while True:
        new = {name for name, spec in stages.items() if name not in found
               and any(_meets(d, r) for d in spec.get("deps") or [] for r in reached)}
        if not new:
            return found
        found |= new
        reached |= {o for name in new for o in outs(stages[name])}


def writers_read_by(stage: str, stages: dict[str, dict]) -> set[str]:
    deps = stages[stage].get("deps") or []
    return {command(spec) for name, spec in stages.items() if name != stage
            and any(_meets(d, o) for d in deps for o in outs(spec))}


def test_every_stage_downstream_of_the_cases_table_records_its_corpus():
    stages = dvc_stages()
    downstream = {command(stages[name]) for name in downstream_of_cases(stages)} - set(JUDGES)
    assert {"serving simulate", "serving replay", "rivals", "e2e"} <= downstream  # the walk reaches them
    missing = sorted(downstream - set(CORPUS_SETS) - set(SELF_RECORDED))
    assert missing == [], f"stages downstream of {CASES} without a corpus record: {missing} (add them to CORPUS_SETS)"
    assert set(CORPUS_SETS) <= set(STAGES)


def test_every_recorded_stage_the_reports_read_marks_the_summary_and_a_page():
    """The summary page shows the claims, which read every stage's outputs; each recorded stage the reports
    read also marks at least one page of its own."""
    stages = dvc_stages()
    recorded = set(CORPUS_SETS) | set(SELF_RECORDED)
    read = writers_read_by("reports", stages) & recorded - {"corpora"}
    assert {"serving simulate", "serving replay", "rivals"} <= read
    assert read - set(REPORT_STAGES["summary"]) == set()
    pages = {s for name, listed in REPORT_STAGES.items() if name != "summary" for s in listed}
    assert read - pages == set(), read - pages
    assert set(REPORT_STAGES["summary"]) <= recorded  # no page names a stage that never records


def test_headline_refuses_every_recorded_stage_it_reads():
    """headline refuses on any stale record (analysis.stages.headline); what it reads is recorded."""
    stages = dvc_stages()
    name = next(n for n, spec in stages.items() if command(spec) == "headline")
    downstream = {command(stages[n]) for n in downstream_of_cases(stages)}
    read = writers_read_by(name, stages) & downstream
    assert "serving simulate" in read
    assert read - set(CORPUS_SETS) - set(SELF_RECORDED) == set()
