"""analysis.present.provenance: the run's provenance (versions, params hash, commit, CPU model; never importing
torch) and its kernel line: each kernel source named with its own device, threads and versions."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from fixtures import ROOT

from analysis.present import notebook as present
from analysis.present.provenance import frozen_versions, kernel_provenance, kernel_provenance_text

ENVIRONMENT_TXT = """Mon Nov 30 02:25:12 PM UTC 2026
name, memory.total [MiB], driver_version, clocks.max.sm [MHz]
NVIDIA H200, 143771 MiB, 580.159.04, 1980 MHz
2.11.0+cu130 5.17.0 2.1.0 NVIDIA H200
16
model name	: Intel(R) Xeon(R) Processor
"""


def _doc() -> dict:
    models = [{"model": "qwen2.5-0.5b", "dtype": "float32", "device": "cpu"},
              {"model": "qwen2.5-7b", "dtype": "bfloat16", "device": "cuda"}]
    return {"models": models,
            "environment": [{"device_name": "AMD EPYC", "threads": 1, "torch_version": "2.13.0+cpu",
                             "transformers_version": "5.24.0"}],
            "frozen_environment": {"h200": {"threads": [16], "machine": {"cpu_model": "Intel(R) Xeon(R) Processor"},
                                            "spec": {"models": ["qwen2.5-7b"], "dtype": "bfloat16", "device": "cuda"}}}}


def test_each_kernel_source_names_its_own_machine_and_versions(tmp_path):
    (tmp_path / "h200").mkdir()
    (tmp_path / "h200" / "environment.txt").write_text(ENVIRONMENT_TXT)
    items = {p.source: p for p in kernel_provenance(_doc(), tmp_path)}
    assert items["fit"].setups == "qwen2.5-0.5b float32 cpu" and items["fit"].torch == "2.13.0+cpu"
    assert items["h200"].setups == "qwen2.5-7b bfloat16 cuda" and items["h200"].torch == "2.11.0+cu130"
    assert items["h200"].device.startswith("NVIDIA H200") and items["h200"].threads == "16"
    text = kernel_provenance_text(list(items.values()))
    h200 = text.split("; h200, ")[1]
    assert "AMD EPYC" not in h200 and "+cpu" not in h200 and "1 thread" not in h200
    assert text.startswith("Kernel timings: fit, qwen2.5-0.5b float32 cpu on AMD EPYC, 1 thread, torch 2.13.0+cpu")


def test_a_frozen_source_without_its_environment_file_says_not_recorded(tmp_path):
    items = {p.source: p for p in kernel_provenance(_doc(), tmp_path)}
    assert items["h200"].torch == "not recorded" and frozen_versions(tmp_path / "absent.txt") == {}


# ---------------------------------------------------------------- provenance


def test_cpu_model_comes_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n\nprocessor\t: 1\nmodel name\t: Test CPU 9000\n")
    assert present.cpu_model(info) == "Test CPU 9000, 2 logical cores"


def test_provenance_reads_recorded_versions_and_hashes_params(tmp_path):
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    model = tmp_path / "latency_model.json"
    model.write_text(json.dumps({"environment": [{"torch_version": "9.9", "transformers_version": "8.8"}]}))
    prov = present.provenance(tmp_path, params=present.DEFAULT_PARAMS, model_path=model.relative_to(tmp_path))
    assert (prov.torch, prov.transformers) == ("9.9", "8.8")
    assert prov.params_sha256 == hashlib.sha256(b"seed: 1\n").hexdigest()
    assert prov.commit.startswith("unknown") and prov.machine
    model.unlink()
    assert "installed packages" in present.provenance(tmp_path, model_path=model.relative_to(tmp_path)).versions_from


def test_provenance_hashes_the_params_file_in_use(tmp_path, monkeypatch):
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    other = tmp_path / "other.yaml"
    other.write_text("seed: 2\n")
    monkeypatch.setenv(present.PARAMS_ENV, str(other))
    prov = present.provenance(tmp_path)
    assert prov.params_sha256 == hashlib.sha256(b"seed: 2\n").hexdigest() and prov.params_file == str(other)
    assert "seed: 2" not in present.provenance_html(prov).text and str(other) in present.provenance_html(prov).text
    monkeypatch.delenv(present.PARAMS_ENV)
    assert present.provenance(tmp_path).params_sha256 == hashlib.sha256(b"seed: 1\n").hexdigest()


def test_provenance_names_the_commit_and_what_differs_from_it():
    from analysis.present.provenance import commit_text

    assert commit_text("abc", []) == "abc"
    outputs_only = commit_text("abc", ["reports/tables/bounds.csv", "dvc.lock", "README.md"])
    assert "uncommitted changes" not in outputs_only and "outputs" in outputs_only
    changed = commit_text("abc", ["reports/index.html", "analysis/bounds.py"])
    assert "1 source file(s): analysis/bounds.py" in changed


def test_provenance_never_imports_torch():
    code = ("import sys; from analysis.present import provenance; provenance.provenance(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_render_date_follows_source_date_epoch(monkeypatch):
    """L1: every page carried the minute it was rendered, so two renders of one run differed."""
    from analysis.present.provenance import render_date

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert render_date() == "2023-11-14 22:13 UTC"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert render_date().endswith("UTC")
