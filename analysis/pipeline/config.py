"""params.yaml, read once (`Config.load`), and the settings several stages share.

Each stage module defines the typed settings of its own params group and a `settings(params)`
function, the only reader of that group: it validates every value with the vocabulary of
`analysis.pipeline.params`, so a bad value stops the command with a `ParamsError` naming the key and the value
before anything is read or written. `analysis.cli` builds the settings and calls `run(settings)`.
Below the stage modules, code takes these dataclasses or plain values, never the params dict.
(Settings live beside their stage so that a stage's code, and so its dvc.yaml deps, reach only its
own domain modules.) A settings dataclass holds no default that changes a result
(tests/analysis/stages/test_settings.py compares every default with params.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import ParamsError
from analysis.pipeline.params import get, interval_level, load_params, positive_int


@dataclass(frozen=True)
class Config:
    """The params file, parsed once; `path` is kept for the params hash in report provenance."""

    params: dict[str, Any]
    path: Path

    @classmethod
    def load(cls, path: str | Path) -> "Config":
        return cls(load_params(path), Path(path))


# ---------------------------------------------------------------- shared

@dataclass(frozen=True)
class Bootstrap:
    resamples: int
    seed: int
    ci: float


# Fewer resamples give intervals that can exclude their own point estimate (1 resample: a CI of one value).
MIN_BOOTSTRAP_RESAMPLES = 20
# The draws are held as a (resamples x cases) index table per stratum: 10^8 resamples passed 6 GB on 12 cases.
# A 95% interval's ends settle well before 10^5 (100 x the shipped 1,000)
MAX_BOOTSTRAP_RESAMPLES = 100_000


def bootstrap_settings(params: dict, group: str) -> Bootstrap:
    resamples = positive_int(params, f"{group}.bootstrap_resamples", minimum=0)
    if 0 < resamples < MIN_BOOTSTRAP_RESAMPLES:
        raise ParamsError(f"params: '{group}.bootstrap_resamples' must be 0 (no CIs) or >= {MIN_BOOTSTRAP_RESAMPLES}, "
                          f"got {resamples}")
    if resamples > MAX_BOOTSTRAP_RESAMPLES:
        raise ParamsError(f"params: '{group}.bootstrap_resamples' is {resamples:,}, above the {MAX_BOOTSTRAP_RESAMPLES:,} "
                          "a run may draw (its draws are held in memory, resamples x cases); a 95% interval settles well "
                          "before that")
    return Bootstrap(
        resamples=resamples,
        seed=get(params, f"{group}.seed", int),
        ci=interval_level(params, f"{group}.ci"),
    )


def tokenizer_spec(params: dict[str, Any]) -> str:
    """tokenizer.spec, from the params dict."""
    spec = get(params, "tokenizer.spec", str)
    if not spec.strip():
        raise ParamsError("params: 'tokenizer.spec' is empty; use qwen2.5, a folder or a hub id")
    return spec
