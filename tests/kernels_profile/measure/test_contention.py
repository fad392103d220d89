"""kernels_profile.measure.contention: reference drift, other processes' CPU use read from /proc/stat, the contention
rule, and the run environment recorder that judges a run quiet or NOISY. Timings and loads are injected."""

import json
import math
import re

import pytest

from analysis.errors import ParamsError
from kernels_profile.measure.contention import (
    Contention,
    CpuTimes,
    Drift,
    EnvironmentRecorder,
    LoadSample,
    ProcStatError,
    other_load,
    parse_proc_stat,
)


# ---------------------------------------------------------------- drift

@pytest.mark.parametrize(
    "samples, threshold, drift, noisy",
    [
        ([1.0, 1.1], 0.15, 0.1, False),
        ([1.0, 1.2], 0.15, 0.2, True),
        ([1.2, 1.0], 0.15, 0.2, True),          # a speed-up is as much a change as a slow-down
        ([1.0, 1.5, 1.0], 0.15, 0.5, True),     # the middle counts though the end equals the start
        ([1.0, 1.5, 1.0], 0.6, 0.5, False),
    ],
)
def test_drift_marks_noisy_above_the_threshold(samples, threshold, drift, noisy):
    record = Drift.of(samples, threshold)
    assert math.isclose(record.drift, drift)
    assert record.noisy is noisy
    assert (record.reference_start_s, record.reference_end_s) == (samples[0], samples[-1])


@pytest.mark.parametrize("samples, threshold, fragment", [
    ([1.0], 0.15, "start and the end"), ([1.0, 0.0], 0.15, "> 0 s"), ([1.0, 1.0], -0.1, "noisy_drift"),
])
def test_drift_rejects_bad_input(samples, threshold, fragment):
    with pytest.raises(ParamsError, match=fragment):
        Drift.of(samples, threshold)


def test_recorder_with_injected_timings():
    times = iter([1.0, 1.05, 1.3])
    loads = iter([(0.5, 0.4, 0.3), (2.5, 1.0, 0.5)])
    recorder = EnvironmentRecorder(threshold=0.2, contention_slack=0.5, reference=lambda: next(times), load=lambda: next(loads),
                                   other=lambda: 0.1, threads=lambda: 1, usable_cores=lambda: 2)
    assert recorder.start() == 1.0
    assert recorder.sample() == 1.05
    env = recorder.end()
    assert env.reference_samples_s == (1.0, 1.05, 1.3)
    assert env.noisy and math.isclose(env.drift.drift, 0.3)
    assert env.load_before[0] == 0.5 and env.load_after[0] == 2.5
    blob = json.loads(json.dumps(env.to_json()))
    assert blob["noisy"] is True and blob["run_id"] == env.run_id
    assert blob["noisy_reasons"] == ["reference drift 30% > 20%"] and blob["contended"] is False
    assert blob["contention"]["samples"] == [0.1, 0.1, 0.1] and blob["contention"]["threads"] == 1
    columns = env.columns()
    assert columns["load1_after"] == 2.5 and columns["noisy"] is True
    assert all(not isinstance(v, (dict, list, tuple)) for v in columns.values())


def test_recorder_end_before_start_is_an_error():
    with pytest.raises(ParamsError, match="start"):
        EnvironmentRecorder(threshold=0.15, contention_slack=0.5, reference=lambda: 1.0).end()


# ---------------------------------------------------------------- other processes' CPU use

STAT_BEFORE = """cpu  300 0 100 1600 0 0 0 0 0 0
cpu0 100 0 50 800 0 0 0 0 0 0
cpu1 200 0 50 800 0 0 0 0 0 0
intr 1 2 3
ctxt 99
"""
# 100 jiffies later on each core: cpu0 busy 100 of them (user 90, system 5, irq 3, softirq 2), cpu1
# busy 20 (user 10 + guest time already inside user, steal 10); iowait counts as idle.
STAT_AFTER = """cpu  420 0 105 1670 10 3 2 10 5 0
cpu0 190 0 55 800 0 3 2 0 0 0
cpu1 210 0 50 870 10 0 0 10 5 0
intr 1 2 3
ctxt 120
"""


def test_proc_stat_busy_and_total_jiffies_per_core_set():
    assert parse_proc_stat(STAT_BEFORE) == CpuTimes(busy=400, total=2000, cores=2)
    assert parse_proc_stat(STAT_AFTER, cores={0}) == CpuTimes(busy=250, total=1050, cores=1)
    assert parse_proc_stat(STAT_AFTER, cores={1}) == CpuTimes(busy=270, total=1150, cores=1)


@pytest.mark.parametrize("text, cores, fragment", [
    ("intr 1 2\n", None, "no per-core"),
    (STAT_BEFORE, {0, 5}, "no line for cores [5]"),
    ("cpu0 1 2 3\n", None, "3 counters"),
    ("cpu0 1 x 3 4 5 6 7 8\n", None, "jiffy counts"),
])
def test_proc_stat_that_cannot_be_read_is_named(text, cores, fragment):
    with pytest.raises(ProcStatError, match=re.escape(fragment)):
        parse_proc_stat(text, cores)


def test_other_busy_cores_are_every_busy_core_less_this_process():
    sample = LoadSample.between(parse_proc_stat(STAT_BEFORE), parse_proc_stat(STAT_AFTER), own_cpu_s=0.1, window_s=1.0)
    assert sample.busy_cores == pytest.approx(1.2)      # 120 busy jiffies over 100 elapsed per core
    assert sample.own_cores == pytest.approx(0.1)
    assert sample.other_busy_cores == pytest.approx(1.1)
    with pytest.raises(ProcStatError, match="did not advance"):
        LoadSample.between(parse_proc_stat(STAT_BEFORE), parse_proc_stat(STAT_BEFORE), 0.0, 1.0)


def test_without_proc_stat_the_load_is_not_guessed(tmp_path):
    assert other_load(0.01, tmp_path / "no-stat") is None
    contention = Contention.of([None, None], usable_cores=2, threads=1, slack=0.5)
    assert contention.contended is None and contention.other_busy_cores is None
    assert "not found" in contention.unmeasured and contention.reason is None


def test_other_load_of_this_machine_reads_its_usable_cores():
    sample = other_load(0.05)
    if sample is None:
        pytest.skip("no /proc/stat here")
    assert sample.cores >= 1 and sample.window_s >= 0.05
    assert 0 <= sample.busy_cores <= sample.cores + 0.5  # a tick of slack on a 50 ms window


@pytest.mark.parametrize("other, usable, threads, slack, contended", [
    (1.5, 2, 1, 0.5, False),    # at the limit: 1 free core + 0.5
    (1.51, 2, 1, 0.5, True),
    (0.5, 2, 2, 0.5, False),    # no free core: half a core of other load is tolerated
    (0.51, 2, 2, 0.5, True),
    (1.0, 2, 2, 0.5, True),     # the busy loop of issue 15 against 2 threads
    (1.0, 2, 1, 0.5, False),    # the same loop against 1 thread: it has a core of its own
    (0.0, 2, 3, 0.5, True),     # more threads than usable cores: oversubscribed even with no other load
])
def test_contention_rule_at_its_boundary(other, usable, threads, slack, contended):
    verdict = Contention.of([other, other, other], usable, threads, slack)
    assert verdict.contended is contended
    assert (verdict.reason is not None) is contended


def test_contention_judges_the_median_sample_and_explains_itself():
    verdict = Contention.of([0.1, 1.9, 1.8], usable_cores=2, threads=1, slack=0.5)
    assert verdict.other_busy_cores == pytest.approx(1.8) and verdict.contended is True
    assert verdict.reason == "other load 1.8 busy cores > 1 free core + 0.5"
    spike = Contention.of([0.1, 1.9, 0.2], usable_cores=2, threads=1, slack=0.5)
    assert spike.contended is False and spike.to_json()["other_busy_cores_max"] == pytest.approx(1.9)
    assert "usable cores - threads + slack (2 - 1 + 0.5)" in verdict.rule
    again = Contention.from_json(json.loads(json.dumps(verdict.to_json())), slack=1.0)
    assert again.samples == verdict.samples and again.contended is False  # re-judged at the new slack
    assert Contention.from_json(None, 0.5).contended is None


def test_a_contended_run_is_noisy_with_both_reasons():
    times = iter([1.0, 1.3])
    recorder = EnvironmentRecorder(threshold=0.15, contention_slack=0.5, reference=lambda: next(times), load=lambda: (1.0, 1.0, 1.0),
                                   other=lambda: 1.0, threads=lambda: 2, usable_cores=lambda: 2)
    recorder.start()
    env = recorder.end()
    assert env.contended is True and env.noisy is True
    assert env.noisy_reasons == ["reference drift 30% > 15%", "other load 1.0 busy cores > 0 free cores + 0.5"]
    columns = env.columns()
    assert columns["contended"] is True and columns["other_busy_cores"] == 1.0 and columns["contention_slack"] == 0.5


def test_a_constant_load_alone_makes_a_quiet_drift_noisy():
    recorder = EnvironmentRecorder(threshold=0.15, contention_slack=0.5, reference=lambda: 1.0, load=lambda: (1.0, 1.0, 1.0), other=lambda: 1.0,
                                   threads=lambda: 2, usable_cores=lambda: 2)
    recorder.start()
    env = recorder.end()
    assert env.drift.noisy is False and env.noisy is True and len(env.noisy_reasons) == 1


def test_the_drift_threshold_and_contention_slack_have_no_default_in_code():
    """They change whether a run is marked noisy: params (kernels.profile, e2e) is their one source."""
    import inspect

    import kernels_profile.measure.machine as machine

    assert inspect.signature(Drift.of).parameters["threshold"].default is inspect.Parameter.empty
    assert inspect.signature(Contention.of).parameters["slack"].default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="contention_slack"):
        EnvironmentRecorder(threshold=0.15)
    assert not hasattr(machine, "DEFAULT_NOISY_DRIFT") and not hasattr(machine, "run_environment_start")
