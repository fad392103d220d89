"""The measurement runtime: one checkpoint key, verified checkpoint reads, from-scratch seconds, threads."""

import json
from types import SimpleNamespace

import polars as pl
import pytest

from kernels_profile.runtime.checkpoints import (
    KEY_FIELD,
    FromScratch,
    checkpoint_key,
    read_frame_checkpoint,
    read_json_checkpoint,
    write_frame_checkpoint,
    write_json_checkpoint,
)

FRAME = pl.DataFrame({"method": ["ar", "copy-line-ideal"], "seconds": [2.0, 1.0]})


def test_the_key_changes_with_the_version_and_every_part_and_not_with_dict_order():
    key = checkpoint_key("v1", {"a": 1, "b": [1, 2]}, "x")
    assert len(key) == 20 and key == checkpoint_key("v1", {"b": [1, 2], "a": 1}, "x")
    assert len({key, checkpoint_key("v2", {"a": 1, "b": [1, 2]}, "x"), checkpoint_key("v1", {"a": 2, "b": [1, 2]}, "x"),
                checkpoint_key("v1", {"a": 1, "b": [1, 2]}, "y")}) == 4


def test_a_frame_checkpoint_round_trips_with_its_seconds(tmp_path):
    path = write_frame_checkpoint(FRAME, tmp_path / "case.parquet", "k1", 3.5)
    found = read_frame_checkpoint(path, "k1", rows=2, columns={"method": pl.String})
    assert found.content.equals(FRAME) and found.seconds == 3.5
    assert not list(tmp_path.glob(".*"))  # written through a temporary file, renamed


@pytest.mark.parametrize("damage, fragment", [
    ("other_key", "expected k1"), ("fewer_rows", "1 rows, expected 2"), ("column", "mistyped columns"),
    ("garbage", "unreadable"), ("no_metadata", "keyed None"), ("zero_seconds", "non-positive"),
])
def test_a_damaged_frame_checkpoint_is_discarded_with_the_reason(tmp_path, damage, fragment):
    path = tmp_path / "case.parquet"
    if damage == "other_key":
        write_frame_checkpoint(FRAME, path, "k2", 1.0)
    elif damage == "fewer_rows":
        write_frame_checkpoint(FRAME.head(1), path, "k1", 1.0)
    elif damage == "column":
        write_frame_checkpoint(FRAME.rename({"method": "m"}), path, "k1", 1.0)
    elif damage == "garbage":
        path.write_bytes(b"not parquet")
    elif damage == "no_metadata":
        FRAME.write_parquet(path)
    else:
        write_frame_checkpoint(FRAME.with_columns(seconds=pl.lit(0.0)), path, "k1", 1.0)
    messages = []
    assert read_frame_checkpoint(path, "k1", rows=2, columns={"method": pl.String}, what="e2e",
                                 log=messages.append) is None
    assert not path.exists() and len(messages) == 1 and fragment in messages[0] and messages[0].startswith("e2e:")


def test_a_json_checkpoint_needs_its_key_and_fields(tmp_path):
    path = write_json_checkpoint({"prefill": [1], "ar": [2]}, tmp_path / "curve.json", "k1", 2.0)
    found = read_json_checkpoint(path, "k1", fields={"prefill", "ar"})
    assert found.content == {"prefill": [1], "ar": [2]} and found.seconds == 2.0
    messages = []
    assert read_json_checkpoint(path, "k1", fields={"contexts"}, log=messages.append) is None
    assert "missing fields ['contexts']" in messages[0] and not path.exists()
    path.write_text(json.dumps({"prefill": [1], KEY_FIELD: "k1"}))  # no seconds recorded
    assert read_json_checkpoint(path, "k1", log=messages.append) is None and "seconds" in messages[1]
    assert read_json_checkpoint(path, "k1") is None  # absent: None, nothing said


def test_seconds_must_be_finite_and_not_negative(tmp_path):
    with pytest.raises(ValueError, match="seconds"):
        write_frame_checkpoint(FRAME, tmp_path / "x.parquet", "k", float("nan"))


class FakeClock:
    """time.perf_counter as the checkpoints module sees it, advanced by hand: the from-scratch arithmetic is
    checked exactly, whatever else the machine is doing (a real clock read twice differs under load)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    from kernels_profile.runtime import checkpoints

    fake = FakeClock()
    monkeypatch.setattr(checkpoints, "time", SimpleNamespace(perf_counter=fake))
    return fake


def test_from_scratch_counts_read_back_units_and_not_measured_ones_twice(clock):
    scratch = FromScratch()
    scratch.read_back(5.0)
    clock.now += 0.05
    unit = scratch.measured()
    assert unit == pytest.approx(0.05) and scratch.recorded == pytest.approx(5.0 + unit)
    clock.now += 1.0  # this run's elapsed time (its one unit included once) plus the unit read back
    assert scratch.seconds() == pytest.approx(1.05 + 5.0)


def test_threads_block_restores_the_count():
    torch = pytest.importorskip("torch")
    from kernels_profile.runtime.loading import set_threads, threads

    before = torch.get_num_threads()
    try:
        with threads(1) as count:
            assert count == 1 == torch.get_num_threads()
        assert torch.get_num_threads() == before
        assert set_threads(None) == before  # null leaves whatever is in force
        assert set_threads(1) == 1 == torch.get_num_threads() and set_threads(None) == 1
    finally:
        torch.set_num_threads(before)


def test_one_key_hash_one_thread_setter_one_ratio_summary():
    """kernels_profile hashes checkpoint keys and sets torch threads only in the runtime; the median and
    quartiles of timings are aggregated only by analysis.stats.quartiles."""
    from fixtures import ROOT

    code = {p: p.read_text() for folder in ("kernels_profile", "analysis") for p in (ROOT / folder).rglob("*.py")
            if "data" not in p.relative_to(ROOT).parts}
    store, loading = ROOT / "kernels_profile" / "runtime" / "checkpoints.py", ROOT / "kernels_profile" / "runtime" / "loading.py"
    stats = ROOT / "analysis" / "stats.py"
    assert [p for p, text in code.items() if "set_num_threads(" in text] == [loading]
    assert [p for p, text in code.items() if "sha256(" in text and p.is_relative_to(ROOT / "kernels_profile")] == [store]
    assert [p for p, text in code.items() if "quantile(0.25" in text or "np.quantile(" in text] == [stats]


def test_from_scratch_counts_a_resumed_unit_at_its_recorded_seconds(clock):
    scratch = FromScratch()
    clock.now += 2.0
    scratch.mark()
    clock.now += 0.05
    scratch.resumed(7.0)  # 0.05 s now, 7 s over all its runs (this one included)
    assert scratch.measured_now == pytest.approx(0.05) and scratch.recorded == pytest.approx(7.0)
    assert scratch.seconds() == pytest.approx(2.05 - 0.05 + 7.0)
    with pytest.raises(ValueError, match="finite number"):
        scratch.resumed(float("nan"))


def test_one_fingerprint_holds_model_libraries_and_threads(monkeypatch):
    torch = pytest.importorskip("torch")
    from kernels_profile.runtime import checkpoints as runtime

    found = runtime.fingerprint("tiny-qwen2", "random")
    assert set(found) == {"model", "torch", "transformers", "peft", "threads"}
    assert found["threads"] == torch.get_num_threads() and found["peft"]
    monkeypatch.setattr(runtime, "library_versions", lambda: {"torch": "x", "transformers": "y", "peft": "z"})
    assert runtime.fingerprint("tiny-qwen2", "random") != found


def test_profile_e2e_and_pilot_keys_use_the_one_fingerprint():
    """No stage or measurement module writes its own library-version fingerprint."""
    from fixtures import ROOT

    users = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kernels_profile").rglob("*.py")
                   if "fingerprint(" in p.read_text() and p.name != "checkpoints.py")
    assert users == ["kernels_profile/measure/session.py", "kernels_profile/pilot/jobs.py", "kernels_profile/stages/batched.py",
                     "kernels_profile/stages/e2e.py", "kernels_profile/stages/replay.py"]
    versions = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kernels_profile").rglob("*.py")
                      if "peft.__version__" in p.read_text())
    assert versions == ["kernels_profile/runtime/checkpoints.py"]


def test_a_torch_checkpoint_round_trips_and_a_planted_object_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    from kernels_profile.runtime.checkpoints import CheckpointError, read_torch_checkpoint, write_torch_checkpoint

    path = write_torch_checkpoint({"w": torch.ones(2), "losses": [1.0]}, tmp_path / "a.pt")
    back = read_torch_checkpoint(path, "delete it")
    assert torch.equal(back["w"], torch.ones(2)) and back["losses"] == [1.0]
    torch.save({"x": FRAME.__class__}, tmp_path / "b.pt")  # a class: not a tensor or plain value
    with pytest.raises(CheckpointError, match="refused: .*delete it"):
        read_torch_checkpoint(tmp_path / "b.pt", "delete it")
    (tmp_path / "c.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        read_torch_checkpoint(tmp_path / "c.pt", "delete it")


def test_only_the_runtime_saves_and_loads_torch_checkpoints():
    from fixtures import ROOT

    users = sorted(str(p.relative_to(ROOT)) for folder in ("kernels_profile", "analysis")
                   for p in (ROOT / folder).rglob("*.py") if "torch.load(" in p.read_text() or "torch.save(" in p.read_text())
    assert users == ["kernels_profile/runtime/checkpoints.py"]
