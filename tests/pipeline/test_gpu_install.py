"""M6: the documented GPU install resolves: the torch pin accepts a CUDA build of its version (checked on a
CPU machine, with pip resolving against stand-in wheels in a temporary folder: nothing is downloaded)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile

import pytest
from fixtures import ROOT
from packaging.requirements import Requirement


def torch_pin() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [Requirement(d) for d in deps if Requirement(d).name == "torch"]
    return pin


def documented_torch() -> str:
    (command,) = re.findall(r'pip install "(torch==[^"]+)" --index-url', (ROOT / "docs/gpu.md").read_text())
    return command


def test_the_pin_accepts_every_build_of_its_version_only():
    pin = torch_pin()
    (version,) = [s.version for s in pin.specifier]
    for build in ("+cpu", "+cu126", "+cu130", ""):
        assert pin.specifier.contains(version + build), build
    assert not pin.specifier.contains("2.14.0+cu130")
    documented = Requirement(documented_torch())
    (doc_version,) = [s.version for s in documented.specifier]
    assert pin.specifier.contains(doc_version) and "+cu" in doc_version


def _stand_in_wheel(folder, version: str) -> None:
    name = f"torch-{version}.dist-info"
    with zipfile.ZipFile(folder / f"torch-{version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{name}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        wheel.writestr(f"{name}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{name}/RECORD", "")


@pytest.mark.parametrize("requirement", ["pin", "documented"])
def test_pip_resolves_the_pin_and_the_documented_command_to_a_cuda_build(tmp_path, requirement):
    for version in ("2.13.0+cu130", "2.14.0+cu130"):
        _stand_in_wheel(tmp_path, version)
    wanted = str(torch_pin()) if requirement == "pin" else documented_torch()
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--no-index",
                           "--find-links", str(tmp_path), "--no-deps", "--ignore-installed", "--report", str(report),
                           "--quiet", wanted], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 0, done.stderr
    (install,) = json.loads(report.read_text())["install"]
    assert install["metadata"]["version"] == "2.13.0+cu130"
