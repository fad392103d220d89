"""One progress bar per parallel stage, drawn by the parent and advanced as chunk results come back
(analysis.parallel.workers.map_cases); joblib workers draw none (their bars are never refreshed on the parent's
terminal and sat at 0%)."""

from __future__ import annotations

from analysis.parallel.workers import ParallelSettings, map_cases
from analysis.parallel.progress import progress, progress_bar, timed


def doubled(chunk, factor):
    """A chunk function as the stages write them: its own bar over the chunk (seen only when serial)."""
    return [factor * x for x in progress(chunk, "worker bar", len(chunk))]


def test_parallel_run_draws_one_parent_bar_that_reaches_the_total(capsys):
    out = map_cases(doubled, list(range(40)), ParallelSettings(2, "threading", 4, ""), 3, desc="stage bar")
    assert out == [3 * x for x in range(40)]
    err = capsys.readouterr().err
    assert "stage bar" in err and "40/40" in err
    assert "worker bar" not in err


def test_serial_run_keeps_the_chunk_functions_own_bar(capsys):
    out = map_cases(doubled, list(range(5)), ParallelSettings(1, "loky", 4, ""), 2, desc="stage bar")
    assert out == [2 * x for x in range(5)]
    err = capsys.readouterr().err
    assert "worker bar" in err and "stage bar" not in err


def test_process_workers_return_results_in_order_under_the_parent_bar(capsys):
    out = map_cases(doubled, list(range(12)), ParallelSettings(2, "loky", 2, ""), 1, desc="loky stage")
    assert out == list(range(12))
    assert "12/12" in capsys.readouterr().err


def test_the_bar_is_named_after_the_function_without_desc(capsys):
    map_cases(doubled, list(range(6)), ParallelSettings(2, "threading", 1, ""), 1)
    assert "doubled" in capsys.readouterr().err


def test_kernel_noise_is_dropped_from_stderr_and_everything_else_kept(capfd):
    """The reports stage's kernels (child processes writing to the inherited stderr) log a plain-TCP
    warning and an interrupt on every successful run; those lines go, any other line stays."""
    import subprocess
    import sys

    import pytest

    from analysis.parallel.progress import kernel_noise_filtered

    child = ("import sys; w = sys.stderr.write; "
             "w('[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication\\n'); "
             "w('a real error line\\n'); w('[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.\\n')")
    with kernel_noise_filtered():
        subprocess.run([sys.executable, "-c", child], check=True)
        print("parent line", file=sys.stderr)
    err = capfd.readouterr().err
    assert "a real error line" in err and "parent line" in err
    assert "without encryption" not in err and "KeyboardInterrupt" not in err
    with pytest.raises(RuntimeError), kernel_noise_filtered():
        print("said before failing", file=sys.stderr)
        raise RuntimeError("boom")
    assert "said before failing" in capfd.readouterr().err


def test_timed_writes_the_run_time_under_data_timings(tmp_path, monkeypatch):
    import json

    from analysis.layout import TIMINGS

    monkeypatch.chdir(tmp_path)
    with timed("spans") as box:
        assert box == {}
    written = json.loads((tmp_path / TIMINGS / "spans.json").read_text())
    assert written == box and set(box) == {"seconds"} and box["seconds"] >= 0


def test_a_hand_advanced_bar_counts_from_its_initial_units_and_is_off_in_a_worker():
    from analysis.parallel.progress import worker_bars_off

    bar = progress_bar(total=5, initial=2, desc="pairs", unit="pair")
    bar.update(1)
    assert (bar.n, bar.total) == (3, 5)
    bar.close()
    assert progress_bar(total=1, desc="x", unit="case", disable=True).disable
    with worker_bars_off():
        assert progress_bar(total=1, desc="x", unit="case").disable
