"""The closed-form wall-clock bound: spans composed with a latency model (analysis.latency.model).

This is the one implementation of the bound; the bounds stage and the end-to-end prediction
(`case_cost`) both use it.

Per case, with G gold tokens, ops k = 0, 1, ... in op_index order, and c_k the KV-cache length
when op k starts:

    regen            = o(c_0) + sum_{j < G} s(c_0 + j)                      (regenerate every token: one run)
    copy op k        = T_prefill(n_k, c_k)            n_k: source tokens it forwards (`n_tokens_src`)
    gen op k         = [o(c_k)] + sum_{j < g_k} s(c_k + j)   g_k: gold tokens it produces
    directives of k  = d_k * s(c_k) [+ o(c_k)]        d_k: `<copy .../>`, `<gen>`, `</gen>`, escapes
    ideal            = regen / sum_k op_k
    overhead         = regen / (sum_k op_k + sum_k directives_k)

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
  * `fixed` (the v1 bound): every op at one c, so regen = G * t_step(c), gen op = g_k * t_step(c).
    With a v1 (quadratic) model this reproduces the v1 table to the bit.

A copy span that forwards no token (a blank line glued by BPE to the previous line's last token)
costs nothing. The token-level **floor** is the `overhead` variant of token-level programs: every
directive token pays a full decode step and every copy pays a separate prefill.

Extrapolation. A cost evaluated outside the model's profiled N or c range raises ParamsError
naming the case, op and value, unless `extrapolate` is set; then `extrapolated_spans` counts the
ops with an extrapolated cost and `extrapolated_regen` flags cases whose regeneration cost is.

Per corpus the bound is a ratio of sums over its cases (total regeneration time over total program
time), with a percentile bootstrap over cases (analysis.stats). Pooled rows (analysis.layout's
pooling rule) come twice: `ratio_of_sums` (all pooled cases as one corpus; the v1 figure) and
`mean_of_corpora` (the mean of the per-corpus bounds); the pooled bootstrap resamples cases
(`pooled_bootstrap="cases"`, v1) or cases within each corpus (`"corpus"`, stratified).
Given per-repeat costs (one per kernel repeat), each resample also redraws the kernel repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.latency.model import PAPER_FORM, Evaluation, LatencyModel
from analysis.pooling import MEAN_OF_CORPORA, PER_CORPUS, POOLED, RATIO_OF_SUMS, pooled_groups
from analysis.stats import Interval, mean_of_ratios, mean_of_ratios_ci, ratio_of_sums_ci
from analysis.pipeline.params import choice, get, positive_int

VARIANTS = ("ideal", "overhead")
CONTEXT_MODES = ("fixed", "running")
STEADY, FIRST_STEP = "steady", "first_step"
STEP_COSTS = (STEADY, FIRST_STEP)
POOLED_BOOTSTRAPS = ("cases", "corpus")
CASE_KEYS = ["case_id", "corpus", "framing", "level"]
COST_COLUMNS = ["case_id", "corpus", "framing", "level", "gold_tokens", "copied_tokens", "program_ideal",
                "directive_seconds", "regen", "program_overhead", "extrapolated_spans", "extrapolated_regen"]


@dataclass(frozen=True)
class CostSettings:
    """How a program is priced (params `bounds.context_mode`, `bounds.extrapolate`, `bounds.context`):
    the two that change every result have no default here; params.yaml is their one source."""

    context_mode: str                     # fixed | running
    extrapolate: bool                     # price copies past the profiled N range (counted) instead of refusing
    context: int = 256                    # fixed mode: the one KV-cache length
    prompt_column: str = "prompt_tokens"  # running mode: per-case prompt length (tokens) in the spans
    prefill_tokens: str = "n_tokens_src"  # what a copy forwards; "n_tokens" = the gold tokenization
    # how a decoded token is priced (params bounds.step_cost): steady (a first-step overhead once per
    # decode run plus the steady step per token) or first_step (v1: every token costs T_ar(1, c))
    step_cost: str = STEADY
    steady_max_n: int = 8                 # steady: fit T_ar = o + N * s over the profiled N <= this

    def validate(self) -> CostSettings:
        if self.context_mode not in CONTEXT_MODES:
            raise ParamsError(f"bounds.context_mode must be one of {CONTEXT_MODES}, got {self.context_mode!r}")
        if self.step_cost not in STEP_COSTS:
            raise ParamsError(f"bounds.step_cost must be one of {STEP_COSTS}, got {self.step_cost!r}")
        if self.step_cost == STEADY and (self.steady_max_n is None or self.steady_max_n < 2):
            raise ParamsError(f"bounds.step_cost steady needs bounds.steady_max_n >= 2, got {self.steady_max_n!r}")
        if self.context_mode == "fixed" and self.context < 0:
            raise ParamsError(f"bounds.context must be >= 0, got {self.context}")
        return self


def cost_settings(params: dict) -> CostSettings:
    """The `bounds` params that price a program (the bounds stage and the case explorer read them here)."""
    return CostSettings(
        context_mode=choice(params, "bounds.context_mode", CONTEXT_MODES),
        context=positive_int(params, "bounds.context", minimum=0),
        extrapolate=get(params, "bounds.extrapolate", bool),
        step_cost=choice(params, "bounds.step_cost", STEP_COSTS),
        steady_max_n=positive_int(params, "bounds.steady_max_n", minimum=2),
    ).validate()


# ---------------------------------------------------------------- per-case costs

def _refuse(spans: pl.DataFrame, flags: np.ndarray, what: str, model: LatencyModel) -> None:
    """ParamsError naming the first op whose cost is out of the model's range."""
    row = spans.row(int(np.flatnonzero(flags)[0]), named=True)
    raise ParamsError(
        f"case {row['case_id']} ({row['framing']}, {row['level']}) op {row.get('op_index', '?')}: {what} is outside "
        f"the profiled range of {model.key.label()} ({model._range_text()}); {int(flags.sum())} op(s) out of range; "
        "set bounds.extrapolate to allow it (counted in extrapolated_spans)")


def _step_pricing(model: LatencyModel, c, settings: CostSettings) -> tuple[Evaluation, Evaluation]:
    """(first-step overhead, per-token step) at contexts c: v1 (`first_step`) charges every token
    T_ar(1, c) and no overhead; `steady` the model's split (LatencyModel.step_costs)."""
    if settings.step_cost == FIRST_STEP:
        step = model.t_step(c, extrapolate=True)
        return Evaluation(np.zeros(np.shape(step.seconds)), np.zeros(np.shape(step.seconds), dtype=bool)), step
    return model.step_costs(c, settings.steady_max_n, extrapolate=True)


def _run_starts(ordered: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which ops start a decode run (and so pay the first-step overhead), for the ideal variant and
    for the overhead variant; `ordered` sorted by case and op_index. A run starts at an op that decodes
    something and follows a prefill (a copy) or opens the program (after the prompt's prefill); ideal:
    a gen op with tokens; overhead: any op with directive or gen tokens (a copy decodes its directive
    before its prefill, so two copies in a row make two runs)."""
    prev = ordered.select(pl.col("kind").shift(1).over(CASE_KEYS)).to_series()
    after_prefill = (prev.is_null() | (prev == "copy")).to_numpy()
    is_gen = ordered["kind"].to_numpy() == "gen"
    gen_tokens = np.where(is_gen, ordered["n_tokens"].to_numpy(), 0)
    ideal = after_prefill & (gen_tokens > 0)
    overhead = after_prefill & ((gen_tokens + ordered["directive_tokens"].to_numpy()) > 0)
    return ideal, overhead


def _fixed_ops(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings):
    """Each op's cost at the one context: (spans with op_cost, directive_cost, extrapolated; t_step; its flag)."""
    context = settings.context
    first, step = _step_pricing(model, context, settings)
    t, o = float(step.seconds), float(first.seconds)
    if settings.step_cost == STEADY:
        if "op_index" not in spans.columns:
            raise ParamsError("bounds.step_cost steady needs the span column op_index (which op follows a prefill)")
        spans = spans.sort(*CASE_KEYS, "op_index")
        starts_ideal, starts_overhead = _run_starts(spans)
    else:
        starts_ideal = starts_overhead = np.zeros(spans.height, dtype=bool)
    is_copy = spans["kind"].to_numpy() == "copy"
    prefill = model.t_prefill(spans[settings.prefill_tokens].to_numpy(), context, extrapolate=True)
    flags = (is_copy & prefill.extrapolated) | bool(step.extrapolated)
    if flags.any() and not settings.extrapolate:
        n = spans[settings.prefill_tokens].to_numpy()[int(np.flatnonzero(flags)[0])]
        _refuse(spans, flags, f"t_step(c={context})" if bool(step.extrapolated) else f"T_prefill(N={n}, c={context})", model)
    with_cost = spans.with_columns(
        prefill=pl.Series(prefill.seconds), extrapolated=pl.Series(flags),
    ).with_columns(
        op_cost=pl.when(pl.col("kind") == "copy").then(pl.col("prefill")).otherwise(pl.col("n_tokens") * t)
        + pl.Series(starts_ideal * o),
        directive_cost=pl.col("directive_tokens") * t + pl.Series((starts_overhead & ~starts_ideal) * o),
        context=pl.lit(context, dtype=pl.Int64),
    )
    return with_cost, (t, o), bool(step.extrapolated)


def _fixed_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    with_cost, (t, o), step_extrapolated = _fixed_ops(spans, model, settings)
    return (
        with_cost.group_by(*CASE_KEYS)
        .agg(
            gold_tokens=pl.col("n_tokens").sum(),
            copied_tokens=pl.col("n_tokens").filter(pl.col("kind") == "copy").sum(),
            program_ideal=pl.col("op_cost").sum(),
            directive_seconds=pl.col("directive_cost").sum(),
            extrapolated_spans=pl.col("extrapolated").sum().cast(pl.Int64),
        )
        .with_columns(
            regen=pl.col("gold_tokens") * t + pl.when(pl.col("gold_tokens") > 0).then(o).otherwise(0.0),
            program_overhead=pl.col("program_ideal") + pl.col("directive_seconds"),
            extrapolated_regen=pl.lit(step_extrapolated),
        )
        .select(COST_COLUMNS)
        .sort("level", "corpus", "framing", "case_id")
    )


def _step_sums(model: LatencyModel, top: int, settings: CostSettings):
    """Prefix sums of the per-token step (t_step, or the steady step) over contexts 0..top-1 and of
    its extrapolation flags, so that sum_{j < g} step(c + j) = S[c + g] - S[c]."""
    step = _step_pricing(model, np.arange(top, dtype=float), settings)[1]
    seconds = np.concatenate([[0.0], np.cumsum(step.seconds)])
    flags = np.concatenate([[0], np.cumsum(step.extrapolated.astype(np.int64))])
    return seconds, flags


def _running_ops(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings):
    """Each op's cost at prompt + output so far: (spans with context, op_cost, directive_cost,
    extrapolated; the prefix sums of t_step and of its extrapolation flags)."""
    missing = [c for c in (settings.prompt_column, "op_index") if c not in spans.columns]
    if missing:
        raise ParamsError(f"bounds.context_mode running needs span columns {missing} (prompt length per case, op order)")
    if spans[settings.prompt_column].null_count() or (spans[settings.prompt_column] < 0).any():
        raise ParamsError(f"bounds: column {settings.prompt_column} must be a non-negative token count on every span")
    ordered = spans.sort(*CASE_KEYS, "op_index").with_columns(
        context=(pl.col(settings.prompt_column)
                 + pl.col("n_tokens").cum_sum().over(CASE_KEYS) - pl.col("n_tokens")).cast(pl.Int64),
    )
    c = ordered["context"].to_numpy()
    g = ordered["n_tokens"].to_numpy()
    is_copy = ordered["kind"].to_numpy() == "copy"
    top = int((c + g).max()) + 1 if ordered.height else 1
    step_sum, step_flag = _step_sums(model, top, settings)
    first, at_c = _step_pricing(model, c, settings)
    starts_ideal, starts_overhead = _run_starts(ordered)
    gen_seconds = step_sum[c + g] - step_sum[c] + starts_ideal * first.seconds
    gen_flag = (step_flag[c + g] - step_flag[c]) > 0
    prefill = model.t_prefill(ordered[settings.prefill_tokens].to_numpy(), c, extrapolate=True)
    op_flag = np.where(is_copy, prefill.extrapolated, gen_flag) | at_c.extrapolated
    if op_flag.any() and not settings.extrapolate:
        k = int(np.flatnonzero(op_flag)[0])
        what = (f"T_prefill(N={ordered[settings.prefill_tokens][k]}, c={c[k]})" if is_copy[k]
                else f"t_step(c={c[k]}..{c[k] + max(g[k] - 1, 0)})")
        _refuse(ordered, op_flag, what, model)
    per_op = ordered.with_columns(
        op_cost=pl.Series(np.where(is_copy, prefill.seconds, gen_seconds)),
        directive_cost=pl.col("directive_tokens") * pl.Series(at_c.seconds)
        + pl.Series((starts_overhead & ~starts_ideal) * first.seconds),
        extrapolated=pl.Series(op_flag),
    )
    return per_op, step_sum, step_flag


def _running_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    per_op, step_sum, step_flag = _running_ops(spans, model, settings)
    costs = per_op.group_by(*CASE_KEYS).agg(
        gold_tokens=pl.col("n_tokens").sum(),
        copied_tokens=pl.col("n_tokens").filter(pl.col("kind") == "copy").sum(),
        program_ideal=pl.col("op_cost").sum(),
        directive_seconds=pl.col("directive_cost").sum(),
        extrapolated_spans=pl.col("extrapolated").sum().cast(pl.Int64),
        prompt=pl.col(settings.prompt_column).first(),
    )
    start, gold = costs["prompt"].to_numpy(), costs["gold_tokens"].to_numpy()
    regen_flag = (step_flag[start + gold] - step_flag[start]) > 0
    if regen_flag.any() and not settings.extrapolate:
        k = int(np.flatnonzero(regen_flag)[0])
        raise ParamsError(
            f"case {costs['case_id'][k]}: regenerating {gold[k]} tokens runs t_step over c={start[k]}..{start[k] + gold[k] - 1}, "
            f"outside the profiled range of {model.key.label()} ({model._range_text()}); set bounds.extrapolate to allow it")
    # a regeneration is one decode run: one first-step overhead at the prompt
    first = np.where(gold > 0, _step_pricing(model, start, settings)[0].seconds, 0.0)
    return costs.with_columns(
        regen=pl.Series(step_sum[start + gold] - step_sum[start] + first),
        program_overhead=pl.col("program_ideal") + pl.col("directive_seconds"),
        extrapolated_regen=pl.Series(regen_flag),
    ).select(COST_COLUMNS).sort("level", "corpus", "framing", "case_id")


def case_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    """Per (case, framing, level): G, regeneration time, program time (ideal and with overhead),
    and how many of its ops were costed by extrapolation (columns `COST_COLUMNS`)."""
    settings = settings.validate()
    if settings.context_mode == "fixed":
        return _fixed_costs(spans, model, settings)
    return _running_costs(spans, model, settings)


def span_costs(spans: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    """Per op (the rows of `spans`, in op order): the KV-cache length it runs at (`context`), its cost
    (`op_cost`: one prefill for a copy, its decode steps for a gen), the cost of its directive tokens
    (`directive_cost`) and whether it was extrapolated; in the model's unit (`cost_unit`). The sums
    per case are `case_costs`' program_ideal and directive_seconds."""
    settings = settings.validate()
    ops = (_fixed_ops(spans, model, settings)[0] if settings.context_mode == "fixed"
           else _running_ops(spans, model, settings)[0])
    order = [c for c in (*CASE_KEYS, "op_index") if c in ops.columns]
    return ops.sort(order).select(*order, *(c for c in ("kind", "n_tokens") if c not in order),
                                  "context", "op_cost", "directive_cost", "extrapolated")


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

def _aligned_repeats(costs: pl.DataFrame, repeats: Sequence[pl.DataFrame]) -> None:
    keys = costs.select(CASE_KEYS)
    for r, frame in enumerate(repeats):
        if not frame.select(CASE_KEYS).equals(keys):
            raise ParamsError(f"bounds: kernel repeat {r} costs do not cover the same cases in the same order")


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


def bounds_table(costs: pl.DataFrame, resamples: int, seed: int, ci: float, *,
                 repeat_costs: Sequence[pl.DataFrame] = (), pooled_bootstrap: str = "cases") -> pl.DataFrame:
    """Per (level, corpus, framing, variant): the bound, its bootstrap interval and coverage.

    Columns: level, corpus, framing, variant, n_cases, bound, ci_low, ci_high, coverage (as v1), then
    pooling (layout.PER_CORPUS or one of layout.POOLINGS), extrapolated_spans, extrapolated_regen
    (cases) and kernel_repeats (0: the interval has no kernel uncertainty).
    """
    if pooled_bootstrap not in POOLED_BOOTSTRAPS:
        raise ParamsError(f"bounds.pooled_bootstrap must be one of {POOLED_BOOTSTRAPS}, got {pooled_bootstrap!r}")
    _aligned_repeats(costs, repeat_costs)
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
                records.append(_record(level, corpus, framing, variant, rows,
                                       float(point_regen.sum() / point_program.sum()), interval, coverage,
                                       RATIO_OF_SUMS if pooled else PER_CORPUS, len(repeat_costs)))
                if pooled:
                    by_corpus = rows["corpus"].to_numpy()
                    mean_interval = mean_of_ratios_ci(regen, program, by_corpus, resamples, seed, ci)
                    mean_coverage = mean_of_ratios(rows["copied_tokens"].to_numpy(), rows["gold_tokens"].to_numpy(), by_corpus)
                    records.append(_record(level, corpus, framing, variant, rows,
                                           mean_of_ratios(point_regen, point_program, by_corpus), mean_interval,
                                           mean_coverage, MEAN_OF_CORPORA, len(repeat_costs)))
    return pl.DataFrame(records).sort("level", "variant", "framing", "corpus", "pooling")
