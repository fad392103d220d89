"""What machine a timing was taken on, and how quiet it was while it ran.

A kernel ratio measured on a shared CPU moves with the CPU (AVX-512 bf16 or AVX2 only) and with
whatever else runs beside it. This module records both, next to every timing file:

- `machine_info()`: CPU model and the instruction-set flags that change matmul speed (avx2, avx512f,
  avx512_bf16, amx_tile, amx_bf16), logical cores, the cores this process may use, torch's threads.
- `reference_workload()`: the wall time of a fixed small float32 matmul block. Its absolute value
  says little; its change between the start and the end of a run says whether the machine's
  speed moved underneath the measurement (`Drift`; `noisy` above a threshold passed in).
- `stream_bandwidth()` and `matmul_throughput()`: the two roofline numbers of this machine (bytes/s a
  stream-like copy moves, float32 and bf16 matmul FLOP/s), which explain why a memory-bound decode
  step and a compute-bound prefill scale differently here and on a GPU.
- `other_load()`: how many of this process's usable cores other processes keep busy, read from
  /proc/stat over a short window while this process sleeps (its own CPU time is subtracted). A
  constant competing load (a busy loop pinned to one core) slows every measurement alike, so it does
  not move the reference drift; it is measured directly instead (`Contention`).
- `EnvironmentRecorder`: load average, other processes' CPU use and the reference workload at the
  start, between measured parts and at the end of a run (its drift threshold and contention slack from
  params: `kernels.profile` or `e2e` `noisy_drift` and `contention_slack`), as a frozen `RunEnvironment` that serialises to flat columns and to JSON. A run is
  `noisy` when its reference drifted past a threshold or it was contended; `noisy_reasons` says which.

Every measurement here takes well under 2 s (a contention sample sleeps CONTENTION_WINDOW_S); torch is
imported inside functions.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.errors import CopyDecodeError, ParamsError
from analysis.params import check_slack, check_threads, check_threshold  # noqa: F401 (validators live in analysis.params)

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")
# The reference block: REFERENCE_INNER products of REFERENCE_SIZE^3 in float32 (about 2 GFLOP, ~10 ms at 200 GFLOP/s):
# long enough that perf_counter resolution and one-off cache misses do not dominate, short enough to
# run between every measured pair.
REFERENCE_SIZE = 256
REFERENCE_INNER = 64
PROC_STAT = Path("/proc/stat")
# The /proc/stat window: jiffies tick at 100 Hz, so 1 s resolves a busy core to about 1%, and a run
# pays it only at its start, between measured parts and at its end.
CONTENTION_WINDOW_S = 1.0


# ---------------------------------------------------------------- machine description

def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor listed in a /proc/cpuinfo text."""
    model, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
        if model and flags:
            break
    return model, flags


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux: every core counts as usable
        return os.cpu_count() or 1


def _torch_threads() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def machine_info(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """CPU model, the flags that matter, core counts and torch's thread count, as plain values."""
    if cpuinfo_text is None:
        cpuinfo_text = CPUINFO.read_text(errors="replace") if CPUINFO.is_file() else ""
    model, flags = parse_cpuinfo(cpuinfo_text)
    return {
        "cpu_model": model or platform.processor() or platform.machine(),
        **{f"cpu_{flag}": flag in flags for flag in CPU_FLAGS},
        "cpu_flags": " ".join(f for f in CPU_FLAGS if f in flags),
        "logical_cores": os.cpu_count() or 1,
        "usable_cores": _usable_cores(),
        "torch_threads": _torch_threads(),
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


# ---------------------------------------------------------------- other processes' CPU use

# /proc/stat per-core columns: user nice system idle iowait irq softirq steal guest guest_nice
# (jiffies). guest and guest_nice are already inside user and nice; idle and iowait are not busy.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)
_IDLE_COLUMNS = (3, 4)


class ProcStatError(CopyDecodeError):
    """A /proc/stat text without the per-core lines the contention measurement reads."""


@dataclass(frozen=True)
class CpuTimes:
    """Busy and total jiffies summed over some cores, as /proc/stat counts them since boot."""

    busy: int
    total: int
    cores: int


def parse_proc_stat(text: str, cores: Iterable[int] | None = None) -> CpuTimes:
    """Busy and total (busy + idle) jiffies summed over the `cpuN` lines of a /proc/stat text whose N
    is in `cores` (every core listed when None)."""
    wanted = None if cores is None else set(cores)
    busy = total = count = 0
    seen: set[int] = set()
    for line in text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        try:
            core = int(name[3:])
            values = [int(v) for v in fields]
        except ValueError as exc:
            raise ProcStatError(f"/proc/stat line {line!r} is not 'cpuN' followed by jiffy counts") from exc
        if wanted is not None and core not in wanted:
            continue
        if len(values) < 8:
            raise ProcStatError(f"/proc/stat line {name} has {len(values)} counters, expected at least 8")
        core_busy = sum(values[i] for i in _BUSY_COLUMNS)
        busy += core_busy
        total += core_busy + sum(values[i] for i in _IDLE_COLUMNS)
        count += 1
        seen.add(core)
    if wanted is not None and seen != wanted:
        raise ProcStatError(f"/proc/stat has no line for cores {sorted(wanted - seen)}")
    if not count:
        raise ProcStatError("/proc/stat has no per-core 'cpuN' line")
    return CpuTimes(busy, total, count)


@dataclass(frozen=True)
class LoadSample:
    """Cores kept busy over one window, in cores (1.0 = one core busy the whole window)."""

    window_s: float          # wall seconds between the two /proc/stat readings
    cores: int               # cores read: the ones this process may run on
    busy_cores: float        # every process
    own_cores: float         # this process (all its threads), from its CPU time
    other_busy_cores: float  # busy_cores - own_cores: what competes with a measurement

    @classmethod
    def between(cls, before: CpuTimes, after: CpuTimes, own_cpu_s: float, window_s: float) -> "LoadSample":
        if after.cores != before.cores:
            raise ProcStatError(f"/proc/stat listed {before.cores} cores, then {after.cores}")
        # elapsed jiffies per core, from the counters themselves (no assumption about the tick rate)
        per_core = (after.total - before.total) / after.cores
        if not per_core > 0 or not window_s > 0:
            raise ProcStatError(f"/proc/stat counters did not advance over a {window_s:.3f} s window")
        busy = (after.busy - before.busy) / per_core
        own = own_cpu_s / window_s
        # busy - own may dip below 0 by a tick's resolution: kept as measured, not clipped
        return cls(window_s, after.cores, busy, own, busy - own)


def other_load(window_s: float = CONTENTION_WINDOW_S, stat_path: Path = PROC_STAT) -> LoadSample | None:
    """Other processes' CPU use over the cores this process may use, measured while it sleeps
    `window_s` seconds; None where there is no /proc/stat (not Linux): never guessed."""
    if not stat_path.is_file():
        return None
    try:
        cores: set[int] | None = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = None
    before = parse_proc_stat(stat_path.read_text(), cores)
    own0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(window_s)
    after = parse_proc_stat(stat_path.read_text(), cores)
    own, wall = time.process_time() - own0, time.perf_counter() - wall0
    return LoadSample.between(before, after, own, wall)


def _cores(count: float) -> str:
    return f"{count:g} free core" + ("" if count == 1 else "s")


@dataclass(frozen=True)
class Contention:
    """Whether other processes kept more cores busy than a run left free.

    contended = median(other_busy_cores samples) > usable_cores - threads + slack. The median over
    the run's samples (start, between measured parts, end) judges the load that stayed; a one-off
    spike in one sample does not mark a run. `measured` is False (and `contended` None) where the
    samples could not be taken; `unmeasured` says why."""

    samples: tuple[float, ...]   # other_busy_cores at each sample
    usable_cores: int
    threads: int | None
    slack: float
    unmeasured: str = ""

    @classmethod
    def of(cls, samples: Iterable[LoadSample | float | None], usable_cores: int, threads: int | None,
           slack: float) -> "Contention":
        check_slack(slack)
        values = [s.other_busy_cores if isinstance(s, LoadSample) else s for s in samples]
        if not values:
            return cls((), usable_cores, threads, slack, "no sample of other processes' CPU use was taken")
        if any(v is None for v in values):
            return cls((), usable_cores, threads, slack,
                       f"{PROC_STAT} not found (not Linux): other processes' CPU use not measured")
        if threads is None:
            return cls(tuple(values), usable_cores, threads, slack, "torch's thread count is unknown")
        return cls(tuple(float(v) for v in values), usable_cores, threads, slack)

    @property
    def measured(self) -> bool:
        return not self.unmeasured

    @property
    def other_busy_cores(self) -> float | None:
        return statistics.median(self.samples) if self.measured else None

    @property
    def free_cores(self) -> int | None:
        return None if self.threads is None else self.usable_cores - self.threads

    @property
    def limit(self) -> float | None:
        return None if self.free_cores is None else self.free_cores + self.slack

    @property
    def contended(self) -> bool | None:
        return self.other_busy_cores > self.limit if self.measured else None

    @property
    def rule(self) -> str:
        return (f"contended if the median of other processes' busy cores > usable cores - threads + slack "
                f"({self.usable_cores} - {self.threads} + {self.slack:g})")

    @property
    def reason(self) -> str | None:
        """The noisy reason, when contended."""
        if not self.contended:
            return None
        return f"other load {self.other_busy_cores:.1f} busy cores > {_cores(self.free_cores)} + {self.slack:g}"

    def to_json(self) -> dict[str, Any]:
        return {"samples": list(self.samples), "usable_cores": self.usable_cores, "threads": self.threads,
                "slack": self.slack, "measured": self.measured, "unmeasured": self.unmeasured or None,
                "other_busy_cores": self.other_busy_cores,
                "other_busy_cores_max": max(self.samples) if self.measured else None,
                "rule": self.rule, "contended": self.contended, "reason": self.reason}

    @classmethod
    def from_json(cls, record: dict[str, Any] | None, slack: float) -> "Contention":
        """A recorded contention re-judged at `slack` (a record from before contention was measured:
        unmeasured, and said so)."""
        if not record:
            return cls((), 0, None, check_slack(slack), "not recorded: this run predates the contention measurement")
        if not record.get("measured", False):
            return cls((), record.get("usable_cores", 0), record.get("threads"), check_slack(slack),
                       record.get("unmeasured") or "not measured")
        return cls.of(record["samples"], record["usable_cores"], record["threads"], slack)


# ---------------------------------------------------------------- drift and run environment

@dataclass(frozen=True)
class Drift:
    """How much the reference workload moved over a run.

    drift = max/min - 1 over every reference sample of the run (start, between parts, end): a
    slowdown in the middle of a run counts even when the end is as fast as the start."""

    reference_start_s: float
    reference_end_s: float
    reference_min_s: float
    reference_max_s: float
    samples: int
    drift: float
    threshold: float
    noisy: bool

    @classmethod
    def of(cls, samples: list[float] | tuple[float, ...], threshold: float) -> "Drift":
        check_threshold(threshold)
        if len(samples) < 2:
            raise ParamsError(f"drift needs a reference sample at the start and the end, got {len(samples)}")
        if any(not s > 0 for s in samples):
            raise ParamsError(f"reference workload times must be > 0 s, got {list(samples)}")
        low, high = min(samples), max(samples)
        drift = high / low - 1.0
        return cls(samples[0], samples[-1], low, high, len(samples), drift, threshold, drift > threshold)

    @property
    def reason(self) -> str | None:
        """The noisy reason, when noisy."""
        return f"reference drift {self.drift:.0%} > {self.threshold:.0%}" if self.noisy else None


@dataclass(frozen=True)
class RunEnvironment:
    """The machine and its state over one measured run (JSON via to_json, flat via columns)."""

    run_id: str
    started_at: float      # unix seconds
    ended_at: float
    machine: dict[str, Any]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    reference_samples_s: tuple[float, ...]
    drift: Drift
    roofline: Roofline | None = None
    contention: Contention | None = None   # None: a caller that measured no contention at all

    @property
    def contended(self) -> bool | None:
        return None if self.contention is None else self.contention.contended

    @property
    def noisy(self) -> bool:
        return self.drift.noisy or self.contended is True

    @property
    def noisy_reasons(self) -> list[str]:
        reasons = [self.drift.reason, self.contention.reason if self.contention is not None else None]
        return [r for r in reasons if r]

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["noisy"] = self.noisy
        out["noisy_reasons"] = self.noisy_reasons
        out["contended"] = self.contended
        out["contention"] = None if self.contention is None else self.contention.to_json()
        out["load_before"], out["load_after"] = list(self.load_before), list(self.load_after)
        out["reference_samples_s"] = list(self.reference_samples_s)
        if self.roofline is not None:
            out["roofline"]["ridge_flops_per_byte"] = self.roofline.ridge_flops_per_byte
        return out

    def columns(self) -> dict[str, Any]:
        """Flat scalar columns (for a parquet file beside the timings)."""
        flat = {"run_id": self.run_id, **self.machine,
                "load1_before": self.load_before[0], "load1_after": self.load_after[0],
                "reference_start_s": self.drift.reference_start_s, "reference_end_s": self.drift.reference_end_s,
                "reference_drift": self.drift.drift, "noisy_drift": self.drift.threshold, "noisy": self.noisy,
                "contended": self.contended, "noisy_reasons": "; ".join(self.noisy_reasons)}
        if self.contention is not None:
            flat.update({"other_busy_cores": self.contention.other_busy_cores,
                         "contention_slack": self.contention.slack})
        if self.roofline is not None:
            flat.update({f"roofline_{k}": v for k, v in asdict(self.roofline).items()})
        return flat


@dataclass
class EnvironmentRecorder:
    """Samples load, other processes' CPU use and the reference workload at start(), at each
    sample() and at end().

    `reference`, `load`, `other` and `threads` are injectable so the noisy logic can be tested with
    known timings and loads. `threads` is read at start(): set torch's thread count before."""

    threshold: float                 # params kernels.profile.noisy_drift / e2e.noisy_drift
    contention_slack: float          # params ... contention_slack (other busy cores allowed beyond the free ones)
    reference: Callable[[], float] = reference_workload
    load: Callable[[], tuple[float, float, float]] = load_average
    other: Callable[[], LoadSample | float | None] = other_load
    threads: Callable[[], int | None] = _torch_threads
    usable_cores: Callable[[], int] = _usable_cores
    measure_roofline: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    samples: list[float] = field(default_factory=list)
    load_samples: list[LoadSample | float | None] = field(default_factory=list)
    _started_at: float | None = None
    _load_before: tuple[float, float, float] | None = None
    _roofline: Roofline | None = None
    _threads: int | None = None

    def start(self) -> float:
        check_threshold(self.threshold)
        check_slack(self.contention_slack)
        self._started_at = time.time()
        self._load_before = self.load()
        self._threads = self.threads()
        if self.measure_roofline:  # before the first reference sample, so its heat is in every sample
            self._roofline = roofline()
        return self.sample()

    def sample(self) -> float:
        """One sample of other processes' CPU use, then one reference measurement; returns the
        reference seconds (the last one is the next part's 'before')."""
        self.load_samples.append(self.other())
        seconds = float(self.reference())
        self.samples.append(seconds)
        return seconds

    def contention(self) -> Contention:
        return Contention.of(self.load_samples, self.usable_cores(), self._threads, self.contention_slack)

    @property
    def last(self) -> float:
        if not self.samples:
            raise ParamsError("EnvironmentRecorder: start() was not called")
        return self.samples[-1]

    def end(self) -> RunEnvironment:
        """Take the closing reference sample and return the whole run's environment."""
        self.sample()
        return self.snapshot()

    def snapshot(self) -> RunEnvironment:
        """The run so far (the last sample counts as its end), e.g. to save after every part."""
        if self._started_at is None or self._load_before is None:
            raise ParamsError("EnvironmentRecorder: start() was not called")
        return RunEnvironment(
            run_id=self.run_id, started_at=self._started_at, ended_at=time.time(), machine=machine_info(),
            load_before=self._load_before, load_after=self.load(),
            reference_samples_s=tuple(self.samples), drift=Drift.of(self.samples, self.threshold),
            roofline=self._roofline, contention=self.contention(),
        )
