"""How a measurement is timed: its noise rules and, for the stages that time units of steps, its warm-up, repeats
and order seed. One type each for every measuring stage (the batch-1 profile, the batched profile, the replay,
the e2e stage), filled from that stage's params group and checked in one place.

* `NoiseRules`: a unit (a pair, a step set's repeat, a case) whose reference workload moved by more than
  `noisy_drift` is noisy; `reference_budget_s` is the time budget of one reference sample; a session during which
  other processes kept more cores busy than it left free, plus `contention_slack`, is contended
  (kernels_profile.measure.contention).
* `Timing`: warm-up runs, repeats, the seed of the interleaved order and the noise rules.

The batch-1 and batched profile specs keep these settings as flat fields (they mirror params and their checkpoint
keys), and hand them out as `rules` / `timing`.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.errors import ParamsError
from analysis.pipeline.params import check_slack, check_threshold, get, number, positive_int


def params_key(group: str, name: str) -> str:
    """How a params error names a setting: `params: 'group.name'`."""
    return f"params: '{group}.{name}'"


@dataclass(frozen=True)
class NoiseRules:
    noisy_drift: float          # reference workload drift above which a unit, and its session, is noisy
    reference_budget_s: float   # time budget of one reference workload sample
    contention_slack: float     # other processes' busy cores beyond the free ones before a session is contended

    def validate(self, where: str, key=lambda where, name: f"{where}.{name}") -> NoiseRules:
        """Each rule in its range, or a ParamsError naming it (`key(where, name)`: how the message spells it)."""
        check_threshold(self.noisy_drift, key(where, "noisy_drift"))
        check_slack(self.contention_slack, key(where, "contention_slack"))
        budget = self.reference_budget_s
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
            raise ParamsError(f"{key(where, 'reference_budget_s')} must be > 0, got {budget!r}")
        return self

    @classmethod
    def from_params(cls, params: dict, group: str) -> NoiseRules:
        return cls(number(params, f"{group}.noisy_drift"), number(params, f"{group}.reference_budget_s"),
                   number(params, f"{group}.contention_slack")).validate(group, params_key)


@dataclass(frozen=True)
class Timing:
    """How units of steps are timed: warm-up runs, repeats, the order seed and the noise rules."""

    repeats: int
    warmup: int
    order_seed: int
    rules: NoiseRules

    def validate(self, where: str) -> Timing:
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1 \
                or isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ParamsError(f"{where}.repeats must be >= 1 and warmup >= 0, got {self.repeats}, {self.warmup}")
        if isinstance(self.order_seed, bool) or not isinstance(self.order_seed, int):
            raise ParamsError(f"{where}.order_seed must be an integer, got {self.order_seed!r}")
        self.rules.validate(where)
        return self

    @classmethod
    def from_params(cls, params: dict, group: str) -> Timing:
        """The group's timing (a params error names the key that is wrong)."""
        get(params, group, dict)
        return cls(positive_int(params, f"{group}.repeats"), positive_int(params, f"{group}.warmup", minimum=0),
                   positive_int(params, f"{group}.order_seed", minimum=0),
                   NoiseRules.from_params(params, group)).validate(group)
