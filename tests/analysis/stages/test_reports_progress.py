"""P7 (issue 41): the reports stage ran 78 s with no progress line. It draws one bar, one step per page with the
page being rendered beside it, then `index`; the bar reaches the terminal past the filter that drops the
notebook kernels' noise from stderr."""

from __future__ import annotations

import sys
from pathlib import Path

from analysis.present import reports
from analysis.present.templates import REPORTS
from analysis.stages import reports as stage


class Bar:
    """progress_bar's stand-in: what the stage asks of its bar."""

    made: list["Bar"] = []

    def __init__(self, total, desc, unit, initial=0, disable=False, leave=False, file=None):
        self.total, self.desc, self.unit, self.leave, self.file = total, desc, unit, leave, file
        self.steps, self.postfixes, self.closed = 0, [], False
        Bar.made.append(self)

    def set_postfix_str(self, text):
        self.postfixes.append((self.steps, text))

    def update(self, n=1):
        self.steps += n

    def close(self):
        self.closed = True


def test_run_reports_advances_one_step_per_page_naming_each(tmp_path, monkeypatch):
    rendered = []
    Bar.made.clear()
    monkeypatch.setattr(reports, "progress_bar", Bar)
    monkeypatch.setattr(reports, "render_notebook", lambda name, *a, **k: rendered.append(name) or name)
    for name in ("write_claims", "write_headline", "write_index"):
        monkeypatch.setattr(reports, name, lambda *a, **k: [])
    stream = object()
    result = reports.run_reports({}, tmp_path, progress_to=stream)
    (bar,) = Bar.made
    assert (bar.total, bar.unit, bar.desc, bar.leave, bar.file) == (len(REPORTS), "page", "reports", True, stream)
    assert rendered == list(REPORTS) and bar.steps == len(REPORTS) and bar.closed
    # each page named while it renders (step k: the k-th page), then the index
    assert bar.postfixes == [*((k, name) for k, name in enumerate(REPORTS)), (len(REPORTS), "index")]
    assert set(result["reports"]) == set(REPORTS)


def test_the_stage_draws_its_bar_on_the_terminal_past_the_kernel_noise_filter(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stage, "require_outputs", lambda name: None)

    def run_reports(parameters, root, params, progress_to=None):
        assert progress_to is not None and progress_to is not sys.stderr
        progress_to.write("reports:  25%|##5       | 3/12 [00:10<00:30, page/s, coverage]\n")
        sys.stderr.write("[IPKernelApp] WARNING | Kernel is running over TCP without encryption.\n")
        return {"reports": {}, "seconds": 0.0}

    monkeypatch.setattr(stage, "run_reports", run_reports)
    stage.run(stage.ReportsSettings({}, Path("params.yaml")))
    err = capfd.readouterr().err
    assert "3/12" in err and "page/s" in err and "without encryption" not in err
