"""`copydecode kernels profile --batched`: its settings (the batch-1 profile's options refused, the batch-1 sources
resolved through params) and, on the tiny model, the raw file and the step-cost document of every source."""

import json
import shutil

import pytest
from fixtures import ROOT, params_with

from analysis.errors import ParamsError
from kernels_profile.stages import batched


def test_the_default_settings_resolve_every_batch1_source():
    s = batched.settings(params_with())
    assert s.spec.model == "smollm2-135m" and s.spec.batch_sizes == (1, 2, 4, 8, 16)
    kinds = {b.name: b.kind for b in s.batch1}
    assert kinds["h200/qwen2.5-1.5b/eager"] == "measured" and kinds["h200-devtime/qwen2.5-7b"] == "device_time"
    assert len(next(b for b in s.batch1 if b.kind == "measured").paths) == 2  # h200 has two raw files


@pytest.mark.parametrize("kwargs, params, message", [
    ({"model": "x"}, {}, "--model is an option of the batch-1 profile"),
    ({}, {"kernels.batched.batch1_sources": ["gpu/m/eager"]}, "kernels.fit.raw does not list"),
    ({}, {"kernels.batched.batch1_sources": ["fit"]}, "not a measured or device-time source"),
    ({}, {"kernels.batched.qs": [1, 4]}, "holdout_qs"),
    ({"device": "tpu"}, {}, "device must be"),
    ({"preset": "nope"}, {}, "unknown preset"),
])
def test_bad_settings_are_named(kwargs, params, message):
    with pytest.raises(ParamsError, match=message):
        batched.settings(params_with(**params), **kwargs)


@pytest.mark.slow
def test_the_tiny_preset_writes_a_raw_file_and_a_fit_of_every_source(tmp_path, monkeypatch):
    from analysis.cli import main

    pytest.importorskip("torch")
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "reports/kernels/frozen", tmp_path / "reports/kernels/frozen")
    monkeypatch.chdir(tmp_path)
    assert main(["kernels", "profile", "--batched", "--preset", "batched-tiny"]) == 0
    assert (tmp_path / "data/kernels/batched-tiny.parquet").is_file()
    assert (tmp_path / "data/kernels/batched-tiny.environment.json").is_file()
    document = json.loads((tmp_path / "data/kernels/batched-tiny.step_cost.json").read_text())
    by_source = {m["source"]: m for m in document["models"]}
    assert set(by_source) == {"batched", "h200/qwen2.5-1.5b/eager", "h200/qwen2.5-7b/eager", "h200-devtime/qwen2.5-1.5b",
                              "h200-devtime/qwen2.5-7b"}
    assert by_source["batched"]["basis"] == "measured batched steps"
    assert by_source["batched"]["diagnostics"]["holdout"]["points"] > 0
    assert all(m["basis"] == "extrapolated from batch 1" and m["assumptions"] for s, m in by_source.items() if s != "batched")
    assert document["environment"]["spec"]["model"] == "tiny-qwen2"
    assert main(["kernels", "profile", "--batched", "--model", "x"]) == 2  # a named error, exit 2


def test_a_grid_beyond_free_memory_is_refused_before_any_model_is_built(tmp_path, monkeypatch):
    """M4 in the batched profile: B sequences of c + q tokens are checked against the free memory (weights
    counted on the meta device) before the model is built; the refusal names the estimate, and the run
    writes nothing."""
    pytest.importorskip("torch")
    import kernels_profile.runtime.models as models
    from kernels_profile.runtime.models import ModelError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(models, "free_memory", lambda device: 8 * 10**9)
    built = []
    monkeypatch.setattr(models, "build_model", lambda *a, **k: built.append(a))
    s = batched.settings(params_with(**{"kernels.batched.model": "tiny-qwen2", "kernels.batched.weights": "random",
                                        "kernels.batched.contexts": [256, 100_000_000]}))
    with pytest.raises(ModelError, match=r"model 'tiny-qwen2' at float32 needs about .* a KV cache of 1,600,001,024 "
                                         r"tokens.*above 80% of the 8\.0 GB free on cpu"):
        batched.run(s)
    assert built == [] and list(tmp_path.rglob("*")) == []
    fits = batched.settings(params_with(**{"kernels.batched.model": "tiny-qwen2", "kernels.batched.weights": "random"}))
    assert models.check_fits(fits.spec.model, "float32", "cpu", 16 * (1024 + 64), 16 * 64).total < 0.8 * 8 * 10**9
