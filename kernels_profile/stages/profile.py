"""`copydecode kernels profile`: raw AR and prefill timings (resumable) -> data/kernels/raw.parquet,
or a preset's own output (e.g. `--preset paper-gpu` -> reports/kernels/frozen/paper-gpu.parquet)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.config import Config
from analysis.errors import ParamsError
from analysis.layout import KERNEL_CHECKPOINTS, KERNELS_RAW
from analysis.params import get
from analysis.stages.common import timed

DEVICES = ("cpu", "cuda")


def profile_settings(params: dict[str, Any], preset: str | None) -> tuple[dict[str, Any], Path]:
    """kernels.profile, overlaid with a preset when one is named, and where its timings go."""
    settings = dict(get(params, "kernels.profile", dict))
    out = KERNELS_RAW
    if preset is not None:
        presets = get(params, "kernels.presets", dict)
        if preset not in presets:
            raise ParamsError(f"unknown preset {preset!r}; known: {', '.join(presets)}")
        settings.update(presets[preset])
        out = Path(settings.pop("out", f"data/kernels/{preset}.parquet"))
    if settings.get("device") not in DEVICES:
        raise ParamsError(f"kernels.profile.device must be one of {', '.join(DEVICES)}, got {settings.get('device')!r}")
    return settings, out


def profile_spec(params: dict[str, Any], preset: str | None):
    from kernels_profile.profiler import ProfileSpec

    settings, out = profile_settings(params, preset)
    fields = set(ProfileSpec.__dataclass_fields__)
    unknown = set(settings) - fields
    if unknown:
        raise ParamsError(f"kernels.profile: unknown settings {sorted(unknown)}; known: {sorted(fields)}")
    missing = fields - set(settings)
    if missing:  # every setting comes from params.yaml: ProfileSpec's own defaults never decide a run
        raise ParamsError(f"kernels.profile: missing settings {sorted(missing)}")
    for name in ("models", "contexts", "ns", "baselines", "prefills"):
        if name in settings:
            if not isinstance(settings[name], list):
                raise ParamsError(f"kernels.profile.{name} must be a list, got {settings[name]!r}")
            settings[name] = tuple(settings[name])
    try:
        spec = ProfileSpec(**settings)
    except TypeError as exc:
        raise ParamsError(f"kernels.profile: {exc}") from exc
    return spec.validate(), out


def run(cfg: Config, args=None) -> dict:
    from kernels_profile.profiler import profile_run, write_profile

    spec, out = profile_spec(cfg.params, getattr(args, "preset", None))
    if getattr(args, "out", None):
        out = Path(args.out)
    with timed("kernels_profile") as timing:
        result = profile_run(spec, KERNEL_CHECKPOINTS)
        sidecar = write_profile(result, out)
        timing["from_scratch_s"] = result.from_scratch_s
    env = result.environment
    return {"rows": result.raw.height, "out": str(out), "environment": str(sidecar), "noisy": env.get("noisy"),
            "noisy_pairs": env.get("noisy_pairs"), "noisy_reasons": env.get("noisy_reasons"),
            "contended": env.get("contended"), "other_busy_cores": env.get("other_busy_cores"),
            "threads": env.get("threads"), "spec": spec.__dict__}
