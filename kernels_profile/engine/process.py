"""The engine driver as an external process: started in its own process group from the engine venv in isolated
mode, watched (its CPU use beside every other process's, the load average), ended with its whole group when
it overruns, fails or the run is interrupted, so that no `VLLM::EngineCore` or worker is left behind.

Other processes' load is measured as on the profiler's runs (kernels_profile.measure.contention): the busy
cores of /proc/stat less the driver's own CPU time (its utime + stime and its waited-for children's, from
/proc/PID/stat) and this process's, sampled every SAMPLE_S seconds.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from analysis.errors import CopyDecodeError
from kernels_profile.measure.contention import PROC_STAT, parse_proc_stat

SAMPLE_S = 5.0
GRACE_S = 15.0  # after SIGTERM, before SIGKILL


class EngineProcessError(CopyDecodeError):
    """The engine driver failed, overran its time limit, or could not be started."""


def process_cpu_s(pid: int) -> float | None:
    """utime + stime + cutime + cstime of a process, in seconds (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / ticks


@dataclass
class LoadMonitor:
    """Samples of other processes' busy cores and of the load average while the driver runs."""

    pid: int
    other_busy_cores: list[float] = field(default_factory=list)
    driver_cores: list[float] = field(default_factory=list)
    loadavg: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        if not PROC_STAT.is_file():
            return
        before, own0, drv0, t0 = (parse_proc_stat(PROC_STAT.read_text()), time.process_time(),
                                  process_cpu_s(self.pid), time.perf_counter())
        while not self.stop.wait(SAMPLE_S):
            after, own1, drv1, t1 = (parse_proc_stat(PROC_STAT.read_text()), time.process_time(),
                                     process_cpu_s(self.pid), time.perf_counter())
            per_core = (after.total - before.total) / max(after.cores, 1)
            if per_core > 0 and drv0 is not None and drv1 is not None:
                busy = (after.busy - before.busy) / per_core
                driver = (drv1 - drv0) / (t1 - t0)
                self.driver_cores.append(driver)
                self.other_busy_cores.append(busy - driver - (own1 - own0) / (t1 - t0))
            self.loadavg.append(os.getloadavg()[0])
            before, own0, drv0, t0 = after, own1, drv1, t1

    def summary(self) -> dict:
        def med(values):
            return round(statistics.median(values), 3) if values else None
        return {"samples": len(self.loadavg), "loadavg_1m_median": med(self.loadavg),
                "loadavg_1m_max": round(max(self.loadavg), 2) if self.loadavg else None,
                "other_busy_cores_median": med(self.other_busy_cores),
                "other_busy_cores_max": round(max(self.other_busy_cores), 3) if self.other_busy_cores else None,
                "driver_cores_median": med(self.driver_cores), "cores": os.cpu_count()}


def end_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the driver's process group, SIGKILL after GRACE_S: the engine's children go with it."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_driver(python: Path, driver: Path, job: Path, out: Path, env: dict[str, str], timeout_s: float,
               log: Path) -> dict:
    """Run the driver on one job; returns the load summary. Raises EngineProcessError (with the log's tail) when
    it exits non-zero or overruns; an interrupt ends its group and propagates."""
    command = [str(python), "-I", str(driver), str(job), str(out)]
    with open(log, "ab") as sink:
        try:
            proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=str(out), env=env,
                                    start_new_session=True)
        except OSError as exc:
            raise EngineProcessError(f"could not start the engine driver ({' '.join(command)}): {exc}") from None
        monitor = LoadMonitor(proc.pid)
        thread = threading.Thread(target=monitor.sample, daemon=True)
        thread.start()
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            end_group(proc)
            raise EngineProcessError(f"the engine driver ran past engine.run.driver_timeout_s ({timeout_s:g} s) on {job.name}; "
                                     f"its finished runs are kept (see {log})") from None
        except BaseException:
            end_group(proc)
            raise
        finally:
            monitor.stop.set()
            thread.join(timeout=SAMPLE_S + 1)
            end_group(proc)  # a driver that exited may still leave its group's engine processes
    if code != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
        raise EngineProcessError(f"the engine driver exited {code} on {job.name}: {tail[-600:]}")
    return monitor.summary()


def driver_env(kv_cache_gib: float, threads: int) -> dict[str, str]:
    """The driver's environment: this one's PATH and locale only (isolated mode ignores PYTHON* anyway), the
    engine in process (its scheduler logged per step), its KV cache size and its CPU threads."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    binding = "0" if threads == 1 else f"0-{threads - 1}"
    return {**keep, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}",
            "VLLM_CPU_OMP_THREADS_BIND": binding, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def echo(message: str) -> None:
    print(f"copydecode engine run: {message}", file=sys.stderr, flush=True)
