"""`copydecode kernels profile`: raw AR and prefill timings (resumable) -> data/kernels/raw.parquet,
or a preset's own output (e.g. `--preset paper-gpu` -> reports/kernels/frozen/paper-gpu.parquet).

`settings(params, preset, out)` is the only reader of `kernels.profile` (and of `kernels.presets`
when a preset is named); `run(settings)` measures. Every ProfileSpec field comes from params.yaml:
the spec has no defaults, so no value in code decides a run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.layout import KERNEL_CHECKPOINTS, KERNELS_RAW
from analysis.params import merge_preset
from analysis.stages.common import timed
from kernels_profile.profiler import ProfileSpec

DEVICES = ("cpu", "cuda")
LIST_FIELDS = ("models", "contexts", "ns", "baselines", "prefills")


@dataclass(frozen=True)
class ProfileSettings:
    spec: ProfileSpec
    out: Path              # the raw timings parquet (its environment sidecar goes beside it)
    preset: str | None     # the kernels.presets entry overlaid on kernels.profile, if any


def settings(params: dict[str, Any], preset: str | None = None, out: str | Path | None = None) -> ProfileSettings:
    """kernels.profile, overlaid with `preset` when one is named, validated into a ProfileSpec; the raw
    file is `out` when given, else the preset's `out` (default data/kernels/<preset>.parquet), else
    data/kernels/raw.parquet."""
    group = merge_preset(params, "kernels.profile", "kernels.presets", preset)
    named_out = KERNELS_RAW if preset is None else Path(group.pop("out", f"data/kernels/{preset}.parquet"))
    return ProfileSettings(spec_of(group), Path(out) if out else named_out, preset)


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


def run(s: ProfileSettings) -> dict:
    from kernels_profile.profiler import profile_run, write_profile

    with timed("kernels_profile") as timing:
        result = profile_run(s.spec, KERNEL_CHECKPOINTS)
        sidecar = write_profile(result, s.out)
        timing["from_scratch_s"] = result.from_scratch_s
    env = result.environment
    return {"rows": result.raw.height, "out": str(s.out), "environment": str(sidecar), "noisy": env.get("noisy"),
            "noisy_pairs": env.get("noisy_pairs"), "noisy_reasons": env.get("noisy_reasons"),
            "contended": env.get("contended"), "other_busy_cores": env.get("other_busy_cores"),
            "threads": env.get("threads"), "spec": asdict(s.spec)}
