"""analysis.pipeline.runrecord: the one record (run.json) of a frozen run."""

from datetime import datetime, timezone

from analysis.pipeline.runrecord import RUN_FIELDS, frozen_record, lacking, run_record


def test_a_run_record_holds_every_run_field_and_its_facts(monkeypatch):
    record = run_record("copydecode e2e --preset p --out d", datetime(2026, 1, 1, tzinfo=timezone.utc), 12.34,
                        {"cpu_model": "x"}, preset="p", noisy=False)
    assert not lacking(record) and set(RUN_FIELDS) <= set(record)
    assert (record["seconds"], record["preset"], record["machine"]) == (12.3, "p", {"cpu_model": "x"})
    assert record["started"] == "2026-01-01T00:00:00+00:00" and "dirty" in record


def test_a_frozen_record_keeps_the_given_commit_and_else_reads_the_tree(tmp_path, monkeypatch):
    given = {"command": "copydecode pilot --preset pilot-long", "commit": "abc1234"}
    assert frozen_record(given) == given
    monkeypatch.chdir(tmp_path)  # not a git checkout: the commit is unknown, said as None
    assert frozen_record({"command": "c"}) == {"command": "c", "commit": None, "dirty": None}
    assert lacking({"command": "c"}) == ["commit", "started", "ended", "seconds"]
