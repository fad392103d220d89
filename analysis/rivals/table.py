"""The rivals tables: every method's per-case price under every kernel source, pooled per corpus and pool,
and which deployable method is fastest where.

Per case the speedup of a method is AR's price over the method's, both from analysis.rivals.pricing under
one kernel source. A corpus's figure is the ratio of sums (summed AR time over summed method time) over its
cases with a percentile case bootstrap (analysis.stats; the same seed for every method, so the resamples
are paired across methods); the pools are the paper's three corpora (`paper`, 482 cases with the
ProbeEdit-S stand-in) and every corpus of the run (`all`), each resampled within corpora.

`fastest` names, per kernel source and corpus or pool, the fastest method a deployment can run (never an
`ideal` program: its directive tokens are free) and its margin over the runner-up, the fastest method of
another family (a sibling setting of the same method, e.g. prompt lookup at another k, is no rival to it), and
sets Copy-as-Decode's best deployable variant beside the best rival, with a paired bootstrap interval of their
ratio.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.pooling import ALL_POOL, PAPER_POOL, POOLED, paper_cases
from analysis.rivals.families.ar import AR
from analysis.rivals.methods import parse_method
from analysis.stats import ratio_of_sums_ci

PER_CORPUS_POOL = "corpus"
GROUP_KEYS = ("kernel_source", "method")


def method_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """family, label and role of each row's method (analysis.rivals.methods: baseline, copy, bound, rival)."""
    methods = [parse_method(n) for n in frame["method"].unique().to_list()]
    info = pl.DataFrame({
        "method": [m.name for m in methods],
        "family": [m.family for m in methods],
        "label": [m.label for m in methods],
        "role": [m.role for m in methods],
    })
    return frame.join(info, on="method", how="left")


def chart_methods(names, policies: tuple[str, ...] = ("earliest",)) -> list[tuple[str, str]]:
    """(name, family title) of the methods a rivals chart draws, in its order: Copy-as-Decode first, then the
    rivals in table order; AR left out, prompt lookup at the match `policies` given (the standard, earliest,
    by default; the table holds both)."""
    methods = [parse_method(n) for n in set(names)]
    drawn = [m for m in methods if m.role != "baseline" and (m.policy is None or m.policy in policies)]
    drawn.sort(key=lambda m: (m.role not in ("copy", "hybrid", "bound"), m.table_key()))
    return [(m.name, m.spec.title) for m in drawn]


def groups(cases: pl.DataFrame) -> list[tuple[str, str, pl.DataFrame]]:
    """(corpus, pool, rows): each corpus, then the paper pool (when the run holds its corpora and more)
    and the pool of every corpus."""
    out = [(corpus, PER_CORPUS_POOL, rows) for (corpus,), rows in cases.group_by("corpus", maintain_order=True)]
    paper = paper_cases(cases)
    if paper.height:
        out.append((POOLED, PAPER_POOL, paper))
    out.append((POOLED, ALL_POOL, cases))
    return out


def pooled_rows(percase: pl.DataFrame, resamples: int, seed: int, ci: float) -> pl.DataFrame:
    """Per kernel source, method and corpus or pool: cases, speedup (ratio of sums) and its interval, forwards
    per case, gold tokens per forward, decode steps per case, the share of forwards priced by extrapolation."""
    records = []
    ordered = percase.sort("kernel_source", "method", "corpus", "case_id")
    for (source, method), rows in ordered.group_by(list(GROUP_KEYS), maintain_order=True):
        for corpus, pool, part in groups(rows):
            strata = part["corpus"].to_numpy() if corpus == POOLED else None
            ar, own = part["ar_seconds"].to_numpy(), part["seconds"].to_numpy()
            interval = ratio_of_sums_ci(ar, own, resamples, seed, ci, strata=strata)
            forwards = float(part["forwards"].sum())
            records.append({
                "kernel_source": source, "method": method, "corpus": corpus, "pool": pool, "n_cases": part.height,
                "speedup": float(ar.sum() / own.sum()), "ci_low": interval.low, "ci_high": interval.high,
                "forwards_per_case": forwards / part.height,
                "gold_tokens_per_forward": float(part["gold_tokens"].sum()) / forwards,
                "decode_steps_per_case": float(part["decode_steps"].sum()) / part.height,
                "extrapolated_share": float(part["extrapolated_forwards"].sum()) / forwards,
            })
    return method_columns(pl.DataFrame(records)).select(
        "kernel_source", "corpus", "pool", "method", "family", "role", "label", "n_cases", "speedup", "ci_low",
        "ci_high", "forwards_per_case", "gold_tokens_per_forward", "decode_steps_per_case", "extrapolated_share")


def _best(rows: pl.DataFrame) -> dict | None:
    return rows.sort("speedup", descending=True).row(0, named=True) if rows.height else None


def fastest(table: pl.DataFrame, percase: pl.DataFrame, resamples: int, seed: int, ci: float) -> pl.DataFrame:
    """Per kernel source and corpus or pool: the fastest deployable method and its margin over the
    runner-up (the fastest of another family); the best rival and Copy-as-Decode's best deployable variant,
    with the paired bootstrap interval of Copy-as-Decode's speedup over that rival (summed rival time over
    summed Copy-as-Decode time)."""
    records = []
    deployable = table.filter(pl.col("role").is_in(["copy", "rival"]))
    for (source, corpus, pool), rows in deployable.group_by(["kernel_source", "corpus", "pool"], maintain_order=True):
        ranked = rows.sort("speedup", descending=True)
        top = ranked.row(0, named=True)
        runner = _best(ranked.filter(pl.col("family") != top["family"]))
        rival, copy = _best(rows.filter(pl.col("role") == "rival")), _best(rows.filter(pl.col("role") == "copy"))
        record = {"kernel_source": source, "corpus": corpus, "pool": pool, "n_cases": top["n_cases"],
                  "fastest": top["method"], "fastest_label": top["label"], "fastest_speedup": top["speedup"],
                  "runner_up": runner["method"] if runner else None,
                  "margin_over_runner_up": top["speedup"] / runner["speedup"] if runner else None,
                  "best_rival": rival["method"] if rival else None, "best_rival_speedup": rival["speedup"] if rival else None,
                  "best_copy": copy["method"] if copy else None, "best_copy_speedup": copy["speedup"] if copy else None,
                  "copy_over_rival": None, "copy_over_rival_ci_low": None, "copy_over_rival_ci_high": None}
        if rival and copy:
            pair = _paired(percase, source, corpus, pool, rival["method"], copy["method"])
            interval = ratio_of_sums_ci(pair["rival"], pair["copy"], resamples, seed, ci, strata=pair["strata"])
            record.update(copy_over_rival=float(pair["rival"].sum() / pair["copy"].sum()),
                          copy_over_rival_ci_low=interval.low, copy_over_rival_ci_high=interval.high)
        records.append(record)
    return pl.DataFrame(records, infer_schema_length=None).sort("kernel_source", "pool", "corpus")


def _paired(percase: pl.DataFrame, source: str, corpus: str, pool: str, rival: str, copy: str) -> dict:
    rows = percase.filter(pl.col("kernel_source") == source)
    if pool == PAPER_POOL:
        rows = paper_cases(rows)
    elif pool == PER_CORPUS_POOL:
        rows = rows.filter(pl.col("corpus") == corpus)
    wide = (rows.filter(pl.col("method").is_in([rival, copy])).pivot(on="method", index=["case_id", "corpus"],
                                                                      values="seconds").sort("corpus", "case_id"))
    return {"rival": wide[rival].to_numpy(), "copy": wide[copy].to_numpy(),
            "strata": wide["corpus"].to_numpy() if corpus == POOLED else None}


def percase_speedups(priced: pl.DataFrame) -> pl.DataFrame:
    """Per kernel source, case and method: its price, AR's price on the case and the speedup over it."""
    ar = priced.filter(pl.col("method") == AR).select("kernel_source", "case_id", "framing",
                                                       pl.col("seconds").alias("ar_seconds"))
    return priced.join(ar, on=["kernel_source", "case_id", "framing"], how="left", validate="m:1").with_columns(
        speedup=pl.col("ar_seconds") / pl.col("seconds"))


def summary_counts(forwards: pl.DataFrame) -> pl.DataFrame:
    """Per case and method: forwards, decode steps, prefill-type forwards (from the forwards table)."""
    return forwards.select(
        "case_id", "corpus", "framing", "method", "gold_tokens",
        forwards=pl.col("new_tokens").list.len().cast(pl.Int64),
        decode_steps=pl.col("prefill").list.eval(~pl.element()).list.sum().cast(pl.Int64),
    )


def headline_pairs(fast: pl.DataFrame) -> list[dict]:
    """The fastest rows as plain dicts (for the metrics file and the claims row)."""
    return [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()}
            for r in fast.iter_rows(named=True)]
