"""analysis.stages.common: a stage's run time goes to an untracked timings file; `headline` and
`reports` refuse a root that holds no stage output. (Progress bars and the kernel-noise filter:
tests/analysis/test_progress.py.)"""

import json

import pytest

from analysis.errors import CorpusError
from analysis.layout import CASES, TABLES, TIMINGS
from analysis.stages.common import require_outputs, timed


def test_timed_writes_the_run_time_under_data_timings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with timed("spans") as box:
        assert box == {}
    written = json.loads((tmp_path / TIMINGS / "spans.json").read_text())
    assert written == box and set(box) == {"seconds"} and box["seconds"] >= 0


def test_require_outputs_refuses_an_empty_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError, match="nothing to report: .* before `copydecode headline`"):
        require_outputs("headline")
    TABLES.mkdir(parents=True)
    (TABLES / "coverage.csv").write_text("a\n1\n")
    require_outputs("headline")
    (TABLES / "coverage.csv").unlink()
    CASES.parent.mkdir(parents=True)
    CASES.write_bytes(b"")
    require_outputs("reports")
