"""The decision a deployment makes: Copy-as-Decode's best deployable variant against the fastest deployable
rival, as one number with its interval and a verdict word, shared by the rivals (batch 1) and serving (under
load) claim rows and by the measured engine run when one exists.

A decision scope (analysis.claims.verdict.Scope with `decision` set) carries:

* `value`: Copy-as-Decode's speedup over the fastest rival there (rival time over Copy-as-Decode time at batch 1;
  Copy-as-Decode's output tokens/s over the rival's under load): above 1 Copy-as-Decode is faster;
* `ci`: the paired 95% interval of that ratio (a case bootstrap at batch 1; a request bootstrap under load);
* `decision`, from the interval against 1 (`decide`): `faster` (the interval lies above 1), `slower` (below 1),
  `tie` (it holds 1), and `depends on the pricing assumption` where the ratio's extrapolation band, the range of
  the ratio over the pricing assumptions a figure extrapolates with, crosses 1 while the interval alone would
  decide: then the ranking is the pricing rule's, not the data's. The band is optional: a figure priced inside
  the measured grid has none, and the stage that prices the methods writes it where it extrapolates (columns
  `<ratio>_band_low` / `<ratio>_band_high` beside the interval's), and, where it bootstraps each rule of the band,
  the interval under each (`<ratio>_<rule>_ci_low/_high`): a verdict that one rule's interval gives and another's
  does not depends on the pricing assumption too. Under load, a point where every method's
  steps are compute-bound is `compute-bound: set by tokens forwarded per output token` (`decide(...,
  compute_bound=True)`): the ratio is then the tokens each side forwards per output token, not a finding;
* `basis`: where the figure comes from: `measured` (timed on an engine), `priced` (oracle forwards priced by a
  measured kernel, or simulated steps priced by a cost model fitted to measured steps) or `extrapolated` (most of
  its forwards, or its step costs, priced outside what was measured);
* `detail`: what the index and the charts need beside the number (corpus, pool, load, kernel source, both
  methods and their speedups over AR), plain values only.

Nothing here formats HTML or names a method: the rows' tables name them (analysis.rivals.methods' labels).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.errors import ParamsError
from analysis.rivals.table import flip_point

FASTER, SLOWER, TIE, DEPENDS = "faster", "slower", "tie", "depends on the pricing assumption"
# under load, where every method's steps are compute-bound the ranking is the ratio of tokens each forwards per
# output token, whatever it does with them: reported as that, never as a tie
COMPUTE_BOUND = "compute-bound: set by tokens forwarded per output token"
DECISIONS = (FASTER, SLOWER, TIE, DEPENDS, COMPUTE_BOUND)
MEASURED, PRICED, EXTRAPOLATED = "measured", "priced", "extrapolated"
BASES = (MEASURED, PRICED, EXTRAPOLATED)
# A figure most of whose forwards were priced outside the profiled grid (copy lengths, contexts) reads as
# extrapolated: its number is the latency model's continuation, not its measurement.
EXTRAPOLATED_MAJORITY = 0.5
BATCH_1 = "batch 1"


def _verdict(ci: tuple[float, float]) -> str:
    low, high = (float(v) for v in ci)
    if not low <= high:
        raise ParamsError(f"decision: an interval must run low to high, got [{low}, {high}]")
    return FASTER if low > 1 else SLOWER if high < 1 else TIE


def decide(ci: tuple[float, float], band: tuple[float, float] | None = None,
           rule_intervals: tuple[tuple[float, float], ...] = (), compute_bound: bool = False) -> str:
    """`faster`, `slower` or `tie` from the paired interval of Copy-as-Decode over the rival against 1; `depends on
    the pricing assumption` when an extrapolation band is given, crosses 1, and the interval alone says faster or
    slower, or when the ratio's interval under another pricing rule of the band (`rule_intervals`) reads otherwise
    than the judged one (faster under one rule and a tie or slower under another); `compute-bound: ...` at a load
    point where every method is compute-bound."""
    verdict = _verdict(ci)
    if compute_bound:
        return COMPUTE_BOUND
    if len({verdict, *(_verdict(iv) for iv in rule_intervals)}) > 1:
        return DEPENDS
    if band is not None and verdict != TIE:
        b_low, b_high = (float(v) for v in band)
        if b_low < 1 < b_high:
            return DEPENDS
    return verdict


def basis_of(extrapolated_shares: list[float | None], measured: bool = False) -> str:
    """`measured` for an engine run; `extrapolated` when either side priced most of its forwards outside the
    profiled grid; else `priced`."""
    if measured:
        return MEASURED
    shares = [s for s in extrapolated_shares if s is not None]
    return EXTRAPOLATED if any(s > EXTRAPOLATED_MAJORITY for s in shares) else PRICED


@dataclass(frozen=True)
class Band:
    """The optional extrapolation band of a ratio, read from a row's `<ratio>_band_low/_high` columns, with the
    ratio's paired interval under each rule of the band where the row gives them (`<ratio>_<rule>_ci_low/_high`)."""

    low: float
    high: float
    intervals: tuple[tuple[float, float], ...] = ()

    @staticmethod
    def of(row: dict, ratio: str) -> "Band | None":
        low, high = row.get(f"{ratio}_band_low"), row.get(f"{ratio}_band_high")
        if low is None or high is None:
            return None
        own = f"{ratio}_ci_low"
        rules = sorted(k[len(ratio) + 1:-len("_ci_low")] for k in row
                       if k.startswith(f"{ratio}_") and k.endswith("_ci_low") and k != own)
        intervals = tuple((float(row[f"{ratio}_{r}_ci_low"]), float(row[f"{ratio}_{r}_ci_high"])) for r in rules
                          if row.get(f"{ratio}_{r}_ci_low") is not None and row.get(f"{ratio}_{r}_ci_high") is not None)
        return Band(float(low), float(high), intervals)

    @property
    def pair(self) -> tuple[float, float]:
        return self.low, self.high


@dataclass(frozen=True)
class Flip:
    """Where prompt lookup at a draft budget k overtakes Copy-as-Decode (speedups over AR, one match policy): the
    largest bounded k Copy-as-Decode still beats, the smallest that beats it, and whether unbounded drafts do."""

    policy: str
    wins_up_to: int | None
    loses_from: int | None
    unbounded_wins: bool | None   # None: no unbounded row

    def sentence(self) -> str:
        if self.loses_from is None and not self.unbounded_wins:
            return f"prompt lookup ({self.policy}) never passes it"
        wins = f"wins up to k = {self.wins_up_to}" if self.wins_up_to is not None else "wins at no k"
        loses = f"loses from k = {self.loses_from}" if self.loses_from is not None else "loses only to unbounded drafts"
        return f"against prompt lookup ({self.policy}) it {wins}, {loses}"

    def plain(self) -> dict:
        return {"policy": self.policy, "wins_up_to": self.wins_up_to, "loses_from": self.loses_from,
                "unbounded_wins": self.unbounded_wins}


def flip(policy: str, speedups: dict[int | None, float], copy_speedup: float) -> Flip:
    """The Flip of one policy from its speedups by k (None: unbounded) against Copy-as-Decode's speedup (the rivals
    table's one rule, analysis.rivals.table.flip_point)."""
    return Flip(policy, *flip_point(speedups, copy_speedup))


def reach(ratio: float, low: float, high: float) -> str:
    """Copy-as-Decode's speedup as a share of the fastest rival's, read the right way round: `reaches 53% of the
    fastest rival's speedup (paired 95% CI [51%, 56%]; the rival is 1.87x faster)`."""
    who = (f"the rival is {1 / ratio:.2f}x faster" if ratio < 1 else
           f"Copy-as-Decode is {ratio:.2f}x faster" if ratio > 1 else "level")
    return (f"reaches {ratio:.0%} of the fastest rival's speedup (paired 95% CI [{low:.0%}, {high:.0%}]; {who})")
