"""`copydecode kernels profile`: raw AR and prefill timings (resumable) -> data/kernels/raw.parquet,
or a preset's own output (e.g. `--preset paper-gpu` -> reports/kernels/frozen/paper-gpu.parquet).

`settings(params, preset, out, ...)` is the only reader of `kernels.profile` (and of `kernels.presets`
when a preset is named); `run(settings)` measures. Every ProfileSpec field comes from params.yaml:
the spec has no defaults, so no value in code decides a run.

Your own model: `--model HF_ID_OR_DIR` (any transformers causal LM; a folder with a config.json or a hub
id, no registry entry) with `--device`, `--dtype`, `--contexts`, `--ns` and `--weights random|real`
overriding those params for one run. Its raw timings go to data/kernels/<source>.parquet, where the
kernel source is `<model label>-<device>` (e.g. `llama-3.2-1b-cuda`); to fit it and use it in the
bounds, add `{source: <source>, path: data/kernels/<source>.parquet}` to `kernels.fit.raw` (the run
prints that entry) and `<source>/<model label>/<AR loop>` to `kernel.sources`.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.layout import KERNEL_CHECKPOINTS, KERNELS_RAW
from analysis.pipeline.confine import OutputRootError, confined
from analysis.pipeline.params import merge_preset
from analysis.parallel.progress import timed
from kernels_profile.measure.profiler import ProfileSpec
from analysis.latency.tables import speedup_summary
from analysis.pipeline.console import RUN_NAME_KEY
from analysis.pipeline.io import markdown_table
from kernels_profile.measure.session import profile_run
from kernels_profile.measure.sidecar import write_with_sidecar
from kernels_profile.runtime.models import model_label

WEIGHTS_CHOICES = ("random", "real")  # --weights: random from the model's config, or its own weights

DEVICES = ("cpu", "cuda")
STAGE_NAME = "kernels_profile"  # dvc.yaml's name of the pipeline's own profile
LIST_FIELDS = ("models", "contexts", "ns", "baselines", "prefills")


@dataclass(frozen=True)
class ProfileSettings:
    spec: ProfileSpec
    out: Path              # the raw timings parquet (its environment sidecar goes beside it)
    preset: str | None     # the kernels.presets entry overlaid on kernels.profile, if any
    source: str | None     # --model: the kernel source this run becomes (`<model label>-<device>`), else None

    @property
    def run_name(self) -> str:
        """What its run time and summary are filed under: the stage's own name for the pipeline's profile, else
        the raw file's stem (an own-model, preset or --out profile is not the stage's run: `copydecode readme` must
        not take its time for the pipeline's)."""
        own = self.preset is None and self.source is None and self.out == KERNELS_RAW
        return STAGE_NAME if own else f"{STAGE_NAME}-{self.out.stem}"


def kernel_source_name(model: str, device: str) -> str:
    """The kernel source of a --model run: the model's label and the device (`llama-3.2-1b-cuda`)."""
    return f"{model_label(model)}-{device}"


def _numbers(text: str | list | tuple | None, option: str) -> list[int] | None:
    """--contexts/--ns: integers given as `256,2048`, `256 2048` or a list of those."""
    if text is None:
        return None
    parts = [text] if isinstance(text, str) else list(text)
    items = [p for part in parts for p in str(part).replace(",", " ").split()]
    try:
        return [int(p) for p in items]
    except ValueError:
        raise ParamsError(f"{option} takes integers (e.g. {option} 256,2048), got {' '.join(items)!r}") from None


def command_line(group: dict[str, Any], model: str | None, device: str | None, dtype: str | None,
                 contexts, ns, weights: str | None) -> dict[str, Any]:
    """The params group with the command line's --model/--device/--dtype/--contexts/--ns/--weights."""
    if weights is not None and weights not in WEIGHTS_CHOICES:
        raise ParamsError(f"--weights must be one of {', '.join(WEIGHTS_CHOICES)}, got {weights!r}")
    if model is not None and not model.strip():  # an unset `--model "$MODEL"` must not time params' model
        raise ParamsError("--model is empty; name a model folder or hub id (or leave --model out to profile "
                          "params kernels.profile.models)")
    if weights == "real" and model is None:
        raise ParamsError("--weights real loads the weights of --model; name the model (a folder or hub id)")
    over = {"models": [model] if model is not None else None, "device": device, "dtype": dtype,
            "contexts": _numbers(contexts, "--contexts"), "ns": _numbers(ns, "--ns"), "weights": weights}
    return {**group, **{k: v for k, v in over.items() if v is not None}}


# `copydecode kernels profile`: its help line and what it reads and writes (the CLI's --help)
HELP = "time AR steps vs one parallel prefill"
READS_WRITES = ("reads params kernels.profile (or --preset) and the model's config or weights; writes "
                "data/kernels/raw.parquet and data/kernels/raw.environment.json (or --out FILE and its sidecar)")
OWN_OUT = "names the raw timings file"  # its --out (a one-off output root is refused)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`kernels profile`'s own options (settings(params, preset, out, model, device, dtype, contexts, ns,
    weights)); `out` is `--out`, read by the CLI as raw_out."""
    parser.add_argument("--preset", default=None, help="a preset from params kernels.presets (e.g. paper-gpu)")
    parser.add_argument("--out", default=argparse.SUPPRESS, dest="raw_out", metavar="FILE",
                        help="raw timings parquet (default: the preset's or params'); a one-off output root is not "
                             "supported here")
    parser.add_argument("--model", default=None, metavar="HF_ID_OR_DIR",
                        help="any transformers causal LM: a folder with a config.json or a hub id (no registry "
                             "entry); the run becomes the kernel source <model>-<device>, written to "
                             "data/kernels/<model>-<device>.parquet (add it to params kernels.fit.raw to fit it)")
    parser.add_argument("--device", default=None, choices=DEVICES, help="default: params")
    parser.add_argument("--dtype", default=None, choices=("bfloat16", "float32", "float16"), help="default: params")
    parser.add_argument("--contexts", default=None, nargs="+", metavar="C",
                        help="KV-cache lengths, e.g. --contexts 256 2048 (default: params)")
    parser.add_argument("--ns", default=None, nargs="+", metavar="N",
                        help="copy lengths N, e.g. --ns 1 8 64 512 (default: params)")
    parser.add_argument("--weights", default=None, choices=WEIGHTS_CHOICES,
                        help="random: weights drawn for the model's config (timing does not depend on them); "
                             "real: the model's own weights (from_pretrained) (default: params)")


def settings(params: dict[str, Any], preset: str | None = None, out: str | Path | None = None,
             model: str | None = None, device: str | None = None, dtype: str | None = None,
             contexts=None, ns=None, weights: str | None = None) -> ProfileSettings:
    """kernels.profile, overlaid with `preset` when one is named and then with the command line's
    options, validated into a ProfileSpec; the raw file is `out` when given, else (with --model)
    data/kernels/<source>.parquet, else the preset's `out` (default data/kernels/<preset>.parquet),
    else data/kernels/raw.parquet."""
    group = merge_preset(params, "kernels.profile", "kernels.presets", preset)
    named_out = KERNELS_RAW if preset is None else Path(group.pop("out", f"data/kernels/{preset}.parquet"))
    group = command_line(group, model, device, dtype, contexts, ns, weights)
    spec = spec_of(group)
    source = None
    if model is not None:
        source = kernel_source_name(model, spec.device)
        named_out = KERNELS_RAW.parent / f"{source}.parquet"
    raw = Path(out) if out else named_out
    try:  # a preset's `out` (params) and --out: the raw file and its sidecar stay inside the tree
        confined(raw, "the raw timings file")
    except OutputRootError as exc:
        raise ParamsError(f"{exc} (kernels profile --out / the preset's out: give a path under this folder)") from None
    return ProfileSettings(spec, raw, preset, source)


def spec_of(group: dict[str, Any]) -> ProfileSpec:
    """A validated ProfileSpec from exactly its fields (lists become tuples)."""
    if group.get("device") not in DEVICES:
        raise ParamsError(f"kernels.profile.device must be one of {', '.join(DEVICES)}, got {group.get('device')!r}")
    fields = set(ProfileSpec.__dataclass_fields__)
    unknown = set(group) - fields
    if unknown:
        raise ParamsError(f"kernels.profile: unknown settings {sorted(unknown)}; known: {sorted(fields)}")
    missing = fields - set(group)
    if missing:  # every setting comes from params.yaml
        raise ParamsError(f"kernels.profile: missing settings {sorted(missing)}")
    values = dict(group)
    for name in LIST_FIELDS:
        if not isinstance(values[name], list):
            raise ParamsError(f"kernels.profile.{name} must be a list, got {values[name]!r}")
        values[name] = tuple(values[name])
    return ProfileSpec(**values).validate()


def print_result_table(raw, out, env: dict) -> None:
    """The run's answer on the terminal (stderr): T_ar, T_prefill and their ratio per point measured, so the
    command ends with its result (a fit and the bounds come after, from params kernels.fit.raw)."""
    import sys

    noisy = f" NOISY ({'; '.join(env.get('noisy_reasons') or [])})" if env.get("noisy") else ""
    print(f"\nkernels profile: T_ar(N) / T_prefill(N) measured here, medians over paired repeats{noisy} "
          f"(raw timings: {out}):\n" + markdown_table(speedup_summary(raw), digits=3), file=sys.stderr)


def run(s: ProfileSettings) -> dict:
    with timed(s.run_name) as timing:
        result = profile_run(s.spec, KERNEL_CHECKPOINTS)
        sidecar = write_with_sidecar(result.raw, result.environment, s.out, "kernels_profile")
        timing["from_scratch_s"] = result.from_scratch_s
    env = result.environment
    print_result_table(result.raw, s.out, env)
    return {"rows": result.raw.height, "out": str(s.out), "environment": str(sidecar), "noisy": env.get("noisy"),
            "noisy_pairs": env.get("noisy_pairs"), "noisy_reasons": env.get("noisy_reasons"),
            "contended": env.get("contended"), "other_busy_cores": env.get("other_busy_cores"),
            "threads": env.get("threads"), "spec": asdict(s.spec),
            **({RUN_NAME_KEY: s.run_name} if s.run_name != STAGE_NAME else {}),
            **({"kernel_source": s.source, "add_to_kernels_fit_raw": {"source": s.source, "path": str(s.out)}}
               if s.source else {})}
