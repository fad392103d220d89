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
    from kernels_profile.stages.fit import raw_sources

    listed = raw_sources({"kernels": {"fit": {"raw": [{"source": s.source, "path": str(s.out)}]}}})
    assert listed[0].source == "tiny-llama-cpu"  # a name kernels.fit.raw accepts
    default = _settings(["kernels", "profile"])
    assert default.source is None and str(default.out) == "data/kernels/raw.parquet"


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
    err = capsys.readouterr().err
    table = speedup_summary(pl.read_parquet(out))
    assert table.height >= 2 and "T_ar(N) / T_prefill(N) measured here" in err
    assert "| model | baseline | prefill | context | n | t_ar_ms | t_prefill_ms | speedup | speedup_iqr | repeats |" in err
    for row in table.iter_rows(named=True):
        assert f"| {row['n']} | {row['t_ar_ms']:.3f} | {row['t_prefill_ms']:.3f} | {row['speedup']:.3f} |" in err
