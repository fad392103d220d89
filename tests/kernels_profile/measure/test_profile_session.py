"""kernels_profile.measure.session: a profile run's pairs in their seeded alternating order, per-pair ratios,
hashed verified checkpoints, the environment recorded beside the timings and the sidecar file I/O (tiny random
model, injected reference timings). The measurement itself (order, spec checks, cache bench): test_profiler.py."""

import json
import shutil
from dataclasses import replace
from itertools import count
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("torch")

from analysis.latency.tables import paired_kernel_ratios  # noqa: E402
from analysis.errors import ParamsError  # noqa: E402
from kernels_profile.measure.session import ProfileResult, profile_run  # noqa: E402
from kernels_profile.measure.sidecar import (  # noqa: E402
    any_verdict,
    environment_path,
    judged_run,
    read_environment,
    write_with_sidecar,
)


def write_profile(result: ProfileResult, out):
    return write_with_sidecar(result.raw, result.environment, out, "kernels_profile")
from kernels_profile.measure.profiler import PAIR_SCHEMA, RAW_SCHEMA, ProfileSpec, pair_order  # noqa: E402
from fixtures import profile_spec  # noqa: E402
from fixtures import ROOT  # noqa: E402
from kernels_profile.runtime.checkpoints import (  # noqa: E402
    KEY_FIELD,
    SECONDS_FIELD,
    read_frame_checkpoint,
    write_frame_checkpoint,
)

SPEC = profile_spec(models=("tiny-qwen2",), dtype="float32", contexts=(0, 8), ns=(1, 2, 4),
                   baselines=("eager", "static"), repeats=3, warmup=0, roofline=False, order_seed=0)
PAIRS = len(SPEC.contexts) * len(SPEC.baselines) * SPEC.repeats


def steady(seconds=0.01):
    return lambda: seconds


def quiet_load():
    return (0.5, 0.5, 0.5)


def no_other_load():
    return 0.0  # other processes' busy cores: none (the real /proc/stat of a shared test machine is not)


def run(spec, root, reference=None, messages=None, other=no_other_load):
    log = messages.append if messages is not None else (lambda m: None)
    return profile_run(spec, root, progress=False, reference=reference or steady(), load=quiet_load, log=log,
                       other=other)


def pair_files(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in root.glob("*.parquet")}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    return root, run(SPEC, root)


def copy_of(measured, tmp_path) -> Path:
    root = tmp_path / "ck"
    shutil.copytree(measured[0], root)
    return root


# ---------------------------------------------------------------- order and pairing

def test_every_pair_holds_both_methods_in_its_seeded_alternating_order(measured):
    _, result = measured
    raw = result.raw
    assert raw.height == PAIRS * 2 * len(SPEC.ns)
    assert set(RAW_SCHEMA) | set(PAIR_SCHEMA) <= set(raw.columns)
    firsts = {}
    for (pair_id,), rows in raw.group_by(["pair_id"]):
        model, context, baseline, repeat = pair_id.split("/")
        order = pair_order(SPEC, model, int(context[1:]), baseline, int(repeat[1:]))
        got = {m: rows.filter(pl.col("method") == m)["order_index"].unique().to_list() for m in ("ar", "prefill")}
        assert got == {"ar": [order.index("ar")], "prefill": [order.index("prefill")]}
        assert rows.filter(pl.col("method") == "prefill")["pair_baseline"].unique().to_list() == [baseline]
        firsts[(context, baseline, int(repeat[1:]))] = order[0]
    for context in ("c0", "c8"):
        for baseline in SPEC.baselines:
            sequence = [firsts[(context, baseline, r)] for r in range(SPEC.repeats)]
            assert all(a != b for a, b in zip(sequence, sequence[1:])), sequence


def test_ratios_pair_the_ar_run_with_the_prefill_of_its_own_pair(measured):
    raw = measured[1].raw
    ratios = paired_kernel_ratios(raw)
    assert ratios.height == raw.filter(pl.col("method") == "ar").height
    for row in ratios.sample(5, seed=0).iter_rows(named=True):
        pair_id = f"{row['model']}/c{row['context']}/{row['baseline']}/r{row['repeat']}"
        same = raw.filter((pl.col("pair_id") == pair_id) & (pl.col("n") == row["n"]))
        t_ar = same.filter(pl.col("method") == "ar")["seconds"].item()
        t_prefill = same.filter(pl.col("method") == "prefill")["seconds"].item()
        assert row["ratio"] == t_ar / t_prefill


def test_old_raw_files_without_pairs_still_pair_on_the_repeat(measured):
    raw = measured[1].raw
    old = raw.filter((pl.col("method") == "ar") | (pl.col("pair_baseline") == "eager")).select(list(RAW_SCHEMA))
    ratios = paired_kernel_ratios(old)
    assert ratios.height == old.filter(pl.col("method") == "ar").height


def test_separate_mode_interleaves_per_n(tmp_path):
    spec = replace(SPEC, contexts=(4,), baselines=("eager",), repeats=2, ar_mode="separate")
    raw = run(spec, tmp_path).raw
    for (pair_id,), rows in raw.group_by(["pair_id"]):
        order = pair_order(spec, "tiny-qwen2", 4, "eager", int(pair_id.rsplit("/r", 1)[1]))
        assert rows.filter(pl.col("method") == "ar")["order_index"].unique().to_list() == [order.index("ar")]
    assert raw.height == 2 * 2 * len(spec.ns)


# ---------------------------------------------------------------- checkpoints

def test_a_second_run_measures_nothing(measured, tmp_path):
    root = copy_of(measured, tmp_path)
    before = pair_files(root)
    again = run(SPEC, root, reference=lambda: pytest.fail("nothing should be measured"))
    assert pair_files(root) == before
    assert again.raw.equals(measured[1].raw)
    # resumed, the run still reports what it would take from scratch: every pair's recorded seconds
    recorded = sum(read_frame_checkpoint(p, p.stem.rsplit("-", 1)[1]).seconds for p in root.glob("*.parquet"))
    assert 0 < recorded <= again.from_scratch_s
    assert measured[1].from_scratch_s >= recorded


@pytest.mark.parametrize("change", [{"seed": 1}, {"order_seed": 3}, {"warmup": 1}, {"ns": (1, 2, 3)}])
def test_a_field_that_matters_remeasures_every_pair(measured, tmp_path, change):
    root = copy_of(measured, tmp_path)
    before = set(pair_files(root))
    again = run(replace(SPEC, contexts=(0,), baselines=("eager",), repeats=1, **change), root)
    assert not set(again.raw["checkpoint_key"].to_list()) & set(measured[1].raw["checkpoint_key"].to_list())
    assert len(set(pair_files(root)) - before) == 1


def test_another_torch_version_remeasures(measured, tmp_path, monkeypatch):
    root = copy_of(measured, tmp_path)
    from kernels_profile.runtime import checkpoints as runtime

    real = runtime.library_versions
    monkeypatch.setattr(runtime, "library_versions", lambda: {**real(), "torch": "0.0-other"})
    before = set(pair_files(root))
    run(replace(SPEC, contexts=(0,), baselines=("eager",), repeats=1), root)
    assert len(set(pair_files(root)) - before) == 1


def test_a_changed_model_config_remeasures(measured, tmp_path, monkeypatch):
    root = copy_of(measured, tmp_path)
    from kernels_profile.runtime import checkpoints

    real = checkpoints.published_config  # the run fingerprint reads the model's config through it
    monkeypatch.setattr(checkpoints, "published_config", lambda name: {**real(name), "rms_norm_eps": 1e-5})
    before = set(pair_files(root))
    run(replace(SPEC, contexts=(0,), baselines=("eager",), repeats=1), root)
    assert len(set(pair_files(root)) - before) == 1


def test_unrelated_fields_reuse_every_pair(measured, tmp_path):
    root = copy_of(measured, tmp_path)
    before = pair_files(root)
    fewer = replace(SPEC, contexts=(8,), repeats=2, noisy_drift=0.5, reference_budget_s=0.1, roofline=True)
    again = run(fewer, root, reference=lambda: pytest.fail("nothing should be measured"))
    assert pair_files(root) == before
    assert again.raw.height == len(SPEC.baselines) * 2 * 2 * len(SPEC.ns)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "fewer_rows", "other_key"])
def test_a_damaged_checkpoint_is_discarded_and_measured_again(measured, tmp_path, damage):
    root = copy_of(measured, tmp_path)
    victim = sorted(root.glob("tiny-qwen2-c8-static-r1-*.parquet"))[0]
    if damage == "truncate":
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    elif damage == "garbage":
        victim.write_bytes(b"not a parquet file")
    elif damage == "fewer_rows":  # same key and seconds, two rows
        key, seconds = (pl.read_parquet_metadata(victim)[f] for f in (KEY_FIELD, SECONDS_FIELD))
        write_frame_checkpoint(pl.read_parquet(victim).head(2), victim, key, float(seconds))
    else:
        write_frame_checkpoint(pl.read_parquet(victim), victim, "0" * 20, 1.0)
    before = pair_files(root)
    messages = []
    again = run(SPEC, root, messages=messages)
    assert len(messages) == 1 and str(victim) in messages[0] and "measuring it again" in messages[0]
    after = pair_files(root)
    assert after[victim.name] != before[victim.name]
    assert {k: v for k, v in after.items() if k != victim.name} == {k: v for k, v in before.items() if k != victim.name}
    assert pl.read_parquet(victim).height == 2 * len(SPEC.ns)
    assert again.raw.height == measured[1].raw.height
    assert not list(root.glob(".*.tmp"))


# ---------------------------------------------------------------- environment and noisy flags

def test_environment_sidecar_is_written_beside_the_raw_file(measured, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the raw file and its sidecar are one output set inside the output root
    result = measured[1]
    out = tmp_path / "kernels" / "raw.parquet"
    sidecar = write_profile(result, out)
    assert sidecar == environment_path(out) == tmp_path / "kernels" / "raw.environment.json"
    assert pl.read_parquet(out).equals(result.raw)
    env = read_environment(out)
    assert env == json.loads(sidecar.read_text())
    assert env["machine"]["logical_cores"] >= 1 and "cpu_avx512_bf16" in env["machine"]
    assert [r["run_id"] for r in env["runs"]] == sorted(set(result.raw["run_id"].to_list()))
    run_record = env["runs"][0]
    assert run_record["load_before"] == [0.5, 0.5, 0.5]
    assert len(run_record["reference_samples_s"]) == PAIRS + len(SPEC.contexts) + 2
    assert env["pairs"] == PAIRS and env["noisy"] is False and env["noisy_pairs"] == []
    assert env["contended"] is False and env["noisy_reasons"] == [] and env["other_busy_cores"] == [0.0]
    contention = run_record["contention"]
    assert len(contention["samples"]) == len(run_record["reference_samples_s"])  # one beside each reference sample
    assert contention["threads"] == result.raw["threads"][0] and env["threads"] == [result.raw["threads"][0]]
    assert (result.raw["ref_before_s"] > 0).all() and (result.raw["load1_before"] == 0.5).all()
    assert read_environment(tmp_path / "nowhere.parquet") is None


def test_a_drifting_reference_marks_its_pair_and_the_run_noisy(tmp_path):
    spec = replace(SPEC, contexts=(0,), baselines=("eager",), repeats=3)
    calls = count()
    # start, after warm-up, then one sample after each pair: the second pair runs while the
    # reference workload slows from 1.0 to 1.3 s (30%).
    samples = [1.0, 1.0, 1.0, 1.3, 1.3, 1.3]
    result = run(spec, tmp_path, reference=lambda: samples[next(calls)])
    flags = result.raw.group_by("repeat").agg(pl.col("noisy").first(), pl.col("ref_drift").first()).sort("repeat")
    assert flags["noisy"].to_list() == [False, True, False]
    assert result.environment["noisy"] is True
    assert result.environment["noisy_pairs"] == ["tiny-qwen2/c0/eager/r1"]
    assert result.environment["runs"][0]["noisy"] is True
    # a looser threshold re-judges the same timings without measuring again
    loose = run(replace(spec, noisy_drift=0.5), tmp_path, reference=lambda: pytest.fail("re-measured"))
    assert not loose.raw["noisy"].any() and loose.environment["noisy"] is False
    assert loose.raw["seconds"].equals(result.raw["seconds"])


def test_other_processes_on_every_usable_core_mark_the_run_contended_and_noisy(tmp_path):
    import os

    spec = replace(SPEC, contexts=(0,), baselines=("eager",), repeats=1)
    usable = len(os.sched_getaffinity(0))
    # every usable core busy: more than the cores left free by any thread count >= 1, plus 0.5
    result = run(spec, tmp_path, other=lambda: float(usable))
    env = result.environment
    assert env["contended"] is True and env["noisy"] is True and env["noisy_pairs"] == []
    assert len(env["noisy_reasons"]) == 1 and env["noisy_reasons"][0].startswith(f"run {env['runs'][0]['run_id']}: other load")
    # the drift alone is quiet: the constant load slowed every reference sample alike
    assert env["runs"][0]["drift"]["noisy"] is False
    # a larger slack re-judges the recorded samples without measuring again
    loose = run(replace(spec, contention_slack=float(usable)), tmp_path, reference=lambda: pytest.fail("re-measured"),
                other=lambda: pytest.fail("re-measured"))
    assert loose.environment["contended"] is False and loose.environment["noisy"] is False
    # the fit stage's environment summary carries the verdict, its reasons and its rule
    from kernels_profile.measure.session import session_environment_metrics

    summary = session_environment_metrics(env)
    assert summary["contended"] is True and summary["noisy_reasons"] == env["noisy_reasons"]
    assert summary["other_busy_cores"] == [float(usable)] and "usable cores - threads + slack" in summary["contention_rule"]
    assert summary["contention_unmeasured"] is None and summary["threads"] == env["threads"]


def test_a_run_without_proc_stat_is_not_judged_and_says_so(tmp_path):
    spec = replace(SPEC, contexts=(0,), baselines=("eager",), repeats=1)
    env = run(spec, tmp_path, other=lambda: None).environment
    assert env["contended"] is None and env["noisy"] is False
    assert "/proc/stat not found" in env["runs"][0]["contention"]["unmeasured"]
    from kernels_profile.measure.session import session_environment_metrics

    assert "/proc/stat not found" in session_environment_metrics(env)["contention_unmeasured"]


def test_a_missing_run_record_is_reported_not_skipped(tmp_path):
    spec = replace(SPEC, contexts=(0,), baselines=("eager",), repeats=1)
    run(spec, tmp_path)
    for path in tmp_path.glob("run-*.json"):
        path.unlink()
    messages = []
    env = run(spec, tmp_path, messages=messages).environment
    assert env["runs"][0]["missing"] and env["runs"][0]["noisy"] is None
    assert any("not found" in m for m in messages)


# ---------------------------------------------------------------- whole runs (moved from test_kernels.py)

def profile(spec, root, progress=False):
    """The raw timings, with no other load injected: each real contention sample sleeps 1 s."""
    return profile_run(spec, root, progress, other=lambda: 0.0).raw


@pytest.mark.slow
def test_profile_grid_shape_and_resume(tmp_path):
    spec = profile_spec(models=("tiny-qwen2",), dtype="float32", contexts=(0, 16), ns=(1, 2, 4),
                       baselines=("eager", "static"), repeats=2, warmup=0, roofline=False, reference_budget_s=0.02)
    raw = profile(spec, tmp_path, progress=False)
    assert raw.height == 2 * 3 * (2 * 2) * 2  # contexts x ns x (2 baselines x [AR, prefill] pairs) x repeats
    assert (raw["ref_before_s"] > 0).all() and raw["noisy"].dtype == pl.Boolean
    assert (raw["seconds"] > 0).all()
    assert {"torch_version", "transformers_version", "threads", "config", "weights_note", "device_name"} <= set(raw.columns)
    assert raw["weights_note"][0].startswith("random weights")
    # prefix mode: T_ar grows with N within a repeat
    ar = raw.filter((pl.col("method") == "ar") & (pl.col("baseline") == "eager") & (pl.col("repeat") == 0) & (pl.col("context") == 0))
    assert ar.sort("n")["seconds"].is_sorted()
    # a second run finds every part checkpointed and measures nothing again
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = profile(spec, tmp_path, progress=False)
    assert again.equals(raw)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps


@pytest.mark.slow
def test_preset_shape_runs_on_cpu(tmp_path):
    from analysis.pipeline.params import load_params
    from kernels_profile.stages.profile import settings

    params = load_params(ROOT / "params.yaml")
    gpu, gpu_out = settings(params, "paper-gpu").spec, settings(params, "paper-gpu").out
    tiny_spec = settings(params, "tiny-cpu").spec
    assert gpu.models == ("qwen2.5-1.5b", "qwen2.5-7b") and gpu.device == "cuda" and gpu.dtype == "bfloat16"
    assert gpu.contexts == tiny_spec.contexts and gpu.ns == tiny_spec.ns == tuple(2 ** k for k in range(10))
    assert "frozen" in str(gpu_out)
    default = settings(params).spec
    assert default.threads == 1 and default.contention_slack == 0.5  # one measuring thread (issue 15)
    assert gpu.threads is None and tiny_spec.threads is None
    small = ProfileSpec(**{**tiny_spec.__dict__, "ns": (1, 8, 64), "repeats": 1, "warmup": 0,
                           "roofline": False, "reference_budget_s": 0.02})
    raw = profile(small, tmp_path, progress=False)
    assert set(raw["context"].unique()) == set(gpu.contexts)
    with pytest.raises(ParamsError, match="unknown preset"):
        settings(params, "paper-tpu")


# ---------------------------------------------------------------- verdicts and the sidecar file

def test_any_verdict_is_true_if_any_is_then_unknown_then_false():
    assert any_verdict([False, None, True]) is True
    assert any_verdict([False, None]) is None and any_verdict([]) is None
    assert any_verdict([False, False]) is False


def test_the_sidecar_lives_beside_the_raw_file_and_round_trips(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "kernels_raw.parquet"
    assert environment_path(out) == tmp_path / "kernels_raw.environment.json"
    assert read_environment(out) is None  # a raw file written before sidecars existed
    result = ProfileResult(raw=pl.DataFrame({"seconds": [0.5]}), environment={"noisy": True, "pairs": 1},
                           from_scratch_s=1.0)
    sidecar = write_profile(result, out)
    assert sidecar == environment_path(out) and pl.read_parquet(out).equals(result.raw)
    assert read_environment(out) == {"noisy": True, "pairs": 1, "raw": str(out)}


def test_a_run_record_is_re_judged_at_todays_thresholds():
    run = {"run_id": "r", "reference_samples_s": [1.0, 1.1], "contention": None}
    assert judged_run(run, replace(SPEC, noisy_drift=0.15))["noisy"] is False
    loose = judged_run(run, replace(SPEC, noisy_drift=0.05))
    assert loose["noisy"] is True and loose["noisy_reasons"] and loose["contended"] is None


def test_the_raw_file_and_its_sidecar_are_replaced_as_one_set(tmp_path, monkeypatch):
    """L6: the raw timings and their sidecar were two writes; a failure between them left a new raw file
    beside the old run's environment."""
    from analysis.pipeline import io

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "raw.parquet"
    write_profile(ProfileResult(raw=pl.DataFrame({"seconds": [0.5]}), environment={"run": "old"}, from_scratch_s=1.0), out)
    real = io.write_text

    def failing(text, path):  # the sidecar's write fails after the raw file was written
        if str(path).endswith(".environment.json"):
            raise OSError("disk full")
        real(text, path)

    monkeypatch.setattr(io, "write_text", failing)
    with pytest.raises(OSError, match="disk full"):
        write_profile(ProfileResult(raw=pl.DataFrame({"seconds": [9.0]}), environment={"run": "new"},
                                    from_scratch_s=1.0), out)
    assert pl.read_parquet(out)["seconds"].to_list() == [0.5] and read_environment(out)["run"] == "old"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "data") == ["raw.environment.json", "raw.parquet"]  # no temporaries


def test_the_progress_bar_moves_once_per_timed_run_and_resumes_at_the_finished_pairs(tmp_path, monkeypatch):
    """Section 4 of issue 41: the bar had 4 steps over a 15-minute profile (one per pair); now a step per timed
    run (the AR run and each prefill), and a resumed run starts at its finished pairs' steps."""
    import kernels_profile.measure.session as session
    from kernels_profile.measure.profiler import pair_steps

    bars = []

    class Bar:
        def __init__(self, total, initial, **kwargs):
            self.total, self.n, self.initial = total, initial, initial
            bars.append(self)

        def update(self, k):
            self.n += k

        def set_postfix_str(self, text):
            pass

        def close(self):
            pass

    monkeypatch.setattr(session, "progress_bar", Bar)
    spec = replace(SPEC, repeats=1)
    pairs = len(spec.contexts) * len(spec.baselines)
    assert pair_steps(spec) == 1 + len(spec.ns) * len(spec.prefills)
    run(spec, tmp_path)
    assert bars[-1].total == pairs * pair_steps(spec) and bars[-1].n == bars[-1].total
    first = next(tmp_path.glob("*.parquet"))
    first.unlink()  # one pair lost: the rerun measures it alone
    run(spec, tmp_path)
    assert bars[-1].initial == (pairs - 1) * pair_steps(spec) and bars[-1].n == bars[-1].total
