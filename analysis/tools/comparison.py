"""The values a comparison of two runs is made of: its settings, the runs as read, one paired figure
(`Difference`) and the whole `Comparison` (analysis.tools.compare builds it, analysis.tools.compare_page
writes it as markdown, HTML and JSON)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from analysis.errors import ParamsError


@dataclass(frozen=True)
class CompareSettings:
    """params.yaml `compare` plus the headline slice (`headline.framing`, `headline.perturb_rate`)."""

    resamples: int
    seed: int
    ci: float
    alpha: float
    framing: str          # headline.framing: multi-framing corpora at this framing (single-framing ones join)
    perturb_rate: float   # headline.perturb_rate: exact match under span noise at this rate

    def validate(self) -> "CompareSettings":
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int) or self.resamples < 1:
            raise ParamsError(f"params: 'compare.resamples' must be an integer >= 1, got {self.resamples!r}")
        for name, value in (("compare.ci", self.ci), ("compare.alpha", self.alpha)):
            if not 0 < value < 1:
                raise ParamsError(f"params: {name!r} must be between 0 and 1, got {value}")
        return self


@dataclass(frozen=True)
class Run:
    label: str
    tables: dict[str, pl.DataFrame]          # SPECS name -> raw rows (absent tables left out)
    where: str = ""                          # "folder X" or "revision R (commit)"
    sources: dict[str, str] = field(default_factory=dict)  # table -> where it was read from
    params: dict | None = None               # the run's params file, when one is known
    params_from: str = "not recorded"        # where `params` came from
    index: Path | None = None                # the run's reports/index.html, for a folder that has one
    serving: pl.DataFrame | None = None      # its reports/tables/serving_claim.csv (simulated, not per case)


@dataclass(frozen=True)
class Difference:
    figure: str
    corpus: str
    n: int                  # paired units (cases)
    a: float
    b: float
    diff: float             # b - a
    ci_low: float
    ci_high: float
    p_value: float | None   # exact sign test on per-case differences (exact-match figures), else None
    significant: bool

    @property
    def change(self) -> float | None:
        """The relative change (B - A) / |A|, None where A is 0 or undefined."""
        if not math.isfinite(self.a) or self.a == 0 or not math.isfinite(self.b):
            return None
        return (self.b - self.a) / abs(self.a)


@dataclass
class Comparison:
    a: Run
    b: Run
    settings: CompareSettings
    rows: list[Difference] = field(default_factory=list)
    unpaired: dict[str, tuple[int, int, list[str], list[str]]] = field(default_factory=dict)  # table -> only A/B
    missing: list[str] = field(default_factory=list)  # tables one run lacks
    notes: list[str] = field(default_factory=list)    # e.g. seed counts that differ between the runs

    def frame(self) -> pl.DataFrame:
        schema = {"figure": pl.String, "corpus": pl.String, "n": pl.Int64, "a": pl.Float64, "b": pl.Float64,
                  "diff": pl.Float64, "change": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                  "p_value": pl.Float64, "significant": pl.Boolean}
        return pl.DataFrame([{**vars(r), "change": r.change} for r in self.rows], schema=schema)
