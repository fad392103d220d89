"""The one reader of /proc/cpuinfo: the CPU's model name, its instruction-set flags and its logical
processors (for the kernel profile's machine record and the reports' provenance line)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuInfo:
    model: str              # the first processor's "model name" (ARM: "Hardware"); "" when neither is listed
    flags: frozenset[str]   # the first processor's "flags"
    processors: int         # "processor" entries: logical cores


def parse_cpuinfo(text: str) -> CpuInfo:
    """The CPU described by a /proc/cpuinfo text (the first processor's model name and flags)."""
    model = hardware = ""
    flags: frozenset[str] = frozenset()
    processors = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "hardware" and not hardware:
            hardware = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
        elif key == "processor":
            processors += 1
    return CpuInfo(model or hardware, flags, processors)


def read_cpuinfo(path: Path = CPUINFO) -> CpuInfo | None:
    """This machine's CPU, or None where there is no /proc/cpuinfo (not Linux)."""
    return parse_cpuinfo(path.read_text(errors="replace")) if path.is_file() else None
