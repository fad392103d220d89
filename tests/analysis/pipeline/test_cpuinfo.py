"""analysis.pipeline.cpuinfo: the one /proc/cpuinfo reader, shared by the kernel profile's machine record and the
reports' provenance line."""

from analysis.pipeline.cpuinfo import CpuInfo, parse_cpuinfo, read_cpuinfo
from analysis.present.provenance import cpu_model

X86 = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu avx2 avx512f
processor\t: 1
model name\t: something else
flags\t\t: fpu
"""
ARM = """processor\t: 0
BogoMIPS\t: 48.00
processor\t: 1
Hardware\t: BCM2835
"""


def test_the_first_processor_names_the_cpu_and_every_processor_counts():
    assert parse_cpuinfo(X86) == CpuInfo("Intel(R) Xeon(R) Platinum 8480+", frozenset({"fpu", "avx2", "avx512f"}), 2)


def test_an_arm_cpu_is_named_by_its_hardware_line():
    assert parse_cpuinfo(ARM) == CpuInfo("BCM2835", frozenset(), 2)


def test_provenance_and_the_machine_record_read_the_same_model(tmp_path):
    from kernels_profile.measure.machine import machine_info

    path = tmp_path / "cpuinfo"
    path.write_text(X86)
    assert cpu_model(path) == "Intel(R) Xeon(R) Platinum 8480+, 2 logical cores"
    assert machine_info(X86)["cpu_model"] == read_cpuinfo(path).model


def test_no_cpuinfo_file_is_none(tmp_path):
    assert read_cpuinfo(tmp_path / "absent") is None
