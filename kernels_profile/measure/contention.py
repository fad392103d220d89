"""How quiet the machine stayed while a run measured: other processes' CPU use, the reference
workload's drift and the recorder that samples both around a run.

- `other_load()`: how many of this process's usable cores other processes keep busy, read from
  /proc/stat over a short window while this process sleeps (its own CPU time is subtracted). A
  constant competing load (a busy loop pinned to one core) slows every measurement alike, so it does
  not move the reference drift; it is measured directly instead (`Contention`).
- `Drift`: how much the reference workload (kernels_profile.measure.machine.reference_workload) moved over a
  run; `noisy` above a threshold passed in.
- `EnvironmentRecorder`: load average, other processes' CPU use and the reference workload at the
  start, between measured parts and at the end of a run (its drift threshold and contention slack from
  params: `kernels.profile` or `e2e` `noisy_drift` and `contention_slack`), as a frozen `RunEnvironment` that serialises to flat columns and to JSON. A run is
  `noisy` when its reference drifted past a threshold or it was contended; `noisy_reasons` says which.

A contention sample sleeps CONTENTION_WINDOW_S.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.errors import CopyDecodeError, ParamsError
from analysis.pipeline.params import check_slack, check_threshold, usable_cores as usable_core_count
from kernels_profile.measure.machine import (
    Roofline,
    load_average,
    machine_info,
    reference_workload,
    roofline,
    torch_thread_count,
)

PROC_STAT = Path("/proc/stat")
# The /proc/stat window: jiffies tick at 100 Hz, so 1 s resolves a busy core to about 1%, and a run
# pays it only at its start, between measured parts and at its end.
CONTENTION_WINDOW_S = 1.0


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


def environment_metrics(env: RunEnvironment) -> dict:
    """The metrics of one run's environment, as a report shows them (the whole record is in its sidecar;
    a raw file's sidecar of several sessions: kernels_profile.measure.session.session_environment_metrics)."""
    contention = env.contention.to_json() if env.contention is not None else {}
    return {"run_id": env.run_id, "noisy": env.noisy, "noisy_reasons": env.noisy_reasons,
            "contended": env.contended, "other_busy_cores": contention.get("other_busy_cores"),
            "other_busy_cores_samples": contention.get("samples"), "contention_rule": contention.get("rule"),
            "contention_unmeasured": contention.get("unmeasured"), "contention_slack": contention.get("slack"),
            "threads": contention.get("threads", env.machine.get("torch_threads")),
            "reference_drift": env.drift.drift,
            "noisy_drift": env.drift.threshold, "reference_samples": env.drift.samples,
            "reference_start_s": env.drift.reference_start_s, "reference_end_s": env.drift.reference_end_s,
            "load1_before": env.load_before[0], "load1_after": env.load_after[0],
            **{k: env.machine.get(k) for k in ("cpu_model", "cpu_flags", "usable_cores", "torch_threads")}}


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
    threads: Callable[[], int | None] = torch_thread_count
    usable_cores: Callable[[], int] = usable_core_count
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
