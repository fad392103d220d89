"""analysis.pipeline.io: atomic writes, output sets replaced all or nothing, the run lock, the sweep of killed
runs' temporaries, and the markdown and JSON writers."""

import json
import math

import polars as pl
import pytest

from analysis.errors import CopyDecodeError
from analysis.pipeline.io import (
    PENDING,
    RunLockedError,
    atomic_path,
    finish_pending,
    markdown_table,
    output_set,
    read_parquet,
    remove_output,
    run_lock,
    sweep_temporaries,
    write_json,
    write_parquet,
    write_text,
)


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "sub" / "out.txt"
    write_text("old", out)
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        assert tmp.parent == out.parent and tmp.suffix == ".txt" and tmp != out
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert out.read_text() == "old" and sorted(p.name for p in out.parent.iterdir()) == ["out.txt"]


def test_an_output_set_is_replaced_all_or_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text("a1", "a.txt")
    write_text("b1", "b.txt")
    write_text("gone", "stale.txt")
    with pytest.raises(RuntimeError), output_set("stage", outputs=("a.txt", "b.txt", "stale.txt")):
        write_text("a2", "a.txt")
        remove_output("stale.txt")
        raise RuntimeError("the stage failed half way")
    assert [(tmp_path / n).read_text() for n in ("a.txt", "b.txt", "stale.txt")] == ["a1", "b1", "gone"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "stale.txt"]  # no temporaries left
    with output_set("stage", outputs=("a.txt", "b.txt", "stale.txt")) as written:
        write_text("a2", "a.txt")
        write_text("b2", "b.txt")
        remove_output("stale.txt")
        assert (tmp_path / "a.txt").read_text() == "a1" and written == []  # nothing replaced before the end
    assert [(tmp_path / n).read_text() for n in ("a.txt", "b.txt")] == ["a2", "b2"]
    assert not (tmp_path / "stale.txt").exists() and sorted(str(p) for p in written) == ["a.txt", "b.txt"]
    assert not list(PENDING.glob("*.json"))


def test_finish_pending_completes_a_set_killed_after_its_journal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text("old", "a.txt")
    write_text("new", ".a.killedr1.txt")
    write_text("stale", "stale.txt")
    PENDING.mkdir(parents=True, exist_ok=True)
    (PENDING / "spans.json").write_text(json.dumps([[".a.killedr1.txt", "a.txt"], [None, "stale.txt"]]))
    owned = {"spans": ("a.txt", "stale.txt")}.get
    assert finish_pending(owned) == ["spans"]
    assert (tmp_path / "a.txt").read_text() == "new" and not (tmp_path / "stale.txt").exists()
    assert finish_pending(owned) == []  # the journal is gone once applied


def test_the_sweep_removes_only_atomic_temporaries(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    temporary = folder / ".coverage.abc_1234.csv"  # "." + stem + "." + mkstemp's 8 characters + suffix
    kept = [folder / "coverage.csv", folder / ".gitignore", folder / ".coverage.csv"]
    for path in [temporary, *kept]:
        path.write_text("x")
    assert sweep_temporaries([folder, tmp_path / "absent"]) == [temporary]
    assert not temporary.exists() and all(p.exists() for p in kept)


def test_a_second_run_into_the_same_root_is_refused_naming_the_holder(tmp_path):
    lock = tmp_path / "data" / ".lock"
    with run_lock("spans", lock):
        with pytest.raises(RunLockedError, match=r"another copydecode run \(pid \d+, `spans`\) is writing"):
            with run_lock("bounds", lock):
                pass
    assert not lock.exists() and not lock.parent.exists()  # released: the lock and the folder made for it go
    with run_lock("bounds", lock):
        assert lock.exists()


def test_markdown_tables_escape_cells_and_round_floats():
    frame = pl.DataFrame({"name": ["a|b", "two\nlines", None], "value": [1 / 3, math.nan, None], "n": [1, 2, 3]})
    assert markdown_table(frame, digits=2).splitlines() == [
        "| name | value | n |", "|---|---|---|",
        "| a\\|b | 0.33 | 1 |", "| two lines | nan | 2 |", "|  |  | 3 |"]


def test_json_metrics_write_non_finite_numbers_as_null_with_sorted_keys(tmp_path):
    write_json({"b": [1.0, math.inf], "a": {"x": math.nan}}, tmp_path / "m.json")
    text = (tmp_path / "m.json").read_text()
    assert json.loads(text) == {"a": {"x": None}, "b": [1.0, None]}
    assert text.index('"a"') < text.index('"b"') and text.endswith("}\n")


def test_parquet_round_trip_and_named_read_errors(tmp_path):
    frame = pl.DataFrame({"a": [1, 2]})
    write_parquet(frame, tmp_path / "t.parquet", metadata={"k": "v"})
    assert read_parquet(tmp_path / "t.parquet", "copydecode spans").equals(frame)
    assert pl.read_parquet_metadata(tmp_path / "t.parquet")["k"] == "v"
    (tmp_path / "bad.parquet").write_bytes(b"garbage")
    with pytest.raises(CopyDecodeError, match=r"bad.parquet is not a readable parquet file .*rerun `copydecode spans`"):
        read_parquet(tmp_path / "bad.parquet", "copydecode spans")
    with pytest.raises(CopyDecodeError, match=r"none.parquet not found; run `copydecode spans`"):
        read_parquet(tmp_path / "none.parquet", "copydecode spans")


def test_a_table_without_columns_reads_as_empty_in_markdown(tmp_path):
    """N19: bounds_paper_pool.md on a run without the paper's corpora was `|  |` and `||`."""
    import polars as pl

    from analysis.pipeline.io import EMPTY_TABLE_MD, write_table

    write_table(pl.DataFrame(), tmp_path / "t")
    assert (tmp_path / "t.md").read_text() == EMPTY_TABLE_MD
    write_table(pl.DataFrame({"a": [1]}), tmp_path / "u")
    assert (tmp_path / "u.md").read_text() == "| a |\n|---|\n| 1 |\n"


# ---------------------------------------------------------------- issue 39: journals, the lock, sets, V8


def test_a_set_writing_outside_what_its_stage_owns_is_refused_before_any_rename(tmp_path, monkeypatch):
    from analysis.pipeline.io import JournalError

    monkeypatch.chdir(tmp_path)
    write_text("old", "mine.txt")
    with pytest.raises(JournalError, match=r"entry 2 'theirs.txt' is not one of the stage's outputs \(mine.txt\)"):
        with output_set("stage", outputs=("mine.txt",)):
            write_text("new", "mine.txt")
            write_text("x", "theirs.txt")
    assert (tmp_path / "mine.txt").read_text() == "old" and not (tmp_path / "theirs.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]  # no temporaries, no journal


def test_a_stage_owns_its_dvc_outs_its_timing_and_nothing_else():
    from analysis.pipeline.io import stage_outputs

    assert "data/programs/programs.parquet" in stage_outputs("programs")
    assert "data/timings/programs.json" in stage_outputs("programs")
    assert "reports/metrics/corpora.json" not in stage_outputs("programs")
    assert "reports/kernels/latency_model.json" in stage_outputs("kernels fit")
    assert stage_outputs("no-such-stage") == ()  # a stage dvc.yaml does not declare owns nothing


def test_a_dvc_yaml_with_a_python_tag_runs_nothing_and_declares_nothing(tmp_path):
    """dvc.yaml is read with a safe loader (libyaml's when present): a `!!python/object/apply` tag is refused,
    not called, and the file then declares no stage."""
    from analysis.pipeline.io import stage_outputs

    marker = tmp_path / "ran"
    dvc_yaml = tmp_path / "dvc.yaml"
    dvc_yaml.write_text(f"stages:\n  programs:\n    outs: [!!python/object/apply:os.system ['touch {marker}']]\n")
    assert stage_outputs("programs", dvc_yaml) == ()
    assert not marker.exists()


@pytest.mark.parametrize("entries, problem", [
    ([["data/programs/.programs.abcd1234.parquet", "/etc/passwd"]], "is not one of the stage's outputs"),
    ([["data/programs/.programs.abcd1234.parquet", "data/programs/../../x"]], "is not one of the stage's outputs"),
    ([["data/x", "data/programs/programs.parquet"]], "is not the temporary file of"),
    ([["data/.programs.abcd1234.parquet", "data/programs/programs.parquet"]], "is not the temporary file of"),
    ([["data/programs/.programs.abcd1234.json", "data/programs/programs.parquet"]], "is not the temporary file of"),
    ([[None, "data/spans/spans.parquet"]], "is not one of the stage's outputs"),
    ([["a", "b", "c"]], "is not a pair of paths"),
    ([[1, 2]], "is not a pair of paths"),
    ({"a": "b"}, "not a list of renames"),
])
def test_a_journal_is_replayed_only_when_every_entry_is_the_stages_own(tmp_path, monkeypatch, entries, problem):
    from analysis.pipeline.io import JournalError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data/programs").mkdir(parents=True)
    (tmp_path / "data/programs/.programs.abcd1234.parquet").write_text("new")
    (tmp_path / "data/x").write_text("payload")
    PENDING.mkdir(parents=True)
    (PENDING / "programs.json").write_text(json.dumps(entries))
    with pytest.raises(JournalError, match=problem):
        finish_pending()
    assert (PENDING / "programs.json").is_file() and (tmp_path / "data/x").read_text() == "payload"
    assert not (tmp_path / "data/programs/programs.parquet").exists()


def test_a_journal_through_a_symlinked_folder_is_refused(tmp_path, monkeypatch):
    from analysis.pipeline.io import JournalError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data/programs").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere/.programs.abcd1234.parquet").write_text("new")
    PENDING.mkdir(parents=True)
    (PENDING / "programs.json").write_text(json.dumps([["data/programs/.programs.abcd1234.parquet",
                                                        "data/programs/programs.parquet"]]))
    with pytest.raises(JournalError, match="is a symbolic link"):
        finish_pending()
    assert not (tmp_path / "elsewhere/programs.parquet").exists()


def test_the_lock_is_never_opened_through_a_link(tmp_path):
    """H3: `_acquire` followed a planted data/.lock link, truncated its target and wrote the pid into it."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "data").mkdir()
    (tmp_path / "data/.lock").symlink_to(victim)
    with pytest.raises(RunLockedError, match="is a symbolic link"):
        with run_lock("spans", tmp_path / "data/.lock"):
            pass
    assert victim.read_text() == "precious"


def test_charts_under_an_address_space_limit_v8_cannot_start_in_are_named(monkeypatch):
    """L4: under `ulimit -v` of 9 or 16 GB vl-convert's V8 aborted the stage with SIGTRAP."""
    import resource

    from analysis.pipeline.io import CHART_ADDRESS_SPACE, AddressSpaceError, check_address_space

    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda which: (16 << 30, resource.RLIM_INFINITY)
                        if which == resource.RLIMIT_AS else real(which))
    with pytest.raises(AddressSpaceError, match="an address-space limit of 16 GiB is set"):
        check_address_space()
    monkeypatch.setattr(resource, "getrlimit", lambda which: (CHART_ADDRESS_SPACE, resource.RLIM_INFINITY))
    check_address_space()
