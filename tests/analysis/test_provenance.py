"""analysis.present.provenance's kernel line: each kernel source named with its own device, threads and versions."""

from __future__ import annotations

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
