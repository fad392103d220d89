"""The closed-form wall-clock bound: spans composed with a latency model (analysis.latency.model).

This is the one implementation of the bound and the one price of a program: the bounds stage
(`kernel_bounds`), the optimal stage (`fixed_price`, `case_costs`) and the end-to-end prediction
(a forward log, through analysis.rivals.pricing) all use it, with CostSettings from params
(docs/bounds-pricing.md, "One price").

Per case, with G gold tokens, ops k = 0, 1, ... in op_index order, and c_k the KV-cache length
when op k starts:

    regen            = o(c_0) + sum_{j < G} s(c_0 + j)                      (regenerate every token: one run)
    copy op k        = T_prefill(n_k, c_k)            n_k: source tokens it forwards (`n_tokens_src`)
    gen op k         = [o(c_k)] + sum_{j < g_k} s(c_k + j)   g_k: gold tokens it produces
    directives of k  = d_k * s(c_k) [+ o(c_k)]        d_k: `<copy .../>`, `<gen>`, `</gen>`, escapes
    ideal            = regen / sum_k op_k
    overhead         = regen / (sum_k op_k + sum_k directives_k)

A forward per token a program produces: a copy that forwards tokens decodes its tag but the tag's last token
(`"/>`) rides with the copy's prefill (what a forward of it would produce, the copied text, is known), so
such a copy's directives cost (d_k - 1) * s(c_k) [+ o(c_k)] + T_prefill(n_k + 1, c_k) - T_prefill(n_k, c_k)
(`decoded_directives`; the rivals' and the e2e executor's forwards count the same, tested side by side).

Decode pricing (`CostSettings.step_cost`, params bounds.step_cost). `steady` (judged): a decode run
pays the first step's overhead o(c) once and the steady step s(c) per token
(`LatencyModel.step_costs`: on the H200 CUDA-graph loop the first step of every profiled run costs
3.76 ms and every later one 2.45 ms, 1.5B at c = 256). A run is a regeneration, or a stretch of a
program's decoding that follows a prefill (the prompt's, or a copy's): [o] is paid by a gen op that
follows a copy or opens the program (ideal), and in the overhead variant also by a copy whose
directive tokens are decoded after a prefill. `first_step` (v1): o = 0 and s = t_step = T_ar(1, c),
every token at the first step's time, which overstated graph-loop bounds by 17-27%.

Context (`CostSettings.context_mode`):
  * `running`: c_0 = the case's prompt tokens (column `prompt_column`), c_k = c_0 + gold tokens of
    ops 0..k-1 (what is in the cache when op k starts; directive tokens are not counted in c).
  * `fixed` (the v1 bound): every op at one c (params bounds.context), so regen = o(c) + G * s(c),
    gen op = [o(c)] + g_k * s(c). With a v1 (quadratic) model this reproduces the v1 table to the bit.
Both are one priced-ops path (`_priced_ops`): fixed is running with a constant context. The model is
asked once per pricing (`LatencyModel.prices`) and one check (`_refuse`) names what lies outside it.

A copy span that forwards no token (a blank line glued by BPE to the previous line's last token)
costs nothing. The token-level **floor** is the `overhead` variant of token-level programs: every
directive token pays a full decode step and every copy pays a separate prefill.

Extrapolation. A cost evaluated outside the model's profiled N or c range raises ParamsError
naming the case, op and value, unless `extrapolate` is set; then `extrapolated_spans` counts the
ops with an extrapolated cost and `extrapolated_regen` flags cases whose regeneration cost is.

Per corpus the bound is a ratio of sums over its cases (total regeneration time over total program
time), with a percentile bootstrap over cases (analysis.stats). Pooled rows (analysis.pooling's
pooling rule) come twice: `ratio_of_sums` (all pooled cases as one corpus; the v1 figure) and
`mean_of_corpora` (the mean of the per-corpus bounds); the pooled bootstrap resamples cases
(`pooled_bootstrap="cases"`, v1) or cases within each corpus (`"corpus"`, stratified).
Given per-repeat costs (one per kernel repeat), each resample also redraws the kernel repeats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from analysis.corpora.entries import COMMITS_PREFIX, FILE_SEPARATOR
from analysis.errors import ParamsError
from analysis.latency.model import PAPER_FORM, PAST_N_RULES, STEADY, STEP_COSTS, LatencyModel
from analysis.pooling import (
    MEAN_OF_CORPORA,
    PAPER_POOL,
    PER_CORPUS,
    POOLED,
    RATIO_OF_SUMS,
    paper_cases,
    paper_corpora,
    pooled_groups,
)
from analysis.stats import Interval, mean_of_ratios, mean_of_ratios_ci, ratio_of_sums_ci
from analysis.pipeline.params import choice, get, positive_int

VARIANTS = ("ideal", "overhead")
CONTEXT_MODES = ("fixed", "running")
POOLED_BOOTSTRAPS = ("cases", "corpus")
PREFILL_COLUMNS = ("n_tokens_src", "n_tokens")  # what a copy forwards: its source tokens, or the gold ones
CASE_KEYS = ["case_id", "corpus", "framing", "level"]
COST_COLUMNS = ["case_id", "corpus", "framing", "level", "gold_tokens", "copied_tokens", "program_ideal",
                "directive_seconds", "regen", "program_overhead", "extrapolated_spans", "extrapolated_regen"]


@dataclass(frozen=True)
class CostSettings:
    """How a program is priced. Every value that changes a result comes from params (`cost_settings`,
    `fixed_cost_settings`, `log_cost_settings`): no default here. The two defaults name span columns."""

    context_mode: str                     # fixed | running (params bounds.context_mode)
    extrapolate: bool                     # price past the profiled range (counted) instead of refusing
    context: int | None                   # fixed mode: the one KV-cache length (params bounds.context)
    # how a decoded token is priced (params bounds.step_cost): steady (a first-step overhead once per
    # decode run plus the steady step per token) or first_step (v1: every token costs T_ar(1, c))
    step_cost: str
    steady_max_n: int                     # steady: fit T_ar = o + N * s over the profiled N <= this
    # how T_prefill continues past the profiled N (params bounds.prefill_past_n: marginal, linear or loglog;
    # analysis.latency.model.PAST_N_RULES): every stage that prices passes it to the model
    prefill_past_n: str
    prompt_column: str = "prompt_tokens"  # running mode: per-case prompt length (tokens) in the spans
    prefill_tokens: str = "n_tokens_src"  # what a copy forwards; "n_tokens" = the gold tokenization

    def validate(self) -> CostSettings:
        if self.context_mode not in CONTEXT_MODES:
            raise ParamsError(f"bounds.context_mode must be one of {CONTEXT_MODES}, got {self.context_mode!r}")
        if self.step_cost not in STEP_COSTS:
            raise ParamsError(f"bounds.step_cost must be one of {STEP_COSTS}, got {self.step_cost!r}")
        if self.step_cost == STEADY and (self.steady_max_n is None or self.steady_max_n < 2):
            raise ParamsError(f"bounds.step_cost steady needs bounds.steady_max_n >= 2, got {self.steady_max_n!r}")
        if self.context_mode == "fixed" and (self.context is None or self.context < 0):
            raise ParamsError(f"bounds.context must be >= 0, got {self.context}")
        if self.prefill_past_n not in PAST_N_RULES:
            raise ParamsError(f"bounds.prefill_past_n must be one of {PAST_N_RULES}, got {self.prefill_past_n!r}")
        if self.prefill_tokens not in PREFILL_COLUMNS:
            raise ParamsError(f"prefill_tokens must be one of {PREFILL_COLUMNS}, got {self.prefill_tokens!r}")
        return self


def _step_pricing(params: dict) -> dict:
    return {"step_cost": choice(params, "bounds.step_cost", STEP_COSTS),
            "steady_max_n": positive_int(params, "bounds.steady_max_n", minimum=2),
            "prefill_past_n": choice(params, "bounds.prefill_past_n", PAST_N_RULES)}


def cost_settings(params: dict) -> CostSettings:
    """The `bounds` params that price a program (the bounds stage and the case explorer read them here)."""
    return CostSettings(
        context_mode=choice(params, "bounds.context_mode", CONTEXT_MODES),
        context=positive_int(params, "bounds.context", minimum=0),
        extrapolate=get(params, "bounds.extrapolate", bool),
        **_step_pricing(params),
    ).validate()


def fixed_cost_settings(params: dict) -> CostSettings:
    """The bounds' price at the one KV-cache length bounds.context (whatever bounds.context_mode says):
    the optimal stage's, whose dynamic program is exact at one context."""
    return CostSettings(context_mode="fixed", context=positive_int(params, "bounds.context", minimum=0),
                        extrapolate=get(params, "bounds.extrapolate", bool), **_step_pricing(params)).validate()


def log_cost_settings(params: dict) -> CostSettings:
    """The bounds' price of a measured forward log (the e2e prediction): its decode steps priced as the
    bounds price them (bounds.step_cost, bounds.steady_max_n), each forward at its own context (running
    from the prompt), and a forward outside the curve counted, never refused (`log_cost`)."""
    return CostSettings(context_mode="running", context=None, extrapolate=True, **_step_pricing(params)).validate()


# ---------------------------------------------------------------- per-case costs
#
# One priced-ops path for both context modes: each op starts at a context c (running: prompt + gold
# tokens of the ops before it; fixed: bounds.context) and a decode run of g tokens costs the step
# summed over its contexts (running: c, c+1, ..., c+g-1; fixed: g times the step at c). The model is
# asked once per pricing (`LatencyModel.prices`), and one check refuses what lies outside its range.


def run_starts(decodes: np.ndarray, after_prefill: np.ndarray) -> np.ndarray:
    """The one decode-run rule (a program's ops here, a forward log's forwards in analysis.rivals.pricing): a
    decode run, and so the first-step overhead, starts where something is decoded right after a prefill (a
    copy, a verify, a forward carrying jump-forwarded tokens) or at the case's opening (after the prompt's
    prefill). `decodes`: the op or forward decodes a token; `after_prefill`: it opens the case or follows a
    prefill."""
    return np.asarray(decodes, dtype=bool) & np.asarray(after_prefill, dtype=bool)


def decoded_directives(kind: np.ndarray, n_tokens_src: np.ndarray, directive_tokens: np.ndarray) -> np.ndarray:
    """Directive tokens decoded one step each in the overhead variant: all of an op's, but a copy that forwards
    tokens takes its tag's last token into its prefill (module docstring)."""
    rides = (np.asarray(kind) == "copy") & (np.asarray(n_tokens_src) > 0) & (np.asarray(directive_tokens) > 0)
    return np.asarray(directive_tokens) - rides.astype(np.int64)


def charged_forwards(spans: pl.DataFrame, variant: str) -> pl.DataFrame:
    """Per case, the forwards the bound charges a program (`ideal` or `overhead`): a prefill per copy that forwards
    tokens, a decode step per generated token and, in `overhead`, per decoded directive token."""
    if variant not in VARIANTS:
        raise ParamsError(f"bound variant must be one of {VARIANTS}, got {variant!r}")
    kind, src = spans["kind"].to_numpy(), spans["n_tokens_src"].to_numpy()
    per_op = np.where(kind == "copy", (src > 0).astype(np.int64), spans["n_tokens"].to_numpy())
    if variant == "overhead":
        per_op = per_op + decoded_directives(kind, src, spans["directive_tokens"].to_numpy())
    return spans.with_columns(forwards=pl.Series(per_op)).group_by(*CASE_KEYS).agg(
        forwards=pl.col("forwards").sum()).sort(*CASE_KEYS)


def _run_starts(ordered: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which ops start a decode run (`run_starts`), for the ideal variant and for the overhead variant;
    `ordered` sorted by case and op_index. Ideal: a gen op with tokens decodes; overhead: any op with
    directive or gen tokens (a copy decodes its directive before its prefill, so two copies in a row make
    two runs)."""
    prev = ordered.select(pl.col("kind").shift(1).over(CASE_KEYS)).to_series()
    after_prefill = (prev.is_null() | (prev == "copy")).to_numpy()
    is_gen = ordered["kind"].to_numpy() == "gen"
    gen_tokens = np.where(is_gen, ordered["n_tokens"].to_numpy(), 0)
    ideal = run_starts(gen_tokens > 0, after_prefill)
    decoded = decoded_directives(ordered["kind"].to_numpy(), ordered["n_tokens_src"].to_numpy(),
                                 ordered["directive_tokens"].to_numpy())
    overhead = run_starts((gen_tokens + decoded) > 0, after_prefill)
    return ideal, overhead


def _ordered(spans: pl.DataFrame, settings: CostSettings) -> pl.DataFrame:
    """The spans in case and op order, with `context` (the KV-cache length when the op starts) and
    the case's regeneration: `regen_from` (the context it starts at) and `regen_tokens` (G)."""
    running = settings.context_mode == "running"
    missing = [c for c in ("op_index", *([settings.prompt_column] if running else [])) if c not in spans.columns]
    if missing:
        raise ParamsError(f"bounds: pricing a program needs the span columns {missing} (op order; in running "
                          "mode the prompt length per case)")
    if running and (spans[settings.prompt_column].null_count() or (spans[settings.prompt_column] < 0).any()):
        raise ParamsError(f"bounds: column {settings.prompt_column} must be a non-negative token count on every span")
    start = pl.col(settings.prompt_column) if running else pl.lit(settings.context)
    ordered = spans.sort(*CASE_KEYS, "op_index").with_columns(regen_from=start.cast(pl.Int64))
    # running: prompt + gold tokens of the ops before; fixed: the one context
    before = pl.col("n_tokens").cum_sum().over(CASE_KEYS) - pl.col("n_tokens") if running else pl.lit(0)
    return ordered.with_columns(context=(pl.col("regen_from") + before).cast(pl.Int64),
                                regen_tokens=pl.col("n_tokens").sum().over(CASE_KEYS).cast(pl.Int64))


@dataclass(frozen=True)
class _Steps:
    """Decode costs on the contexts lo, lo + 1, ..., hi - 1 (fixed mode: the one context): the overhead
    and the step at each, and prefix sums of the step and of its extrapolation flags."""

    lo: int
    overhead: np.ndarray
    step: np.ndarray
    flag: np.ndarray
    sums: np.ndarray
    flag_sums: np.ndarray
    advancing: bool                       # running: each decoded token adds one to the context

    @classmethod
    def of(cls, overhead, step, lo: int, advancing: bool) -> _Steps:
        sums = np.concatenate([[0.0], np.cumsum(step.seconds)])
        flag_sums = np.concatenate([[0], np.cumsum(step.extrapolated.astype(np.int64))])
        return cls(lo, overhead.seconds, step.seconds, step.extrapolated, sums, flag_sums, advancing)

    def run(self, c: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The steady part of g decode steps from context c: seconds, and whether any is extrapolated."""
        i = c - self.lo
        if not self.advancing:
            return g * self.step[i], (g > 0) & self.flag[i]
        return self.sums[i + g] - self.sums[i], (self.flag_sums[i + g] - self.flag_sums[i]) > 0


def _refuse(ordered: pl.DataFrame, op_flag: np.ndarray, regen_flag: np.ndarray, step_flag: np.ndarray,
            model: LatencyModel, settings: CostSettings) -> None:
    """ParamsError naming the first op (else the first regeneration) whose cost is out of the model's range."""
    k = int(np.flatnonzero(op_flag if op_flag.any() else regen_flag)[0])
    row = ordered.row(k, named=True)
    c, g = row["context"], row["n_tokens"]
    last = (lambda first, n: first + max(n - 1, 0)) if settings.context_mode == "running" else (lambda first, n: first)
    steps = lambda first, n: f"t_step(c={first})" if last(first, n) == first else f"t_step(c={first}..{last(first, n)})"  # noqa: E731
    if not op_flag[k]:
        what = f"regenerating {row['regen_tokens']} tokens runs {steps(row['regen_from'], row['regen_tokens'])}"
    elif step_flag[k]:
        what = steps(c, 1)
    elif row["kind"] == "copy":
        what = f"T_prefill(N={row[settings.prefill_tokens]}, c={c})"
    else:
        what = steps(c, g)
    raise ParamsError(
        f"case {row['case_id']} ({row['framing']}, {row['level']}) op {row['op_index']}: {what} is outside "
        f"the profiled range of {model.key.label()} ({model._range_text()}); {int(op_flag.sum())} op(s) out of range; "
        "set bounds.extrapolate to allow it (counted in extrapolated_spans)")


def _priced_ops(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    """Each op's cost where it runs: the spans in op order with context, op_cost, directive_cost and
    extrapolated, and the case's regeneration cost (regen, regen_extrapolated) on each of its ops."""
    ordered = _ordered(spans, settings)
    c, g = ordered["context"].to_numpy(), ordered["n_tokens"].to_numpy()
    start, gold = ordered["regen_from"].to_numpy(), ordered["regen_tokens"].to_numpy()
    advancing = settings.context_mode == "running"
    # running: every context from 0 (prefix sums); fixed: the one context
    lo = 0 if advancing or not ordered.height else int(settings.context)
    hi = int((c + g).max()) + 1 if advancing and ordered.height else lo + 1
    grid = np.arange(lo, hi, dtype=float)
    n = ordered[settings.prefill_tokens].to_numpy()
    # each copy's prefill, and (overhead variant) the same prefill with its tag's last token
    prices = model.prices(grid, np.concatenate([n, n + 1]), np.concatenate([c, c]).astype(float),
                          settings.step_cost, settings.steady_max_n, settings.prefill_past_n)
    prefill, with_tag = prices.prefill.seconds[:len(n)], prices.prefill.seconds[len(n):]
    steps = _Steps.of(prices.overhead, prices.step, lo, advancing)
    is_copy = ordered["kind"].to_numpy() == "copy"
    decoded = decoded_directives(ordered["kind"].to_numpy(), ordered["n_tokens_src"].to_numpy(),
                                 ordered["directive_tokens"].to_numpy())
    rides = ordered["directive_tokens"].to_numpy() - decoded  # 1 where the tag's last token rides with the prefill
    starts_ideal, starts_overhead = _run_starts(ordered)
    gen_seconds, gen_flag = steps.run(c, g)
    first, at_c, step_flag = steps.overhead[c - lo], steps.step[c - lo], steps.flag[c - lo]
    op_flag = np.where(is_copy, prices.prefill.extrapolated[:len(n)], gen_flag) | step_flag
    regen_seconds, regen_flag = steps.run(start, gold)
    if (op_flag.any() or regen_flag.any()) and not settings.extrapolate:
        _refuse(ordered, op_flag, regen_flag, step_flag, model, settings)
    return ordered.with_columns(
        op_cost=pl.Series(np.where(is_copy, prefill, gen_seconds + starts_ideal * first)),
        directive_cost=pl.Series(decoded * at_c + (starts_overhead & ~starts_ideal) * first
                                 + np.where(rides > 0, with_tag - prefill, 0.0)),
        extrapolated=pl.Series(op_flag),
        # a regeneration is one decode run: one first-step overhead where it starts
        regen=pl.Series(regen_seconds + np.where(gold > 0, steps.overhead[start - lo], 0.0)),
        regen_extrapolated=pl.Series(regen_flag),
    )


def case_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    """Per (case, framing, level): G, regeneration time, program time (ideal and with overhead),
    and how many of its ops were costed by extrapolation (columns `COST_COLUMNS`)."""
    per_op = _priced_ops(spans, model, settings.validate())
    return per_op.group_by(*CASE_KEYS).agg(
        gold_tokens=pl.col("n_tokens").sum(),
        copied_tokens=pl.col("n_tokens").filter(pl.col("kind") == "copy").sum(),
        program_ideal=pl.col("op_cost").sum(),
        directive_seconds=pl.col("directive_cost").sum(),
        extrapolated_spans=pl.col("extrapolated").sum().cast(pl.Int64),
        regen=pl.col("regen").first(),
        extrapolated_regen=pl.col("regen_extrapolated").first(),
    ).with_columns(
        program_overhead=pl.col("program_ideal") + pl.col("directive_seconds"),
    ).select(COST_COLUMNS).sort("level", "corpus", "framing", "case_id")


def span_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    """Per op (the rows of `spans`, in op order): the KV-cache length it runs at (`context`), its cost
    (`op_cost`: one prefill for a copy, its decode steps for a gen), the cost of its directive tokens
    (`directive_cost`) and whether it was extrapolated; in the model's unit (`cost_unit`). The sums
    per case are `case_costs`' program_ideal and directive_seconds."""
    ops = _priced_ops(spans, model, settings.validate())
    order = [*CASE_KEYS, "op_index"]
    return ops.select(*order, *(c for c in ("kind", "n_tokens") if c not in order),
                      "context", "op_cost", "directive_cost", "extrapolated")


@dataclass(frozen=True)
class PrefillAt:
    """T_prefill(n, c) at one context, vectorised over n, extrapolation allowed (picklable)."""

    model: LatencyModel
    context: int
    past_n: str            # the rule past the profiled N (CostSettings.prefill_past_n)

    def __call__(self, n):
        return self.model.t_prefill(n, self.context, extrapolate=True, past_n=self.past_n).seconds


@dataclass(frozen=True)
class FixedPrice:
    """The bound's price at its one context (fixed mode): what `_priced_ops` charges every op of a
    program there, as plain values (the optimal stage's dynamic program minimises it)."""

    overhead: float        # o(c): once per decode run (0 under first_step pricing)
    step: float            # per decoded token: s(c) (steady) or T_ar(1, c) (first_step)
    prefill: PrefillAt     # per copy: T_prefill(n, c)


def fixed_price(model: LatencyModel, settings: CostSettings) -> FixedPrice:
    """`FixedPrice` of a fixed-mode CostSettings, from the same `LatencyModel.prices` call the bound
    makes; extrapolated values are allowed here: whether a program may use them is `case_costs`'
    check (the one refusal), which also counts them."""
    settings = settings.validate()
    if settings.context_mode != "fixed":
        raise ParamsError(f"fixed_price: a price at one context needs context_mode fixed, got {settings.context_mode!r}")
    c = np.array([float(settings.context)])
    prices = model.prices(c, np.zeros(1, dtype=np.int64), c, settings.step_cost, settings.steady_max_n,
                          settings.prefill_past_n)
    return FixedPrice(float(prices.overhead.seconds[0]), float(prices.step.seconds[0]),
                      PrefillAt(model, settings.context, settings.prefill_past_n))


def cost_unit(model: LatencyModel) -> str:
    """The unit of a model's times: the paper's kernel is in decode steps (t_step = 1 by definition),
    a fitted model in seconds."""
    return "decode steps" if model.form == PAPER_FORM else "seconds"


def repeat_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> list[pl.DataFrame]:
    """`case_costs` under each kernel repeat's curves (empty when the model has none)."""
    return [case_costs(spans, m, settings) for m in model.repeat_models()]


@dataclass(frozen=True)
class SpanOp:
    """One op of a program, as the bound needs it (a row of spans.parquet)."""

    kind: str              # "copy" | "gen"
    n_tokens: int          # gold tokens it produces
    n_tokens_src: int      # copy: tokens the prefill forwards; gen: 0
    directive_tokens: int


@dataclass(frozen=True)
class CaseCost:
    regen: float
    program_ideal: float
    program_overhead: float
    extrapolated_spans: int
    extrapolated_regen: bool

    def bound(self, variant: str = "ideal") -> float:
        if variant not in VARIANTS:
            raise ParamsError(f"bound variant must be one of {VARIANTS}, got {variant!r}")
        return self.regen / (self.program_ideal if variant == "ideal" else self.program_overhead)


def case_cost(ops: Sequence[SpanOp], model: LatencyModel, settings: CostSettings,
              prompt_tokens: int = 0) -> CaseCost:
    """The bound's costs for one program (e.g. an end-to-end prediction), through `case_costs`."""
    frame = pl.DataFrame(
        {"case_id": ["case"] * len(ops), "corpus": [""] * len(ops), "framing": [""] * len(ops),
         "level": [""] * len(ops), "op_index": list(range(len(ops))), "kind": [o.kind for o in ops],
         "n_tokens": [o.n_tokens for o in ops], "n_tokens_src": [o.n_tokens_src for o in ops],
         "directive_tokens": [o.directive_tokens for o in ops], settings.prompt_column: [prompt_tokens] * len(ops)},
        schema_overrides={"op_index": pl.Int64, "n_tokens": pl.Int64, "n_tokens_src": pl.Int64,
                          "directive_tokens": pl.Int64, settings.prompt_column: pl.Int64},
    )
    if not ops:
        raise ParamsError("case_cost: a program needs at least one op")
    row = case_costs(frame, model, settings).row(0, named=True)
    return CaseCost(row["regen"], row["program_ideal"], row["program_overhead"],
                    int(row["extrapolated_spans"]), bool(row["extrapolated_regen"]))


# ---------------------------------------------------------------- table

def _aligned(costs: pl.DataFrame, frames: Sequence[pl.DataFrame], what: str) -> None:
    keys = costs.select(CASE_KEYS)
    for r, frame in enumerate(frames):
        if not frame.select(CASE_KEYS).equals(keys):
            raise ParamsError(f"bounds: {what} {r} costs do not cover the same cases in the same order")


def _matrix(rows: pl.DataFrame, column: str, repeats: Sequence[pl.DataFrame]) -> np.ndarray:
    """(k, n) values of one column per kernel repeat for these rows, or the 1-D point values."""
    if not repeats:
        return rows[column].to_numpy()
    index = rows["_row"].to_numpy()
    return np.stack([frame[column].to_numpy()[index] for frame in repeats])


def _record(level, corpus, framing, variant, rows, bound, interval: Interval, coverage, pooling, n_repeats) -> dict:
    return {
        "level": level, "corpus": corpus, "framing": framing, "variant": variant,
        "n_cases": rows.height, "bound": bound, "ci_low": interval.low, "ci_high": interval.high,
        "coverage": coverage, "pooling": pooling,
        "extrapolated_spans": int(rows["extrapolated_spans"].sum()),
        "extrapolated_regen": int(rows["extrapolated_regen"].sum()),
        "kernel_repeats": n_repeats,
    }


def _points(rows: pl.DataFrame, variant: str, point_costs: Mapping[str, pl.DataFrame | None],
            by_corpus: np.ndarray | None) -> dict:
    """The point bound of these rows under each other pricing (`point_costs`, aligned with the costs;
    None: that pricing is not available, a null): ratio of sums, or with `by_corpus` the mean of corpora."""
    index = rows["_row"].to_numpy()
    out = {}
    for name, frame in point_costs.items():
        if frame is None:
            out[name] = None
            continue
        regen, program = frame["regen"].to_numpy()[index], frame[f"program_{variant}"].to_numpy()[index]
        out[name] = (float(regen.sum() / program.sum()) if by_corpus is None
                     else mean_of_ratios(regen, program, by_corpus))
    return out


def bounds_table(costs: pl.DataFrame, resamples: int, seed: int, ci: float, *,
                 repeat_costs: Sequence[pl.DataFrame] = (), pooled_bootstrap: str = "cases",
                 point_costs: Mapping[str, pl.DataFrame | None] | None = None) -> pl.DataFrame:
    """Per (level, corpus, framing, variant): the bound, its bootstrap interval and coverage.

    Columns: level, corpus, framing, variant, n_cases, bound, ci_low, ci_high, coverage (as v1), then
    pooling (pooling.PER_CORPUS or one of pooling.POOLINGS), extrapolated_spans, extrapolated_regen
    (cases) and kernel_repeats (0: the interval has no kernel uncertainty); then one column per
    `point_costs` entry: the point bound of the same rows under that frame's costs (another pricing
    of the same cases, in the same order).
    """
    if pooled_bootstrap not in POOLED_BOOTSTRAPS:
        raise ParamsError(f"bounds.pooled_bootstrap must be one of {POOLED_BOOTSTRAPS}, got {pooled_bootstrap!r}")
    point_costs = point_costs or {}
    _aligned(costs, repeat_costs, "kernel repeat")
    _aligned(costs, [f for f in point_costs.values() if f is not None], "pricing")
    indexed = costs.with_row_index("_row")
    records = []
    for level in sorted(set(costs["level"])):
        for corpus, framing, rows in pooled_groups(indexed.filter(pl.col("level") == level)):
            regen = _matrix(rows, "regen", repeat_costs)
            point_regen = rows["regen"].to_numpy()
            coverage = float(rows["copied_tokens"].sum() / rows["gold_tokens"].sum())
            pooled = corpus == POOLED
            strata = rows["corpus"].to_numpy() if pooled and pooled_bootstrap == "corpus" else None
            for variant in VARIANTS:
                program = _matrix(rows, f"program_{variant}", repeat_costs)
                point_program = rows[f"program_{variant}"].to_numpy()
                interval = ratio_of_sums_ci(regen, program, resamples, seed, ci, strata=strata)
                records.append({**_record(level, corpus, framing, variant, rows,
                                          float(point_regen.sum() / point_program.sum()), interval, coverage,
                                          RATIO_OF_SUMS if pooled else PER_CORPUS, len(repeat_costs)),
                                **_points(rows, variant, point_costs, None)})
                if pooled:
                    by_corpus = rows["corpus"].to_numpy()
                    mean_interval = mean_of_ratios_ci(regen, program, by_corpus, resamples, seed, ci)
                    mean_coverage = mean_of_ratios(rows["copied_tokens"].to_numpy(), rows["gold_tokens"].to_numpy(), by_corpus)
                    records.append({**_record(level, corpus, framing, variant, rows,
                                              mean_of_ratios(point_regen, point_program, by_corpus), mean_interval,
                                              mean_coverage, MEAN_OF_CORPORA, len(repeat_costs)),
                                    **_points(rows, variant, point_costs, by_corpus)})
    schema = {name: pl.Float64 for name in point_costs}
    return pl.DataFrame(records, schema_overrides=schema).sort("level", "variant", "framing", "corpus", "pooling")


# ---------------------------------------------------------------- one kernel's bounds

GOLD_PREFILL = "bound_gold_prefill"


@dataclass(frozen=True)
class KernelBounds:
    """One kernel's bounds, each pricing of the spans computed once: the judged pricing (with its
    kernel repeats) for the per-case costs and the intervals, the other step pricing and the gold
    tokenization's prefill for point bounds beside them."""

    costs: pl.DataFrame        # per case, the judged pricing (COST_COLUMNS)
    table: pl.DataFrame        # bounds_table rows with bound_steady, bound_first_step, bound_gold_prefill
    paper: pl.DataFrame        # the pooled rows over the paper's corpora alone (pool = paper); empty: no such pool
    steps: dict                # t_step, steady_step, first_step_overhead at bounds.context (None: no split)
    unpriced: dict             # a step pricing beside the judged one that this model cannot give: why


def kernel_bounds(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings, resamples: int, seed: int,
                  ci: float, *, kernel_repeats: bool, pooled_bootstrap: str) -> KernelBounds:
    """Every bound of one kernel: per-case costs, the table (per corpus and pooled, with intervals) and
    the paper pool's rows, each with the point bound under both step pricings (bound_steady,
    bound_first_step: the v1 pricing beside the judged one) and under the gold tokenization's prefill
    (bound_gold_prefill). A pricing other than the judged one that this model cannot give (a profile
    with too few short runs for the steady split) is null, its reason in `unpriced`."""
    costs = case_costs(spans, model, settings)
    repeats = repeat_costs(spans, model, settings) if kernel_repeats else []
    points: dict[str, pl.DataFrame | None] = {}
    unpriced = {}
    for step_cost in STEP_COSTS:
        try:
            points[f"bound_{step_cost}"] = (costs if step_cost == settings.step_cost
                                            else case_costs(spans, model, replace(settings, step_cost=step_cost)))
        except ParamsError as exc:
            points[f"bound_{step_cost}"], unpriced[step_cost] = None, str(exc)
    points[GOLD_PREFILL] = case_costs(spans, model, replace(settings, prefill_tokens="n_tokens"))
    table = bounds_table(costs, resamples, seed, ci, repeat_costs=repeats, pooled_bootstrap=pooled_bootstrap,
                         point_costs=points)
    paper = paper_cases(costs)  # analysis.pooling: the paper pool's cases, the one membership rule
    if paper.height:
        keep = paper_corpora()
        paper = bounds_table(paper, resamples, seed, ci, repeat_costs=[r.filter(keep) for r in repeats],
                             pooled_bootstrap=pooled_bootstrap,
                             point_costs={k: None if f is None else f.filter(keep) for k, f in points.items()})
        paper = paper.filter(pl.col("corpus") == POOLED).with_columns(pool=pl.lit(PAPER_POOL))
    else:
        paper = pl.DataFrame()
    return KernelBounds(costs, table, paper, step_prices(model, settings), unpriced)


def step_prices(model: LatencyModel, settings: CostSettings) -> dict:
    """The decode step at bounds.context: T_ar(1, c) (`t_step`, the v1 price of every token), the
    steady step and the first-step overhead (None where the model has no steady split)."""
    if settings.context is None:
        return {"t_step": None, "steady_step": None, "first_step_overhead": None}
    t_step = float(model.t_step(settings.context, extrapolate=True).seconds)
    try:
        first, steady = (float(e.seconds) for e in model.step_costs(settings.context, settings.steady_max_n, extrapolate=True))
    except ParamsError:  # judged first_step on a profile without the steady split (`unpriced` says so)
        first = steady = None
    return {"t_step": t_step, "steady_step": steady, "first_step_overhead": first}


# ---------------------------------------------------------------- commit-level rows

SUMMED_COSTS = ("gold_tokens", "copied_tokens", "program_ideal", "directive_seconds", "regen",
                "program_overhead", "extrapolated_spans")


def commit_costs(costs: pl.DataFrame, keys: tuple[str, ...] = ()) -> pl.DataFrame:
    """Per-case costs (`case_costs` columns, plus `keys`) of multi-file CommitEdits cases summed per
    commit: one row per (commit, corpus, framing, level, *keys), case_id = the commit, with AR cost
    (regen) and program costs the sums over the commit's files, extrapolated_regen if any file's was,
    and n_files. One-file corpora's cases (no file part in the id) are left out."""
    files = costs.filter(pl.col("case_id").str.contains(FILE_SEPARATOR, literal=True)
                         & pl.col("corpus").str.starts_with(f"{COMMITS_PREFIX}-"))
    group = ["case_id", "corpus", "framing", "level", *keys]
    return (files.with_columns(case_id=pl.col("case_id").str.split(FILE_SEPARATOR).list.first())
            .group_by(group, maintain_order=True)
            .agg(*(pl.col(c).sum() for c in SUMMED_COSTS), pl.col("extrapolated_regen").any(),
                 n_files=pl.len())
            .sort(group))
