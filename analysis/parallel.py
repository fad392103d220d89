"""Per-case work in parallel through joblib: `map_cases(fn, items, settings, *args)`.

The per-case stages (programs, roundtrip, spans, optimal, perturb) split their cases into contiguous
chunks, call `fn(chunk, *args)` on each (a module-level function, so that it pickles) and concatenate
the per-chunk result lists in chunk order. Every per-case result depends on its case alone (the
perturbation draws are seeded per case), so the output is the serial output for any `n_jobs` and any
backend; tests/analysis/test_parallel.py compares the two byte for byte.

Params (`parallel`):
  n_jobs   workers (1 = the serial loop in this process, no pool; -1 = every core)
  backend  joblib's backend: loky (local processes, the default), multiprocessing, threading, or a
           cluster backend, dask or ray, whose packages come with `pip install -e ".[cluster]"`
           (dask needs a running `distributed.Client`, which joblib finds; ray registers its own
           backend here). No scheduler of our own: joblib dispatches the chunks.
  chunks_per_job  chunks per worker (more chunks balance uneven cases, fewer cost less pickling)
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.errors import ParamsError
from analysis.params import get

LOCAL_BACKENDS = ("loky", "multiprocessing", "threading")
CLUSTER_BACKENDS = {"dask": "distributed", "ray": "ray"}  # backend -> the package it needs
BACKENDS = (*LOCAL_BACKENDS, *CLUSTER_BACKENDS)
CLUSTER_EXTRA = 'pip install -e ".[cluster]"'


@dataclass(frozen=True)
class ParallelSettings:
    """params `parallel` (no defaults here: params.yaml is their one source; SERIAL is the in-process run)."""

    n_jobs: int
    backend: str
    chunks_per_job: int

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
    package = CLUSTER_BACKENDS.get(s.backend)
    if need_packages and package is not None and importlib.util.find_spec(package) is None:
        raise ParamsError(f"params: 'parallel.backend' {s.backend!r} needs the package {package!r}, "
                          f"which is not installed; install the cluster extra: {CLUSTER_EXTRA}")
    return s


def parallel_settings(params: dict) -> ParallelSettings:
    """`parallel.*` from params (every key required: params.yaml is their one source)."""
    return check_parallel(ParallelSettings(
        n_jobs=get(params, "parallel.n_jobs"),
        backend=get(params, "parallel.backend"),
        chunks_per_job=get(params, "parallel.chunks_per_job"),
    ))


SERIAL = ParallelSettings(1, "loky", 4)  # in-process: backend and chunks are not used


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


def map_cases(fn: Callable[..., list], items: Sequence, s: ParallelSettings, *args: Any) -> list:
    """fn(chunk, *args) over contiguous chunks of `items`, results concatenated in order; serial
    (one call in this process) when `s.n_jobs` is 1."""
    items = list(items)
    if s.serial or len(items) < 2:
        return list(fn(items, *args))
    from joblib import Parallel, delayed, parallel_config

    _register(s.backend)
    chunks = chunked(items, s.workers() * s.chunks_per_job)
    with parallel_config(backend=s.backend, n_jobs=s.workers()):
        parts = Parallel()(delayed(fn)(chunk, *args) for chunk in chunks)
    return [result for part in parts for result in part]
