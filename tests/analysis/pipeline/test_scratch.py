"""Temporary folders a later run can clean (analysis.pipeline.scratch): named by the owning process id."""

import os
import subprocess
import sys

import pytest

from analysis.pipeline.scratch import owned_temp_dir, stale_dirs


def test_a_killed_runs_temp_clone_is_removed_by_the_next_run(tmp_path):

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"copydecode-commits-{dead.stdout.strip()}-abcd"
    left.mkdir()
    (left / "objects").write_text("x")
    assert stale_dirs("copydecode-commits-", tmp_path) == [left]
    with owned_temp_dir("copydecode-commits-", tmp_path) as mine:
        assert mine.is_dir() and not left.exists()
    assert not mine.exists()


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


def test_folders_of_live_processes_files_and_other_names_are_not_stale(tmp_path):
    mine = tmp_path / f"scr-{os.getpid()}-a"
    parent = tmp_path / f"scr-{os.getppid()}-b"  # a live process that is not this one
    not_a_pid = tmp_path / "scr-abc-c"
    a_file = tmp_path / f"scr-{_dead_pid()}-d"
    other_prefix = tmp_path / f"other-{_dead_pid()}-e"
    for folder in (mine, parent, not_a_pid, other_prefix):
        folder.mkdir()
    a_file.write_text("x")
    assert stale_dirs("scr-", tmp_path) == []


def test_the_owned_folder_is_named_by_this_process_and_removed_on_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with owned_temp_dir("scr-", tmp_path) as folder:
            assert folder.name.startswith(f"scr-{os.getpid()}-") and folder.parent == tmp_path
            (folder / "partial").write_text("x")
            raise RuntimeError("boom")
    assert not folder.exists()
