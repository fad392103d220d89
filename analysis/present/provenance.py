"""Provenance: where a report's figures come from (the commit, the params file actually used, the
machine and the library versions), shown at the foot of every page."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from analysis.pipeline.cpuinfo import CPUINFO, read_cpuinfo
from analysis.pipeline.digest import file_digest
from analysis.latency.names import FIT_SOURCE
from analysis.layout import LATENCY_MODEL
from analysis.present.pages import Html, esc
from analysis.pipeline.params import DEFAULT_PARAMS
from analysis.pipeline.repo import git_state


@dataclass(frozen=True)
class Provenance:
    commit: str
    date: str
    machine: str
    torch: str
    transformers: str
    versions_from: str
    params_file: str
    params_sha256: str


# The params file a run actually uses: the reports stage sets this for the notebooks it renders
# (papermill kernels inherit the environment), so a `--params` file is hashed, not ./params.yaml.
PARAMS_ENV = "COPYDECODE_PARAMS"
# Tracked paths a pipeline run rewrites: changes there are the run's own outputs, not the code's.
RUN_OUTPUTS = ("reports/", "dvc.lock", "README.md")


def params_in_use(params: Path | None = None) -> Path:
    """`params` when given, else the file named by $COPYDECODE_PARAMS, else ./params.yaml."""
    if params is not None:
        return Path(params)
    return Path(os.environ[PARAMS_ENV]) if os.environ.get(PARAMS_ENV) else DEFAULT_PARAMS


def commit_text(head: str, changed: list[str]) -> str:
    """The commit, and honestly what differs from it: uncommitted source changes by name, or only
    this run's own outputs (reports/, dvc.lock, the README's generated block)."""
    source = [p for p in changed if not p.startswith(RUN_OUTPUTS)]
    if source:
        shown = ", ".join(source[:3]) + (f" and {len(source) - 3} more" if len(source) > 3 else "")
        return f"{head} with uncommitted changes to {len(source)} source file(s): {shown}"
    if changed:
        return f"{head} (code as committed; this run's outputs under reports/ not yet committed)"
    return head


def _git_commit(root: Path) -> str:
    """The page foot's commit line, from the working tree's state (analysis.pipeline.repo)."""
    state = git_state(root)
    if state.error is not None:
        return f"unknown (git: {state.error})"
    if state.commit is None:
        return "unknown (not a git checkout)"
    return commit_text(state.commit[:12], list(state.changed or ()))


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name and logical core count ('AMD EPYC 7B13, 2 cores'), not the architecture."""
    cpu = read_cpuinfo(cpuinfo)
    if cpu is not None and cpu.model:
        return f"{cpu.model}, {cpu.processors} logical cores"
    return platform.processor() or f"unknown CPU ({platform.machine()})"


def _recorded_versions(model_path: Path) -> tuple[str, str, str] | None:
    """torch/transformers as recorded beside the kernel timings (the environment that made them)."""
    if not Path(model_path).is_file():
        return None
    env = json.loads(Path(model_path).read_text()).get("environment") or []
    torch = sorted({str(e["torch_version"]) for e in env if e.get("torch_version")})
    transformers = sorted({str(e["transformers_version"]) for e in env if e.get("transformers_version")})
    if not torch or not transformers:
        return None
    return ", ".join(torch), ", ".join(transformers), f"recorded with the kernel timings ({model_path})"


def _installed(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def render_date() -> str:
    """When the page was rendered: now, or $SOURCE_DATE_EPOCH (the reproducible-builds convention) when set,
    so two renders of the same outputs are byte for byte the same page."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch.isdigit() else datetime.now(timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def provenance(root: Path = Path("."), params: Path | None = None, model_path: Path = LATENCY_MODEL) -> Provenance:
    """Where the figures come from. The params file is the one in use (`params_in_use`). Versions are
    read from the timing files' recorded environment when present, else from the installed packages'
    metadata (never by importing torch)."""
    root = Path(root)
    used = params_in_use(params)
    params_file = used if used.is_absolute() else root / used
    digest = file_digest(params_file) if params_file.is_file() else f"no {used}"
    recorded = _recorded_versions(root / model_path)
    torch, transformers, source = recorded or (_installed("torch"), _installed("transformers"),
                                               "installed packages (no recorded environment)")
    return Provenance(
        commit=_git_commit(root),
        date=render_date(),
        machine=cpu_model(),
        torch=torch,
        transformers=transformers,
        versions_from=source,
        params_file=str(used),
        params_sha256=digest,
    )


# the libraries a run's figures depend on, versioned in reports/claims.json's provenance block
VERSIONED = ("copydecode", "torch", "transformers", "tokenizers", "polars", "numpy", "scipy", "altair", "papermill",
             "dvc", "llguidance")


def provenance_block(root: Path = Path("."), params: Path | None = None) -> dict:
    """reports/claims.json's provenance, as lm-eval's results JSON carries it: the bare commit (`git_hash`) and
    what differs from it, the params file and its sha256, the date, the machine, the Python and library versions
    (installed; torch and transformers also as recorded beside the kernel timings)."""
    prov = provenance(root, params)
    state = git_state(root)
    return {"git_hash": state.commit, "commit": prov.commit, "date": prov.date, "machine": prov.machine,
            "params_file": prov.params_file, "params_sha256": prov.params_sha256,
            "python": platform.python_version(), "versions": {name: _installed(name) for name in VERSIONED},
            "kernel_timing_versions": {"torch": prov.torch, "transformers": prov.transformers,
                                       "from": prov.versions_from}}


def provenance_html(prov: Provenance | None = None) -> Html:
    prov = prov or provenance()
    labels = {"commit": "git commit", "date": "rendered", "machine": "machine", "torch": "torch",
              "transformers": "transformers", "versions_from": "versions from", "params_file": "params file",
              "params_sha256": "params file sha256"}
    rows = "".join(f"<tr><th>{esc(labels[f.name])}</th><td>{esc(getattr(prov, f.name))}</td></tr>" for f in fields(prov))
    return Html(f"<div class='cd-provenance'><h2>Provenance</h2><table class='cd-prov'>{rows}</table></div>")



# ---------------------------------------------------------------- kernel timings: each source's own machine


@dataclass(frozen=True)
class KernelSourceProvenance:
    """Where one kernel source's timings were measured: its own device, host, threads and library versions
    (this run's CPU profile from the latency model's recorded environment; a frozen GPU source from its
    own sidecar and environment.txt), never another source's."""

    source: str
    setups: str
    device: str
    threads: str
    torch: str
    transformers: str


NOT_RECORDED = "not recorded"


def _joined(values) -> str:
    values = sorted({str(v) for v in values if v not in (None, "")})
    return ", ".join(values) if values else NOT_RECORDED


def frozen_versions(environment_txt: Path) -> dict[str, str]:
    """torch, transformers and the GPU name from a frozen source's environment.txt (nvidia-smi's CSV,
    then a line 'torch transformers polars gpu-name'); {} when the file is absent."""
    if not Path(environment_txt).is_file():
        return {}
    lines = [ln.strip() for ln in Path(environment_txt).read_text(errors="replace").splitlines() if ln.strip()]
    out: dict[str, str] = {}
    for i, line in enumerate(lines):
        if line.startswith("name,") and i + 1 < len(lines):
            out["gpu"] = lines[i + 1].split(",")[0].strip()
        parts = line.split()
        if len(parts) >= 4 and parts[0][:1].isdigit() and parts[1][:1].isdigit() and "." in parts[0]:
            out.setdefault("torch", parts[0])
            out.setdefault("transformers", parts[1])
    return out


def kernel_provenance(lm: dict, frozen_root: Path) -> list[KernelSourceProvenance]:
    """Per kernel source in a latency-model document: the setups it measured and its own machine and
    versions. This run's profile (`fit`) reads the document's `environment`; each frozen source the
    document names under `frozen_environment` reads its own sidecar and `<frozen_root>/<name>/environment.txt`."""
    frozen = lm.get("frozen_environment") or {}
    frozen_setups: dict[str, set[str]] = {}
    claimed: set[tuple[str, str]] = set()
    for name, env in frozen.items():
        spec = (env or {}).get("spec") or {}
        frozen_setups[name] = {f"{m} {spec.get('dtype', '?')} {spec.get('device', '?')}" for m in spec.get("models", [])}
        claimed |= {(m, spec.get("device")) for m in spec.get("models", [])}
    models = lm.get("models", lm.get("fits", []))
    own = {f"{f['model']} {f['dtype']} {f['device']}" for f in models if (f["model"], f["device"]) not in claimed}
    out = []
    env = lm.get("environment") or []
    if own:
        out.append(KernelSourceProvenance(
            FIT_SOURCE, ", ".join(sorted(own)), _joined(e.get("device_name") for e in env),
            _joined(e.get("threads") for e in env), _joined(e.get("torch_version") for e in env),
            _joined(e.get("transformers_version") for e in env)))
    for name in sorted(frozen):
        sidecar = frozen[name] or {}
        machine = sidecar.get("machine") or {}
        versions = frozen_versions(Path(frozen_root) / name / "environment.txt")
        host = machine.get("cpu_model")
        device = versions.get("gpu", NOT_RECORDED) + (f" ({host} host)" if host else "")
        out.append(KernelSourceProvenance(
            name, ", ".join(sorted(frozen_setups[name])) or NOT_RECORDED, device,
            _joined(sidecar.get("threads") or [machine.get("torch_threads")]),
            versions.get("torch", NOT_RECORDED), versions.get("transformers", NOT_RECORDED)))
    return out


def kernel_provenance_text(items: list[KernelSourceProvenance]) -> str:
    """'Kernel timings: fit, qwen2.5-0.5b float32 cpu on AMD EPYC, 1 thread, torch 2.13.0+cpu; h200, ...'."""
    if not items:
        return ""

    def one(p: KernelSourceProvenance) -> str:
        threads = f"{p.threads} thread{'' if p.threads == '1' else 's'}" if p.threads != NOT_RECORDED else "threads not recorded"
        return (f"{p.source}, {p.setups} on {p.device}, {threads}, torch {p.torch}"
                + (f", transformers {p.transformers}" if p.transformers != NOT_RECORDED else ""))

    return "Kernel timings: " + "; ".join(one(p) for p in items) + "."
