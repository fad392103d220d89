"""Per-case work in parallel through joblib: `map_cases(fn, items, settings, *args)`.

The per-case stages (programs, roundtrip, spans, optimal, perturb) split their cases into contiguous
chunks, call `fn(chunk, *args)` on each (a module-level function, so that it pickles) and concatenate
the per-chunk result lists in chunk order. Every per-case result depends on its case alone (the
perturbation draws are seeded per case), so the output is the serial output for any `n_jobs` and any
backend; tests/analysis/parallel/test_parallel.py compares the two byte for byte.

Params (`parallel`):
  n_jobs   workers (1 = the serial loop in this process, no pool; -1 = every core)
  backend  joblib's backend: loky (local processes, the default), multiprocessing, threading, or a
           cluster backend, dask or ray, whose packages come with `pip install -e ".[cluster]"`.
           No scheduler of our own: joblib dispatches the chunks.
  chunks_per_job  chunks per worker (more chunks balance uneven cases, fewer cost less pickling)
  address  dask or ray only: the cluster to run on. dask: a scheduler address (`tcp://host:8786`,
           `host:8786`); empty starts a `distributed.LocalCluster` of `n_jobs` single-threaded worker
           processes for the stage and closes it after. ray: `ray.init(address=...)` (`auto`,
           `ray://host:10001`, `host:6379`); empty starts a local ray for the stage and shuts it
           down after. The cluster's workers need this package installed (or on their PYTHONPATH) and
           the tokenizer reachable by its spec. Must be empty for the local backends.

A stage opens one cluster session for its whole run (`cluster_session`, around the stage's shards);
`map_cases` called outside one (tests, the bench) opens its own for the call.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.pipeline.params import get, usable_cores
from analysis.parallel.progress import progress_bar, worker_bars_off

LOCAL_BACKENDS = ("loky", "multiprocessing", "threading")
CLUSTER_BACKENDS = {"dask": "distributed", "ray": "ray"}  # backend -> the package it needs
BACKENDS = (*LOCAL_BACKENDS, *CLUSTER_BACKENDS)
CLUSTER_EXTRA = 'pip install -e ".[cluster]"'
SUITE = Path(__file__).resolve().parents[2]  # the folder holding this package: code the workers may import


@dataclass(frozen=True)
class ParallelSettings:
    """params `parallel` (no defaults here: params.yaml is their one source; SERIAL is the in-process run)."""

    n_jobs: int
    backend: str
    chunks_per_job: int
    address: str  # dask/ray only; "" = a local cluster for the stage

    @property
    def serial(self) -> bool:
        return self.workers() == 1

    def workers(self) -> int:
        return (os.cpu_count() or 1) if self.n_jobs == -1 else self.n_jobs


def check_parallel(s: ParallelSettings, *, need_packages: bool = True) -> ParallelSettings:
    """Validate the settings; a cluster backend whose package is missing names the install extra."""
    if isinstance(s.n_jobs, bool) or not isinstance(s.n_jobs, int) or (s.n_jobs < 1 and s.n_jobs != -1):
        raise ParamsError(f"params: 'parallel.n_jobs' must be a positive integer or -1 (every core), got {s.n_jobs!r}")
    if s.backend not in BACKENDS:
        raise ParamsError(f"params: 'parallel.backend' must be one of {', '.join(BACKENDS)}; got {s.backend!r}")
    if isinstance(s.chunks_per_job, bool) or not isinstance(s.chunks_per_job, int) or s.chunks_per_job < 1:
        raise ParamsError(f"params: 'parallel.chunks_per_job' must be a positive integer, got {s.chunks_per_job!r}")
    check_address(s)
    check_workers(s)
    package = CLUSTER_BACKENDS.get(s.backend)
    if need_packages and package is not None and importlib.util.find_spec(package) is None:
        raise ParamsError(f"params: 'parallel.backend' {s.backend!r} needs the package {package!r}, "
                          f"which is not installed; install the cluster extra: {CLUSTER_EXTRA}")
    return s


WORKERS_PER_CORE_LIMIT = 4  # local worker processes per usable core: more only queue (and 10,000 fork the machine to a halt)


def check_workers(s: ParallelSettings) -> None:
    """`parallel.n_jobs` bounded by this machine's usable cores: refused above WORKERS_PER_CORE_LIMIT
    per core, warned about above one per core; unbounded for a dask or ray cluster named by
    `parallel.address`, the override for a cluster whose cores are not this machine's."""
    import sys

    if s.n_jobs == -1 or (s.backend in CLUSTER_BACKENDS and s.address):
        return
    cores = usable_cores()
    if s.n_jobs > WORKERS_PER_CORE_LIMIT * cores:
        raise ParamsError(f"params: 'parallel.n_jobs' is {s.n_jobs}, above {WORKERS_PER_CORE_LIMIT} workers per usable "
                          f"core ({WORKERS_PER_CORE_LIMIT} x {cores} = {WORKERS_PER_CORE_LIMIT * cores} on this machine); "
                          "set at most that, or -1 for one per core. On a cluster, set parallel.backend to dask or "
                          "ray and parallel.address to its scheduler: n_jobs is then not bounded by this machine")
    if s.n_jobs > cores:
        print(f"copydecode: parallel.n_jobs = {s.n_jobs} is above this machine's {cores} usable cores; the extra "
              "workers wait for a core", file=sys.stderr)


# dask: [scheme://]host:port; ray: auto, or [ray://]host:port (hosts: names, IPv4, [IPv6])
_HOST_PORT = r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):[0-9]{1,5}"
ADDRESS_FORMS = {
    "dask": (re.compile(rf"((tcp|tls|inproc|ucx|ws|wss)://)?{_HOST_PORT}"), "tcp://host:8786 or host:8786"),
    "ray": (re.compile(rf"auto|(ray://)?{_HOST_PORT}"), "auto, ray://host:10001 or host:6379"),
}


def check_address(s: ParallelSettings) -> None:
    """`parallel.address`: a string; empty for the local backends; a scheduler address for dask/ray."""
    if not isinstance(s.address, str):
        raise ParamsError(f"params: 'parallel.address' must be a string (a scheduler address, or empty), got {s.address!r}")
    if not s.address:
        return
    if s.backend not in ADDRESS_FORMS:
        raise ParamsError(f"params: 'parallel.address' is {s.address!r} but 'parallel.backend' is {s.backend!r}, "
                          f"which runs on this machine; an address is for {' or '.join(ADDRESS_FORMS)} (or leave it empty)")
    pattern, forms = ADDRESS_FORMS[s.backend]
    if not pattern.fullmatch(s.address):
        raise ParamsError(f"params: 'parallel.address' {s.address!r} is not a {s.backend} scheduler address; "
                          f"expected {forms} (empty: a local cluster for the stage)")


def parallel_settings(params: dict) -> ParallelSettings:
    """`parallel.*` from params (every key required: params.yaml is their one source)."""
    return check_parallel(ParallelSettings(
        n_jobs=get(params, "parallel.n_jobs"),
        backend=get(params, "parallel.backend"),
        chunks_per_job=get(params, "parallel.chunks_per_job"),
        address=get(params, "parallel.address"),
    ))


SERIAL = ParallelSettings(1, "loky", 4, "")  # in-process: backend and chunks are not used


def chunked(items: Sequence, n_chunks: int) -> list[Sequence]:
    """`items` in at most `n_chunks` contiguous, near-equal, non-empty slices, in order."""
    n = len(items)
    n_chunks = max(1, min(n_chunks, n))
    bounds = [round(i * n / n_chunks) for i in range(n_chunks + 1)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _register(backend: str) -> None:
    if backend == "ray":
        from ray.util.joblib import register_ray  # type: ignore[import-not-found]

        register_ray()


_SESSION: list[ParallelSettings] = []  # the cluster session open in this process, if any


@contextlib.contextmanager
def cluster_session(s: ParallelSettings) -> Iterator[None]:
    """For dask and ray (not serial): connect to `s.address`, or start a local cluster of `s.workers()`
    workers, for the block, and close what was started after. A no-op for the local backends, for a
    serial run, and inside an open session."""
    if s.backend not in CLUSTER_BACKENDS or s.serial or _SESSION:
        yield
        return
    check_parallel(s)
    with (_dask_client(s) if s.backend == "dask" else _ray_session(s)):
        _SESSION.append(s)
        try:
            yield
        finally:
            _SESSION.pop()


CONNECT_TIMEOUT_S = 10  # a scheduler that answers at all answers in well under this


@contextlib.contextmanager
def _dask_client(s: ParallelSettings) -> Iterator[None]:
    from distributed import Client, LocalCluster  # type: ignore[import-not-found]

    if s.address:
        try:  # an unreachable scheduler is named within CONNECT_TIMEOUT_S, not a raw traceback after 30 s
            client = Client(s.address, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise ParamsError(f"params: 'parallel.address' {s.address!r}: no dask scheduler answered within "
                              f"{CONNECT_TIMEOUT_S} s ({type(exc).__name__}); start it, fix the address, or leave it "
                              "empty for a local cluster") from None
        with client:
            yield
        return
    with LocalCluster(n_workers=s.workers(), threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster):
        yield


@contextlib.contextmanager
def _ray_session(s: ParallelSettings) -> Iterator[None]:
    import ray  # type: ignore[import-not-found]

    started = not ray.is_initialized()
    if started:
        try:
            # ray puts the driver's working folder on every worker's sys.path (a one-off run's is the run
            # folder, which is data): the driver connects from the suite's own folder instead
            with contextlib.chdir(SUITE):
                ray.init(address=s.address or None, num_cpus=None if s.address else s.workers())
        except (ConnectionError, OSError, TimeoutError) as exc:
            raise ParamsError(f"params: 'parallel.address' {s.address!r}: ray could not connect ({type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:200]}); start the cluster, fix the address, or leave it "
                              "empty for a local ray") from None
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def _quiet_chunk(fn: Callable[..., list], chunk: Sequence, *args: Any) -> list:
    """fn(chunk, *args) in a worker, with the worker's own progress bars off (the parent draws the stage's)."""
    with worker_bars_off():
        return fn(chunk, *args)


def stage_bar(desc: str, total: int):
    """The one progress bar of a parallel stage, drawn by the parent and advanced per finished chunk."""
    return progress_bar(total=total, desc=desc, unit="case", leave=True)  # the log keeps its final count


def map_cases(fn: Callable[..., list], items: Sequence, s: ParallelSettings, *args: Any, desc: str | None = None) -> list:
    """fn(chunk, *args) over contiguous chunks of `items`, results concatenated in order; serial
    (one call in this process, whose own bar shows progress) when `s.n_jobs` is 1. In parallel, one bar
    in the parent (`desc`, else fn's name) advances as each chunk's result comes back in order
    (joblib's return_as="generator"; a dask or ray cluster returns the list at the end, inside
    `cluster_session(s)`); the workers draw none."""
    items = list(items)
    if s.serial or len(items) < 2:
        return list(fn(items, *args))
    from joblib import Parallel, delayed, parallel_config

    _register(s.backend)
    chunks = chunked(items, s.workers() * s.chunks_per_job)
    workers = min(s.workers(), len(chunks))  # never more processes than chunks to give them
    parts = []
    # a cluster backend hands results back as one list; the local ones stream them to the bar
    streamed = "generator" if s.backend not in CLUSTER_BACKENDS else "list"
    with cluster_session(s), parallel_config(backend=s.backend, n_jobs=workers):
        results = Parallel(return_as=streamed)(delayed(_quiet_chunk)(fn, chunk, *args) for chunk in chunks)
        with stage_bar(desc or fn.__name__.replace("_", " "), len(items)) as bar:
            for chunk, part in zip(chunks, results):
                parts.append(part)
                bar.update(len(chunk))
    return [result for part in parts for result in part]
