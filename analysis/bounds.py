"""The closed-form wall-clock bound: spans composed with the fitted latency model.

For a set of cases with G gold tokens in all, one decode step t = t_step(c) at context c:

    ideal     = G * t / ( sum_copy T_prefill(n_i, c) + sum_gen g_j * t )
    overhead  = G * t / ( sum_copy T_prefill(n_i, c) + sum_gen g_j * t + sum_ops d_k * t )

n_i are the tokens a copy span forwards (its source tokens, `n_tokens_src`), g_j the gold tokens of
a gen span, d_k the directive tokens of each op (`<copy .../>`, `<gen>`, `</gen>`, escapes) that the
model must decode too. A copy span that forwards no token (a blank line glued by BPE to the previous
line's last token) costs nothing. The numerator is what regenerating all G tokens costs.

The token-level **floor** is the `overhead` variant of token-level programs: every directive token
pays a full decode step and every copy pays a separate prefill, so no serving trick can do worse;
this is how the paper's "4.5x-6.5x floors" are read here.

Per corpus the bound is a ratio of sums over its cases (total regeneration time over total program
time), with a percentile bootstrap over cases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.spans import pooled_groups

VARIANTS = ("ideal", "overhead")


@dataclass(frozen=True)
class KernelModel:
    """The fitted latency model's terms (kernels_profile.latency), without importing torch."""

    a: float
    b: float
    p0: float
    p1: float
    p2: float
    p3: float

    @classmethod
    def from_fit(cls, fit: dict) -> "KernelModel":
        return cls(**fit["ar"]["terms"], **fit["prefill"]["terms"])

    def t_step(self, c: float) -> float:
        return self.a + self.b * c

    def t_prefill(self, n, c: float):
        n = np.asarray(n, dtype=float)
        cost = self.p0 + self.p1 * n + self.p2 * n * c + self.p3 * n * n
        return np.where(n > 0, cost, 0.0)


def case_costs(spans: pl.DataFrame, kernel: KernelModel, context: float, prefill_tokens: str = "n_tokens_src") -> pl.DataFrame:
    """Per (case, framing, level): G, regeneration time, program time (ideal and with overhead)."""
    t = kernel.t_step(context)
    is_copy = pl.col("kind") == "copy"
    with_cost = spans.with_columns(
        prefill=pl.Series(kernel.t_prefill(spans[prefill_tokens].to_numpy(), context)),
    ).with_columns(
        op_cost=pl.when(is_copy).then(pl.col("prefill")).otherwise(pl.col("n_tokens") * t),
        directive_cost=pl.col("directive_tokens") * t,
    )
    return (
        with_cost.group_by("case_id", "corpus", "framing", "level")
        .agg(
            gold_tokens=pl.col("n_tokens").sum(),
            copied_tokens=pl.col("n_tokens").filter(is_copy).sum(),
            program_ideal=pl.col("op_cost").sum(),
            directive_seconds=pl.col("directive_cost").sum(),
        )
        .with_columns(
            regen=pl.col("gold_tokens") * t,
            program_overhead=pl.col("program_ideal") + pl.col("directive_seconds"),
        )
        .sort("level", "corpus", "framing", "case_id")
    )


def _bootstrap_ratio(num: np.ndarray, den: np.ndarray, resamples: int, seed: int, ci: float) -> tuple[float, float]:
    if resamples == 0 or len(num) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(resamples, len(num)))
    ratios = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    alpha = (1 - ci) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bounds_table(costs: pl.DataFrame, resamples: int, seed: int, ci: float) -> pl.DataFrame:
    records = []
    for level in sorted(set(costs["level"])):
        for corpus, framing, rows in pooled_groups(costs.filter(pl.col("level") == level)):
            regen = rows["regen"].to_numpy()
            for variant in VARIANTS:
                program = rows[f"program_{variant}"].to_numpy()
                lo, hi = _bootstrap_ratio(regen, program, resamples, seed, ci)
                records.append({
                    "level": level, "corpus": corpus, "framing": framing, "variant": variant,
                    "n_cases": rows.height, "bound": float(regen.sum() / program.sum()),
                    "ci_low": lo, "ci_high": hi,
                    "coverage": float(rows["copied_tokens"].sum() / rows["gold_tokens"].sum()),
                })
    return pl.DataFrame(records).sort("level", "variant", "framing", "corpus")
