"""The e2e stage's report rows from its measurements (kernels_profile.e2e.methods measures them).

Per case and method (`case_table`): the seconds of every repeat reduced by the **lower median** over
repeats (the median for an odd count, the smaller middle value for an even one: with 2 repeats the
faster), so one slow outlier repeat (a busy minute on a shared CPU) never moves a case's figure; the same
for the prompt's prefill and for decode + prompt. The case's speedup is the
median of its within-repeat AR/method ratios (kernels_profile.measure.interleave). Each method's
prediction (its forward log priced under the case's own curve) sits beside it, with the absolute
error `abs_error` = measured / predicted seconds - 1.

Per model, corpus and method (`speedup_summary`): the ratio of summed times, the median of per-case
speedups with their quartiles, the per-pair ratios' spread, the prediction on the same two
aggregations, and each side's absolute error (`abs_error_total`: summed measured / summed predicted
seconds - 1, `ar_abs_error_total` for the AR seconds behind the ratio).

Pooled (`pooled_summary`, the headline basis): per model, method and pool (each corpus, `HEvalFix` over
the HEvalFix corpora, and `pooled` over every measured case) the ratio of summed times with a
case-bootstrap CI (analysis.stats), the same including each method's prompt prefill (time to first
token), the prediction and its absolute error, tokens per forward; never a best case.
"""

from __future__ import annotations

import polars as pl

from analysis.rivals.families.ar import AR
from analysis.rivals.methods import method_label
from analysis.stats import quartiles, ratio_of_sums, ratio_of_sums_ci, ratio_pairs, summarize_ratios

CASE_KEYS = ("model", "corpus", "case_id")
GROUP_KEYS = ("model", "corpus", "method")
POOL_ALL = "pooled"              # every measured case of a model (analysis.pooling.POOLED)
HEVALFIX_POOL = "HEvalFix"       # the paper's benchmark corpora together: a pool of short edits
HEVALFIX_PREFIX = "HEvalFix-"


def lower_median(column: str) -> pl.Expr:
    """The lower median over repeats (see the module docstring)."""
    return pl.col(column).quantile(0.5, interpolation="lower")


def per_pair_ratios(measurements: pl.DataFrame) -> pl.DataFrame:
    """Each method's AR seconds / method seconds within the same repeat of the same case; one case
    at a time, since cases may measure different methods (the PLD k sweep runs on some only)."""
    columns = [*CASE_KEYS, "method", "repeat", "seconds", "order_index"]
    frames = [ratio_pairs(part.select(columns), AR, CASE_KEYS)
              for _, part in measurements.group_by("model", "case_id", maintain_order=True)]
    return pl.concat(frames) if frames else pl.DataFrame()


def _per_case(measurements: pl.DataFrame) -> pl.DataFrame:
    """Per case and method: lower-median seconds (decode, prompt, both), the median per-pair speedup,
    AR's figures beside, the prediction, the log's counts."""
    with_total = measurements.with_columns(with_prompt_seconds=pl.col("seconds") + pl.col("prompt_seconds"))
    timed = with_total.group_by(*CASE_KEYS, "method").agg(
        lower_median("seconds").alias("seconds"), lower_median("prompt_seconds").alias("prompt_seconds"),
        lower_median("with_prompt_seconds").alias("with_prompt_seconds"),
        lower_median("draft_seconds").alias("draft_seconds"),
        *[pl.col(c).first() for c in ("forwards", "tokens", "gold_tokens", "prompt_tokens", "predicted_seconds",
                                      "predicted_ar_seconds", "predicted", "extrapolated_spans", "lossless_ok")],
        pl.col("accept_hist").sort_by("repeat").first())
    ar = timed.filter(pl.col("method") == AR).select(
        *CASE_KEYS, pl.col("seconds").alias("ar_seconds"), pl.col("prompt_seconds").alias("ar_prompt_seconds"),
        pl.col("with_prompt_seconds").alias("ar_with_prompt_seconds"))
    speedup = per_pair_ratios(measurements).group_by(*CASE_KEYS, "method").agg(speedup=pl.col("ratio").median())
    return (timed.join(ar, on=list(CASE_KEYS)).join(speedup, on=[*CASE_KEYS, "method"], how="left")
            .with_columns(speedup=pl.when(pl.col("method") == AR).then(1.0).otherwise(pl.col("speedup")),
                          speedup_with_prompt=pl.col("ar_with_prompt_seconds") / pl.col("with_prompt_seconds"),
                          abs_error=pl.col("seconds") / pl.col("predicted_seconds") - 1))


def _labelled(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(label=pl.col("method").map_elements(method_label, return_dtype=pl.String))


def _hist_text(hist) -> str | None:
    """An acceptance histogram as `n:count` pairs for the non-zero counts (`0:3 4:1 10:7`)."""
    if hist is None:
        return None
    return " ".join(f"{n}:{c}" for n, c in enumerate(hist) if c)


CASE_COLUMNS = (*CASE_KEYS, "method", "label", "gold_tokens", "ar_seconds", "seconds", "speedup", "prompt_tokens",
                "prompt_seconds", "ar_prompt_seconds", "speedup_with_prompt", "predicted_seconds", "predicted_ar_seconds",
                "predicted", "abs_error", "tokens", "forwards", "tokens_per_forward", "draft_seconds", "accept_hist",
                "lossless_ok")


def case_table(measurements: pl.DataFrame) -> pl.DataFrame:
    """One row per case and method (CASE_COLUMNS); `accept_hist` the speculative methods' acceptance
    histogram of draft tokens per forward (`n:count`; gold acceptance makes every repeat's the same)."""
    per_case = _per_case(measurements)
    hist = [_hist_text(h) for h in per_case["accept_hist"].to_list()]
    return (_labelled(per_case).with_columns(tokens_per_forward=pl.col("tokens") / pl.col("forwards"),
                                             accept_hist=pl.Series(hist, dtype=pl.String))
            .select(CASE_COLUMNS).sort(*CASE_KEYS, "method"))


def speedup_summary(measurements: pl.DataFrame) -> pl.DataFrame:
    """Per model, corpus and method: measured and predicted on the same aggregations (module docstring).

    speedup_total       sum of AR seconds / sum of method seconds (each case: its lower median)
    speedup_median      median over cases of the per-case speedup; speedup_q25 / _q75 its quartiles
    pair_ratio_*        median, quartiles, IQR, count of every per-pair ratio (cases x repeats)
    speedup_with_prompt the same ratio of sums, each side with its prompt's prefill
    prompt_seconds      the method's prompt prefill summed over cases (time to first token)
    predicted_total     sum of predicted AR seconds / sum of predicted method seconds
    gap_total, gap_median   measured / predicted speedup - 1 on each basis
    abs_error_total     summed measured / summed predicted method seconds - 1 (ar_abs_error_total: AR's)
    """
    per_case = _per_case(measurements)
    summary = per_case.group_by(*GROUP_KEYS).agg(
        # positional only: polars puts positional aggregations before keyword ones
        pl.len().alias("cases"), pl.col("seconds").sum().alias("total_seconds"),
        (pl.col("ar_seconds").sum() / pl.col("seconds").sum()).alias("speedup_total"),
        *quartiles("speedup", "speedup_median", "speedup_q25", "speedup_q75"),
        (pl.col("ar_with_prompt_seconds").sum() / pl.col("with_prompt_seconds").sum()).alias("speedup_with_prompt"),
        pl.col("prompt_seconds").sum(), pl.col("forwards").sum(),
        (pl.col("predicted_ar_seconds").sum() / pl.col("predicted_seconds").sum()).alias("predicted_total"),
        pl.col("predicted").median().alias("predicted_median"),
        (pl.col("seconds").sum() / pl.col("predicted_seconds").sum() - 1).alias("abs_error_total"),
        (pl.col("ar_seconds").sum() / pl.col("predicted_ar_seconds").sum() - 1).alias("ar_abs_error_total"),
        pl.col("abs_error").median().alias("abs_error_median"),
        pl.col("extrapolated_spans").sum(),
    )
    pairs = per_pair_ratios(measurements)
    spread = summarize_ratios(pairs, ("model", "corpus")).select(
        "model", "corpus", "method", *[pl.col(f"ratio_{s}").alias(f"pair_ratio_{s}")
                                       for s in ("median", "q25", "q75", "iqr")], pl.col("pairs"))
    return (
        _labelled(summary.join(spread, on=list(GROUP_KEYS), how="left"))
        .with_columns(predicted=pl.col("predicted_total"),
                      gap_total=pl.col("speedup_total") / pl.col("predicted_total") - 1,
                      gap_median=pl.col("speedup_median") / pl.col("predicted_median") - 1)
        .select(*GROUP_KEYS, "label", "cases", "speedup_total", "predicted_total", "gap_total", "speedup_with_prompt",
                "prompt_seconds", "abs_error_total", "ar_abs_error_total", "abs_error_median",
                "speedup_median", "predicted_median", "gap_median", "speedup_q25", "speedup_q75",
                "pair_ratio_median", "pair_ratio_q25", "pair_ratio_q75", "pair_ratio_iqr", "pairs",
                "predicted", "extrapolated_spans", "forwards", "total_seconds")
        .sort(*GROUP_KEYS)
    )


# ---------------------------------------------------------------- pooled: the headline basis

POOLED_COLUMNS = ("model", "pool", "method", "label", "cases", "ar_seconds", "seconds", "speedup_pooled", "ci_low",
                  "ci_high", "ar_prompt_seconds", "prompt_seconds", "speedup_with_prompt", "with_prompt_ci_low",
                  "with_prompt_ci_high", "predicted_pooled", "abs_error", "ar_abs_error", "tokens", "forwards",
                  "tokens_per_forward")


def pools(corpora: list[str]) -> list[tuple[str, list[str]]]:
    """(pool, its corpora): each corpus, the HEvalFix pool where a HEvalFix corpus was measured, all."""
    hevalfix = sorted(c for c in corpora if c.startswith(HEVALFIX_PREFIX))
    return ([(c, [c]) for c in sorted(corpora)] + ([(HEVALFIX_POOL, hevalfix)] if hevalfix else [])
            + [(POOL_ALL, sorted(corpora))])


def _pool_row(rows: pl.DataFrame, resamples: int, seed: int, level: float) -> dict:
    ar, seconds = rows["ar_seconds"].to_numpy(), rows["seconds"].to_numpy()
    ar_total, total = rows["ar_with_prompt_seconds"].to_numpy(), rows["with_prompt_seconds"].to_numpy()
    ci = ratio_of_sums_ci(ar, seconds, resamples, seed, level)
    with_prompt = ratio_of_sums_ci(ar_total, total, resamples, seed, level)
    predicted = rows["predicted_seconds"].sum()
    return {"cases": rows.height, "ar_seconds": float(ar.sum()), "seconds": float(seconds.sum()),
            "speedup_pooled": ratio_of_sums(ar, seconds), "ci_low": ci.low, "ci_high": ci.high,
            "ar_prompt_seconds": rows["ar_prompt_seconds"].sum(), "prompt_seconds": rows["prompt_seconds"].sum(),
            "speedup_with_prompt": ratio_of_sums(ar_total, total), "with_prompt_ci_low": with_prompt.low,
            "with_prompt_ci_high": with_prompt.high,
            "predicted_pooled": rows["predicted_ar_seconds"].sum() / predicted if predicted else None,
            "abs_error": float(seconds.sum()) / predicted - 1 if predicted else None,
            "ar_abs_error": float(ar.sum()) / rows["predicted_ar_seconds"].sum() - 1 if predicted else None,
            "tokens": rows["tokens"].sum(), "forwards": rows["forwards"].sum(),
            "tokens_per_forward": rows["tokens"].sum() / rows["forwards"].sum()}


def pooled_summary(measurements: pl.DataFrame, resamples: int, seed: int, level: float) -> pl.DataFrame:
    """The headline basis (POOLED_COLUMNS): per model, method and pool, over the cases that measured the
    method; the CIs resample cases (`resamples` draws, seeded, percentile interval at `level`)."""
    per_case = _per_case(measurements)
    out = []
    for (model, method), part in per_case.group_by("model", "method", maintain_order=True):
        for pool, corpora in pools(part["corpus"].unique().to_list()):
            rows = part.filter(pl.col("corpus").is_in(corpora)).sort("case_id")
            out.append({"model": model, "pool": pool, "method": method, **_pool_row(rows, resamples, seed, level)})
    order = {POOL_ALL: 2, HEVALFIX_POOL: 1}
    return (_labelled(pl.DataFrame(out, infer_schema_length=None))
            .with_columns(_order=pl.col("pool").replace_strict(order, default=0, return_dtype=pl.Int64))
            .sort("model", "_order", "pool", "method").select(POOLED_COLUMNS))
