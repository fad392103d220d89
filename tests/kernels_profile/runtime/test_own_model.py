"""`copydecode kernels profile --model DIR`: any transformers causal LM from its config, no registry entry."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pytest

from analysis.pipeline.config import Config
from analysis.cli import build_parser, stage_settings
from analysis.errors import ParamsError
from analysis.pipeline.params import load_params
from fixtures import ROOT
from kernels_profile.runtime.models import ModelError, build_model, model_label

TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
              "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
              "vocab_size": 256, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}


@pytest.fixture
def tiny(tmp_path):
    folder = tmp_path / "Tiny-Llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    return folder


def _settings(argv: list[str]):
    import kernels_profile.stages.profile as module

    args = build_parser().parse_args(argv)
    args.out = getattr(args, "raw_out", None)
    return stage_settings(module, args, Config(load_params(ROOT / "params.yaml"), ROOT / "params.yaml"))


def test_an_unregistered_config_folder_builds_with_random_weights(tiny):
    lm = build_model(str(tiny), "random", "float32", "cpu", seed=0)
    assert lm.name == "tiny-llama" == model_label(str(tiny)) and type(lm.model).__name__ == "LlamaForCausalLM"
    assert lm.model.config.num_hidden_layers == 2 and lm.info["config_source"] == str(tiny)


def test_command_line_options_override_params_and_name_the_source(tiny):
    s = _settings(["kernels", "profile", "--model", str(tiny), "--device", "cpu", "--dtype", "float32",
                   "--contexts", "16", "--ns", "1,2", "--weights", "random"])
    assert (s.spec.models, s.spec.contexts, s.spec.ns, s.spec.weights) == ((str(tiny),), (16,), (1, 2), "random")
    assert s.source == "tiny-llama-cpu" and str(s.out) == "data/kernels/tiny-llama-cpu.parquet"
    from analysis.latency.sources import raw_sources

    listed = raw_sources({"kernels": {"fit": {"raw": [{"source": s.source, "path": str(s.out)}]}}})
    assert listed[0].source == "tiny-llama-cpu"  # a name kernels.fit.raw accepts
    default = _settings(["kernels", "profile"])
    assert default.source is None and str(default.out) == "data/kernels/raw.parquet"
    # UX review C10: only the pipeline's own profile files its time and summary as the stage's
    assert default.run_name == "kernels_profile" and s.run_name == "kernels_profile-tiny-llama-cpu"
    assert _settings(["kernels", "profile", "--out", "runs/k/my.parquet"]).run_name == "kernels_profile-my"


def test_bad_models_and_options_are_named_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="has no config.json"):
        build_model(str(tmp_path / "empty"), "random", "float32", "cpu")
    with pytest.raises(ModelError, match="or give a folder with a config.json or a hub id"):
        build_model(str(tmp_path / "absent"), "random", "float32", "cpu")
    with pytest.raises(ParamsError, match="--ns takes integers"):
        _settings(["kernels", "profile", "--model", str(tmp_path), "--ns", "1,x"])
    with pytest.raises(ParamsError, match="--weights real loads the weights of --model"):
        _settings(["kernels", "profile", "--weights", "real"])


@pytest.mark.slow  # a kernel profile on the tiny model: ~4.5 s
def test_the_profile_runs_on_cpu_and_writes_a_kernel_source(tiny, tmp_path, monkeypatch):
    from kernels_profile.stages.profile import run

    monkeypatch.chdir(tmp_path)
    s = _settings(["kernels", "profile", "--model", str(tiny), "--device", "cpu", "--dtype", "float32",
                   "--contexts", "16", "--ns", "1", "2", "--weights", "random"])
    s = replace(s, spec=replace(s.spec, repeats=1, warmup=0, roofline=False, reference_budget_s=0.02,
                                warmup_ar_steps=1))
    result = run(s)
    raw = pl.read_parquet(tmp_path / "data/kernels/tiny-llama-cpu.parquet")
    assert set(raw["model"]) == {"tiny-llama"} and set(raw["device"]) == {"cpu"} and set(raw["n"]) == {1, 2}
    assert set(raw["context"]) == {16} and (raw["seconds"] > 0).all()
    assert result["add_to_kernels_fit_raw"] == {"source": "tiny-llama-cpu", "path": "data/kernels/tiny-llama-cpu.parquet"}


# ---------------------------------------------------------------- issue 39: M4, M5, H4


def _config(tmp_path, name: str, **changes) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY_LLAMA, **changes}))
    return str(folder)


@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": 0}, "config's hidden_size must be a positive integer, got 0"),
    ({"vocab_size": -5}, "config's vocab_size must be a positive integer, got -5"),
    ({"hidden_size": 30, "num_attention_heads": 4}, "its config is not valid"),
    ({"num_hidden_layers": "two"}, "Field 'num_hidden_layers' expected int, got str"),
])
def test_an_invalid_config_is_named_before_anything_is_built(tmp_path, changes, message):
    """M4: hidden_size 0 gave ZeroDivisionError, vocab_size -5 a negative-dimension RuntimeError."""
    from kernels_profile.runtime.models import check_fits

    with pytest.raises(ModelError, match=message):
        check_fits(_config(tmp_path, "bad", **changes), "float32", "cpu", 16, 8)


def test_a_model_or_cache_larger_than_free_memory_is_refused_before_allocating(tmp_path, monkeypatch):
    """M4: a 93 GB config was built until the allocator failed with a raw RuntimeError; `--contexts 1e9`
    and `--ns 1e8` the same. Counted on the meta device, refused against the free memory."""
    import kernels_profile.runtime.models as models

    monkeypatch.setattr(models, "free_memory", lambda device: 8 * 10**9)
    huge = _config(tmp_path, "huge", hidden_size=8192, num_hidden_layers=24, num_attention_heads=64,
                   num_key_value_heads=8, intermediate_size=28672, vocab_size=128256, tie_word_embeddings=False)
    with pytest.raises(ModelError, match=r"needs about 45\.3 GB \(22,6\d\d,\d{3},\d{3} parameters.*above 80% of the 8\.0 GB"):
        models.check_fits(huge, "bfloat16", "cpu", 16, 8)
    tiny = _config(tmp_path, "tiny")
    with pytest.raises(ModelError, match="a KV cache of 1,000,000,008 tokens"):
        models.check_fits(tiny, "float32", "cpu", 10**9 + 8, 8)
    with pytest.raises(ModelError, match="logits of a 100,000,000-token prefill"):
        models.check_fits(tiny, "float32", "cpu", 16, 10**8)
    need = models.check_fits(tiny, "float32", "cpu", 16, 8)
    lm = build_model(tiny, "random", "float32", "cpu")
    assert need.parameters == sum(p.numel() for p in lm.model.parameters())  # the meta count is the real one


def test_an_empty_model_name_is_refused():
    """M5: `--model ""` (an unset $MODEL) profiled params' model under the name `model-cpu`."""
    with pytest.raises(ParamsError, match="--model is empty"):
        _settings(["kernels", "profile", "--model", ""])


def test_a_model_folders_checkpoints_are_named_by_its_label(tiny):
    """H4: Pair.path joined the raw --model path onto the checkpoint folder (an absolute one replaced it)."""
    from pathlib import Path

    from kernels_profile.measure.profiler import Pair

    path = Pair(str(tiny), 8, "eager", 1).path(Path("data/kernels/checkpoints"), "abc")
    assert path == Path("data/kernels/checkpoints/tiny-llama-c8-eager-r1-abc.parquet")


@pytest.mark.slow
def test_the_profile_ends_with_its_speedup_table(tiny, tmp_path, monkeypatch, capsys):
    """M5: `kernels profile --model DIR` prints T_ar, T_prefill and their ratio per measured point."""
    from analysis.cli import main
    from analysis.latency.tables import speedup_summary

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "k.parquet"
    assert main(["--params", str(ROOT / "params.yaml"), "kernels", "profile", "--model", str(tiny), "--device", "cpu",
                 "--dtype", "float32", "--contexts", "16", "--ns", "1", "4", "--weights", "random",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    err = captured.err
    table = speedup_summary(pl.read_parquet(out))
    assert table.height >= 2 and "T_ar(N) / T_prefill(N) measured here" in err
    assert "| model | baseline | prefill | context | n | t_ar_ms | t_prefill_ms | speedup | speedup_iqr | repeats |" in err
    for row in table.iter_rows(named=True):
        assert f"| {row['n']} | {row['t_ar_ms']:.3f} | {row['t_prefill_ms']:.3f} | {row['speedup']:.3f} |" in err
    # UX review C10: an ad-hoc profile leaves the pipeline stage's run time and summary alone
    assert not (tmp_path / "data/timings/kernels_profile.json").exists()
    assert not (tmp_path / "data/summaries/kernels_profile.json").exists()
    assert (tmp_path / "data/timings/kernels_profile-k.json").is_file()
    assert "(summary: data/summaries/kernels_profile-k.json)" in captured.out


def test_every_registered_model_is_sized_before_loading():
    """The memory check (M4) sizes a model from its published config: every registered model has one, the
    GGUF-loaded SmolLM2 included (without it the batched profile of the shipped params failed at the check)."""
    from kernels_profile.runtime.models import known_models, memory_estimate

    for name in known_models():
        estimate = memory_estimate(name, "float32", 1024, 64)
        assert estimate.parameters > 1e5 and estimate.cache_bytes > 0, name
