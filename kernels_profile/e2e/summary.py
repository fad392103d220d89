"""The e2e stage's report rows from its measurements (kernels_profile.e2e.methods measures them): per model,
corpus and method, the speedup over AR measured and predicted on the same two aggregations over cases
(ratio of totals and the median of per-case speedups, with the per-pair ratios' spread); one row per
case and method (with PLD's acceptance histogram); and the headline basis, the ratio of summed times
per corpus and over every case, with the case count.

A speedup is a ratio measured as a ratio (kernels_profile.measure.interleave): AR seconds / a method's seconds
within the same repeat of the same case.
"""

from __future__ import annotations

import polars as pl

from analysis.stats import quartiles, ratio_pairs, summarize_ratios
from kernels_profile.e2e.methods import BASELINE, method_label

CASE_KEYS = ("model", "corpus", "case_id")
PREDICTION_COLUMNS = ("predicted_ar_seconds", "predicted_seconds", "predicted", "extrapolated_spans")
GROUP_KEYS = ("model", "corpus", "method")


def per_pair_ratios(measurements: pl.DataFrame) -> pl.DataFrame:
    """Each method's AR seconds / method seconds within the same repeat of the same case; one case
    at a time, since cases may measure different methods (the PLD k sweep runs on some only)."""
    columns = [*CASE_KEYS, "method", "repeat", "seconds"] + (["order_index"] if "order_index" in measurements.columns else [])
    frames = [ratio_pairs(part.select(columns), BASELINE, CASE_KEYS)
              for _, part in measurements.group_by("model", "case_id", maintain_order=True)]
    return pl.concat(frames) if frames else pl.DataFrame()


def _per_case(measurements: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """Per case and method: median seconds over repeats, the median per-pair speedup, the prediction."""
    predicted = [c for c in PREDICTION_COLUMNS if c in measurements.columns]
    timed = measurements.group_by(*CASE_KEYS, "method").agg(
        pl.col("seconds").median(), pl.col("forwards").first(), *[pl.col(c).first() for c in predicted])
    ar = timed.filter(pl.col("method") == BASELINE).select(*CASE_KEYS, pl.col("seconds").alias("ar_seconds"))
    speedup = pairs.group_by(*CASE_KEYS, "method").agg(speedup=pl.col("ratio").median())
    joined = timed.join(ar, on=list(CASE_KEYS)).join(speedup, on=[*CASE_KEYS, "method"], how="left")
    joined = joined.with_columns(speedup=pl.when(pl.col("method") == BASELINE).then(1.0).otherwise(pl.col("speedup")))
    for column in PREDICTION_COLUMNS:
        if column not in joined.columns:
            joined = joined.with_columns(pl.lit(None, dtype=pl.Float64).alias(column))
    return joined


def speedup_summary(measurements: pl.DataFrame) -> pl.DataFrame:
    """Per model, corpus and method: the speedup over AR measured and predicted on the same two
    aggregations over cases, the per-pair ratios' spread, and the gap between them.

    speedup_total     sum of AR seconds / sum of method seconds (each case: median over repeats)
    speedup_median    median over cases of the per-case speedup (the median of its per-pair ratios);
                      speedup_q25 / speedup_q75 its quartiles over cases
    pair_ratio_*      median, quartiles, IQR, count of every per-pair ratio (cases x repeats)
    predicted_total   sum of predicted AR seconds / sum of predicted method seconds (analysis.bounds)
    predicted_median  median over cases of the per-case predicted speedup
    extrapolated_spans  ops of these cases whose predicted cost lies outside the measured curve
    predicted         = predicted_total: the prediction on speedup_total's basis
    gap_total, gap_median   measured / predicted - 1 on each basis
    """
    pairs = per_pair_ratios(measurements)
    per_case = _per_case(measurements, pairs)
    summary = per_case.group_by(*GROUP_KEYS).agg(
        # positional only: polars puts positional aggregations before keyword ones, so the column
        # order is the order written here
        pl.len().alias("cases"), pl.col("seconds").sum().alias("total_seconds"),
        (pl.col("ar_seconds").sum() / pl.col("seconds").sum()).alias("speedup_total"),
        *quartiles("speedup", "speedup_median", "speedup_q25", "speedup_q75"),
        pl.col("forwards").sum(),
        (pl.col("predicted_ar_seconds").sum() / pl.col("predicted_seconds").sum()).alias("predicted_total"),
        pl.col("predicted").median().alias("predicted_median"),
        pl.col("predicted").is_not_null().sum().alias("predicted_cases"),
        extrapolated_spans=pl.col("extrapolated_spans").sum(),
    )
    # a method without a prediction sums nothing: null, not 0/0
    summary = summary.with_columns(
        predicted_total=pl.when(pl.col("predicted_cases") > 0).then(pl.col("predicted_total")).otherwise(None),
        extrapolated_spans=pl.when(pl.col("predicted_cases") > 0).then(pl.col("extrapolated_spans")).otherwise(None),
    ).drop("predicted_cases")
    spread = summarize_ratios(pairs, ("model", "corpus")).select(
        "model", "corpus", "method", *[pl.col(f"ratio_{s}").alias(f"pair_ratio_{s}")
                                       for s in ("median", "q25", "q75", "iqr")], pl.col("pairs"))
    return (
        summary.join(spread, on=list(GROUP_KEYS), how="left")
        .with_columns(
            label=pl.col("method").map_elements(method_label, return_dtype=pl.String),
            predicted=pl.col("predicted_total"),
            gap_total=pl.col("speedup_total") / pl.col("predicted_total") - 1,
            gap_median=pl.col("speedup_median") / pl.col("predicted_median") - 1,
        )
        .select(*GROUP_KEYS, "label", "cases", "speedup_total", "predicted_total", "gap_total",
                "speedup_median", "predicted_median", "gap_median", "speedup_q25", "speedup_q75",
                "pair_ratio_median", "pair_ratio_q25", "pair_ratio_q75", "pair_ratio_iqr", "pairs",
                "predicted", "extrapolated_spans", "forwards", "total_seconds")
        .sort(*GROUP_KEYS)
    )


# ---------------------------------------------------------------- per case and pooled (the headline basis)

POOL_ALL = "pooled"  # the pool of every measured case of a model (analysis.pooling.POOLED)


def _hist_text(hist) -> str | None:
    """An acceptance histogram as `n:count` pairs for the non-zero counts (`0:3 4:1 10:7`)."""
    if hist is None:
        return None
    return " ".join(f"{n}:{c}" for n, c in enumerate(hist) if c)


def case_table(measurements: pl.DataFrame) -> pl.DataFrame:
    """One row per case and method: the case's output tokens, AR seconds and the method's seconds
    (medians over repeats), its median per-pair speedup, forwards, tokens per forward and (PLD) the
    acceptance histogram of draft tokens per forward (`n:count`; gold acceptance is deterministic, so
    every repeat has the same one)."""
    pairs = per_pair_ratios(measurements)
    per_case = _per_case(measurements, pairs)
    extra = [c for c in ("gold_tokens", "tokens") if c in measurements.columns]
    first = measurements.sort("repeat").group_by(*CASE_KEYS, "method").agg(
        *[pl.col(c).first() for c in extra],
        *([pl.col("accept_hist").first()] if "accept_hist" in measurements.columns else []))
    out = per_case.select(*CASE_KEYS, "method", "ar_seconds", "seconds", "speedup", "forwards").join(
        first, on=[*CASE_KEYS, "method"], how="left")
    for column in ("gold_tokens", "tokens"):
        if column not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Int64).alias(column))
    hist = (out["accept_hist"].to_list() if "accept_hist" in out.columns else [None] * out.height)
    return (out.with_columns(
                label=pl.col("method").map_elements(method_label, return_dtype=pl.String),
                tokens_per_forward=pl.col("tokens") / pl.col("forwards"),
                accept_hist=pl.Series([_hist_text(h) for h in hist], dtype=pl.String))
            .select(*CASE_KEYS, "method", "label", "gold_tokens", "ar_seconds", "seconds", "speedup", "tokens",
                    "forwards", "tokens_per_forward", "accept_hist")
            .sort(*CASE_KEYS, "method"))


def pooled_summary(cases: pl.DataFrame) -> pl.DataFrame:
    """The headline basis: per model, method and pool (each corpus, and `pooled` over every measured
    case of the model), the ratio of summed times, sum of AR seconds / sum of method seconds over the
    cases that measured the method, with their count; never a best case."""
    keys = ["model", "method", "label"]
    aggregations = [pl.len().alias("cases"), pl.col("ar_seconds").sum(), pl.col("seconds").sum(),
                    pl.col("tokens").sum(), pl.col("forwards").sum()]
    by_corpus = cases.group_by(*keys, "corpus").agg(*aggregations)
    overall = cases.group_by(*keys).agg(*aggregations).with_columns(corpus=pl.lit(POOL_ALL))
    frame = pl.concat([by_corpus, overall.select(by_corpus.columns)])
    return (frame.with_columns(speedup_pooled=pl.col("ar_seconds") / pl.col("seconds"),
                               tokens_per_forward=pl.col("tokens") / pl.col("forwards"))
            .rename({"corpus": "pool"})
            .select("model", "pool", "method", "label", "cases", "ar_seconds", "seconds", "speedup_pooled",
                    "tokens", "forwards", "tokens_per_forward")
            .sort("model", pl.col("pool") == POOL_ALL, "pool", "method"))
