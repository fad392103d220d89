"""What machine a timing was taken on: its CPU, and the probes that measure its speed.

A kernel ratio measured on a shared CPU moves with the CPU (AVX-512 bf16 or AVX2 only). This module
describes it and measures it; how quiet it stayed while a run measured (other processes' CPU use, the
reference workload's drift, the recorder around a run) is kernels_profile.measure.contention.

- `machine_info()`: CPU model and the instruction-set flags that change matmul speed (avx2, avx512f,
  avx512_bf16, amx_tile, amx_bf16), logical cores, the cores this process may use, torch's threads.
- `reference_workload()`: the wall time of a fixed small float32 matmul block. Its absolute value
  says little; its change between the start and the end of a run says whether the machine's
  speed moved underneath the measurement (kernels_profile.measure.contention.Drift).
- `stream_bandwidth()` and `matmul_throughput()`: the two roofline numbers of this machine (bytes/s a
  stream-like copy moves, float32 and bf16 matmul FLOP/s), which explain why a memory-bound decode
  step and a compute-bound prefill scale differently here and on a GPU.

Every measurement here takes well under 2 s; torch is imported inside functions.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analysis.pipeline.cpuinfo import CPUINFO, parse_cpuinfo
from analysis.errors import ParamsError
from analysis.pipeline.params import usable_cores

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
# The reference block: REFERENCE_INNER products of REFERENCE_SIZE^3 in float32 (about 2 GFLOP, ~10 ms at 200 GFLOP/s):
# long enough that perf_counter resolution and one-off cache misses do not dominate, short enough to
# run between every measured pair.
REFERENCE_SIZE = 256
REFERENCE_INNER = 64


# ---------------------------------------------------------------- machine description

def torch_thread_count() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def machine_info(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """CPU model, the flags that matter, core counts and torch's thread count, as plain values."""
    if cpuinfo_text is None:
        cpuinfo_text = CPUINFO.read_text(errors="replace") if CPUINFO.is_file() else ""
    cpu = parse_cpuinfo(cpuinfo_text)
    model, flags = cpu.model, cpu.flags
    return {
        "cpu_model": model or platform.processor() or platform.machine(),
        **{f"cpu_{flag}": flag in flags for flag in CPU_FLAGS},
        "cpu_flags": " ".join(f for f in CPU_FLAGS if f in flags),
        "logical_cores": os.cpu_count() or 1,
        "usable_cores": usable_cores(),
        "torch_threads": torch_thread_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def load_average() -> tuple[float, float, float]:
    """1-, 5- and 15-minute load averages (NaN where the OS has none)."""
    try:
        return tuple(float(x) for x in os.getloadavg())  # type: ignore[return-value]
    except (AttributeError, OSError):
        nan = float("nan")
        return (nan, nan, nan)


# ---------------------------------------------------------------- measurements

def _median_time(fn: Callable[[], Any], repeats: int, budget_s: float) -> float:
    """Median wall time of fn over `repeats` calls, stopping early (after at least 3) past budget_s."""
    fn()  # warm-up: first-call allocation and thread-pool start are not the machine's speed
    times: list[float] = []
    started = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 3 and time.perf_counter() - started > budget_s:
            break
    return statistics.median(times)


def reference_workload(budget_s: float = 0.5, repeats: int = 7, size: int = REFERENCE_SIZE,
                       inner: int = REFERENCE_INNER) -> float:
    """Median seconds of one fixed block (`inner` float32 size^3 matmuls) on torch's current threads."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen)
    b = torch.randn(size, size, generator=gen)
    out = torch.empty(size, size)

    def block() -> None:
        for _ in range(inner):
            torch.mm(a, b, out=out)

    with torch.inference_mode():
        return _median_time(block, repeats, budget_s)


GPU_REFERENCE_SIZE = 4096   # one fixed bf16 product on the GPU: 4096^3 x 2 FLOPs, ~0.1-1 ms on a current GPU
GPU_REFERENCE_INNER = 20


def gpu_reference_workload(device: str, budget_s: float = 0.5, repeats: int = 7, size: int = GPU_REFERENCE_SIZE,
                           inner: int = GPU_REFERENCE_INNER) -> float:
    """Median seconds of one fixed block (`inner` bf16 size^3 matmuls) on a CUDA device, timed with
    CUDA events: the GPU-side counterpart of reference_workload, so drift says something about the GPU
    (clocks, thermal state, other tenants) rather than about the host."""
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, generator=gen, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, generator=gen, device=device, dtype=torch.bfloat16)
    out = torch.empty(size, size, device=device, dtype=torch.bfloat16)

    def block() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            torch.mm(a, b, out=out)
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / 1000.0

    with torch.inference_mode():
        block()  # warm-up: cuBLAS picks its kernel
        times, spent = [], 0.0
        while len(times) < repeats and (spent < budget_s or len(times) < 3):
            times.append(block())
            spent += times[-1]
    return float(statistics.median(times))


NVIDIA_SMI_FIELDS = ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu",
                     "power.draw", "utilization.gpu")


def gpu_info(device: str, query: Callable[[], str | None] | None = None) -> dict[str, Any] | None:
    """What a GPU timing needs beside it: device name, memory, compute capability, torch and CUDA
    versions, and from nvidia-smi the driver, clocks, temperature, power and utilization at this
    moment (None where nvidia-smi is absent). None on a CPU device."""
    if not device.startswith("cuda"):
        return None
    import torch

    props = torch.cuda.get_device_properties(device)
    info: dict[str, Any] = {
        "device_name": props.name, "total_memory_mib": props.total_memory // 2 ** 20,
        "compute_capability": f"{props.major}.{props.minor}", "torch": torch.__version__, "cuda": torch.version.cuda,
    }
    text = (query or _nvidia_smi)()
    fields = [f.strip() for f in text.strip().splitlines()[0].split(",")] if text else []
    info["nvidia_smi"] = dict(zip(NVIDIA_SMI_FIELDS, fields)) if len(fields) == len(NVIDIA_SMI_FIELDS) else None
    return info


def _nvidia_smi() -> str | None:
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def stream_bandwidth(megabytes: int = 256, repeats: int = 4) -> float:
    """GB/s of a stream-like copy (read one array, write another), best of `repeats`.

    Counted as STREAM counts copy: 2 x array bytes per pass (one read, one write)."""
    import numpy as np

    if megabytes < 1:
        raise ParamsError(f"stream_bandwidth: megabytes must be >= 1, got {megabytes}")
    count = megabytes * 2 ** 20 // 8
    src = np.ones(count, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in before timing
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


@dataclass(frozen=True)
class MatmulThroughput:
    dtype: str
    size: int          # the (size x size) @ (size x size) product actually timed
    gflops: float


def matmul_throughput(dtype: str = "float32", size: int = 1024, budget_s: float = 1.0,
                      repeats: int = 3) -> MatmulThroughput:
    """GFLOP/s of a square matmul in `dtype`; the size shrinks (by halves, down to 64) until one
    product fits a tenth of the budget, because bf16 on a CPU without AVX-512 bf16 is emulated and
    can be 100x slower than float32."""
    import torch

    if dtype not in ("float32", "bfloat16"):
        raise ParamsError(f"matmul_throughput: dtype must be float32 or bfloat16, got {dtype!r}")
    dt = getattr(torch, dtype)
    # a 512 probe: large enough that call overhead (tens of ms on a busy machine) does not pass for
    # slow arithmetic and shrink the product for nothing, small enough for emulated bf16 (~0.3 s)
    side = 512
    probe = torch.randn(side, side, dtype=dt)
    torch.mm(probe, probe)  # the first call pays for kernel selection and thread start-up
    probes = []
    for _ in range(3):  # best of 3: one descheduled probe must not shrink the product for nothing
        t0 = time.perf_counter()
        torch.mm(probe, probe)
        probes.append(time.perf_counter() - t0)
    per_flop = min(probes) / (2 * side ** 3)
    while size > 64 and per_flop * 2 * size ** 3 > budget_s / 10:
        size //= 2
    a = torch.randn(size, size, dtype=dt)
    b = torch.randn(size, size, dtype=dt)
    with torch.inference_mode():
        seconds = _median_time(lambda: torch.mm(a, b), repeats, budget_s)
    return MatmulThroughput(dtype, size, 2 * size ** 3 / seconds / 1e9)


@dataclass(frozen=True)
class Roofline:
    """The two ceilings of this machine: streamed bytes/s and matmul FLOP/s."""

    stream_gbps: float
    matmul_f32_gflops: float
    matmul_f32_size: int
    matmul_bf16_gflops: float
    matmul_bf16_size: int

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which float32 work is compute-bound here."""
        return self.matmul_f32_gflops / self.stream_gbps


def roofline(stream_megabytes: int = 256, matmul_size: int = 1024, budget_s: float = 1.0) -> Roofline:
    f32 = matmul_throughput("float32", matmul_size, budget_s)
    bf16 = matmul_throughput("bfloat16", matmul_size, budget_s)
    return Roofline(stream_bandwidth(stream_megabytes), f32.gflops, f32.size, bf16.gflops, bf16.size)
