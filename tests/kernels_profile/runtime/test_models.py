"""kernels_profile.runtime.models: the model registry and published configs, the names a model has in the
timings, the dtype/device checks, the EOS ids and the vocabulary check; bad input is a ModelError."""

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from kernels_profile.runtime import models  # noqa: E402
from kernels_profile.runtime.models import (  # noqa: E402
    ModelError,
    auto_config,
    build_model,
    cache_kwarg,
    check_vocabulary,
    eos_ids,
    known_models,
    model_config,
    model_entry,
    model_label,
    published_config,
    registry,
)


def test_published_configs_are_data():
    assert {"qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "smollm2-135m"} <= set(known_models())
    cfg = published_config("qwen2.5-7b")
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_key_value_heads"]) == (3584, 28, 4)


@pytest.mark.slow  # ~20 s to lay out 7.6e9 parameters on the meta device
def test_random_7b_architecture_builds_without_weight_init():
    # on the meta device: the published 7B config and the no-init path, without 15 GB of memory
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    raw = published_config("qwen2.5-7b")
    raw.pop("_source")
    with no_init_weights(), torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw), dtype=torch.bfloat16)
    assert 7.0e9 < sum(p.numel() for p in model.parameters()) < 7.9e9


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"name": "qwen9-1b"}, "unknown model 'qwen9-1b'"),
        ({"name": "tiny-qwen2", "dtype": "float16"}, "float16 is not supported on the CPU"),
        ({"name": "tiny-qwen2", "dtype": "int3"}, "unknown dtype 'int3'"),
        ({"name": "tiny-qwen2", "device": "cuda"}, "CUDA is not available"),
    ],
)
def test_bad_model_params_are_clear_errors(kwargs, fragment):
    if "cuda" in kwargs.get("device", "") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ModelError, match=fragment):
        build_model(**kwargs)


def test_registry_entries_skip_notes_and_each_random_weight_model_has_a_published_config():
    raw = json.loads(models.REGISTRY.read_text())
    assert set(registry()) == {name for name in raw if not name.startswith("_")}
    for name in known_models():
        if model_entry(name).tokenizer != "gguf":  # a GGUF model's config is read from its file
            assert published_config(name) == model_config(name), name
    assert model_entry("qwen2.5-coder-1.5b").eos_ids == tuple(raw["qwen2.5-coder-1.5b"]["eos_ids"])
    with pytest.raises(ModelError, match="unknown model '_doc'"):
        published_config("_doc")
    # SmolLM2 loads its weights and config from its GGUF; its published config sizes it before loading (M4)
    assert published_config("smollm2-135m")["vocab_size"] == 49152


@pytest.mark.parametrize("name, label", [
    ("qwen2.5-1.5b", "qwen2.5-1.5b"),
    ("meta-llama/Llama-3.2-1B", "llama-3.2-1b"),
    ("/models/My Model (v2)/", "my-model-v2"),
    ("/models/...", "model"),
])
def test_model_label_is_the_registered_name_or_the_last_path_part(name, label):
    assert model_label(name) == label


def test_auto_config_refuses_a_folder_without_config_and_a_bare_unknown_name(tmp_path):
    with pytest.raises(ModelError, match="has no config.json"):
        auto_config(str(tmp_path))
    with pytest.raises(ModelError, match="unknown model 'qwen9'; known: .*or give a folder"):
        model_config("qwen9")
    with pytest.raises(ModelError, match="unknown model './absent'"):
        auto_config("./absent")


def test_auto_config_reads_a_folder_and_records_its_source(tmp_path):
    raw = published_config("tiny-qwen2")
    raw.pop("_source", None)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    config = model_config(str(tmp_path))
    assert config["_source"] == str(tmp_path) and config["hidden_size"] == raw["hidden_size"]


def test_eos_ids_come_from_the_registry_else_from_the_tokenizer():
    assert eos_ids("qwen2.5-coder-1.5b", SimpleNamespace(eos_token_id=1)) == (151643, 151645)
    assert eos_ids("smollm2-135m", SimpleNamespace(eos_token_id=2)) == (2,)
    with pytest.raises(ModelError, match="smollm2-135m: the registry gives no EOS ids and its tokenizer has no eos_token_id"):
        eos_ids("smollm2-135m", SimpleNamespace(eos_token_id=None))


def fake_model(rows: int, forward=None) -> SimpleNamespace:
    """What check_vocabulary and cache_kwarg read of a model: its embedding rows, its forward()."""
    embeddings = SimpleNamespace(weight=SimpleNamespace(shape=(rows, 8)))
    return SimpleNamespace(get_input_embeddings=lambda: embeddings, forward=forward)


def test_a_vocabulary_smaller_than_the_tokenizer_is_refused():
    lm = SimpleNamespace(name="toy", model=fake_model(300))
    check_vocabulary(lm, [0] * 300)
    with pytest.raises(ModelError, match="toy: its vocabulary \\(300 embedding rows\\) is smaller than "
                                         "its tokenizer's \\(301 ids\\)"):
        check_vocabulary(lm, [0] * 301)


def test_cache_kwarg_follows_the_forward_signature():
    def old(input_ids, past_key_values=None): ...

    def renamed(input_ids, cache=None): ...

    def both(input_ids, cache=None, past_key_values=None): ...

    assert cache_kwarg(SimpleNamespace(forward=old)) == "past_key_values"
    assert cache_kwarg(SimpleNamespace(forward=renamed)) == "cache"
    assert cache_kwarg(SimpleNamespace(forward=both)) == "past_key_values"
