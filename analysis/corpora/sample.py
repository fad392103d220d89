"""Seeded samples of case ids: the one sampler of the suite. The e2e stage's per-corpus sample
(`kernels_profile.e2e.job.sample_cases`), its constrained-generation check, the pilot's HEvalFix sample
(`kernels_profile.pilot.jobs.humaneval_sample`) and the serving workload's requests
(`analysis.serving.workload.draw_cases`) all draw through `sample_ids`.

A sample is determined by the ids given (in their order), the count, the seed and the stream: the same
arguments give the same ids on every machine and Python version (`random.Random` seeded by a string or an
int, and numpy's `SeedSequence` for draws with replacement, are both specified bit for bit).

* Without replacement (the default): `count` ids, returned in the order of `ids`; every id when `count` is
  None or at least the number of ids. With `lengths` (id -> a size, e.g. the target's characters) the ids
  ordered by (size, id) are cut into `count` contiguous strata of near-equal size and one id is drawn from
  each, so a sample spans short to long edits; without, a simple random sample.
* With replacement (`replace=True`): `count` ids in the order drawn (a workload's request stream).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np


def sample_ids(ids: Sequence[str], count: int | None, seed: int, stream: str | None = None, *,
               lengths: Mapping[str, int] | None = None, replace: bool = False) -> list[str]:
    """`count` of `ids`, seeded by (`seed`, `stream`): the generator is `random.Random(f"{seed}/{stream}")`
    (`random.Random(seed)` without a stream), or numpy's `SeedSequence([seed, *stream's bytes])` with
    replacement."""
    if replace:
        if not ids:
            raise ValueError("a draw with replacement needs at least one id")
        rng = np.random.default_rng(np.random.SeedSequence([seed, *(stream or "").encode()]))
        return [ids[i] for i in rng.integers(0, len(ids), size=count)]
    if count is None or count >= len(ids):
        return list(ids)
    generator = random.Random(seed if stream is None else f"{seed}/{stream}")
    if lengths is None:
        chosen = set(generator.sample(list(ids), count))
    else:
        ordered = sorted(ids, key=lambda i: (lengths[i], i))
        chosen = {generator.choice(stratum) for stratum in strata(ordered, count)}
    return [i for i in ids if i in chosen]


def strata(ordered: list, count: int) -> list[list]:
    """`ordered` cut into `count` contiguous, non-empty parts whose sizes differ by at most one."""
    size, extra = divmod(len(ordered), count)
    parts, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        parts.append(ordered[start:end])
        start = end
    return parts
