"""The optimal stage's settings (params `optimal`, with `bounds.context`, `bounds.extrapolate` and the
shared `kernel` group), read here once for the stage and for `copydecode bench throughput`, which times
its steps."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.bounds import CostSettings, fixed_cost_settings
from analysis.corpora.entries import FRAMINGS
from analysis.latency.sources import AR_LOOPS, KernelSettings, kernel_settings, names_from_params
from analysis.layout import LEVELS
from analysis.parallel.shards import shard_cases
from analysis.parallel.workers import ParallelSettings, parallel_settings
from analysis.pipeline.config import Bootstrap, bootstrap_settings, tokenizer_spec
from analysis.pipeline.params import choice, choices, get, number_list, positive_int


@dataclass(frozen=True)
class OptimalSettings:
    tokenizer: str
    kernel_sources: tuple[str, ...]   # params optimal.kernel_sources (each adds a DP run)
    baseline: str
    kernel: KernelSettings            # params `kernel`: the fitted model `fit` stands for
    cost: CostSettings                # the bounds' price at bounds.context (analysis.bounds.fixed_cost_settings)
    levels: tuple[str, ...]
    framings: tuple[str, ...]
    min_copies: tuple[int, ...]
    bootstrap: Bootstrap
    parallel: ParallelSettings
    shard_cases: int


def settings(params: dict) -> OptimalSettings:
    p = params
    min_copies = number_list(p, "optimal.min_copies", lo=1, integer=True, distinct=True)
    return OptimalSettings(
        tokenizer=tokenizer_spec(p),
        kernel_sources=names_from_params(p, "optimal.kernel_sources"),
        baseline=choice(p, "optimal.baseline", AR_LOOPS),
        kernel=kernel_settings(p),
        cost=fixed_cost_settings(p),
        levels=choices(p, "optimal.levels", LEVELS),
        framings=choices(p, "optimal.framings", FRAMINGS),
        min_copies=min_copies,
        bootstrap=bootstrap_settings(p, "optimal"),
        parallel=parallel_settings(p),
        shard_cases=shard_cases(p),
    )
