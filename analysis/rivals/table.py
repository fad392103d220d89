"""The rivals tables: every method's per-case price under every kernel source, pooled per corpus and pool,
and which deployable method is fastest where.

Per case the speedup of a method is AR's price over the method's, both from analysis.rivals.pricing under
one kernel source. A corpus's figure is the ratio of sums (summed AR time over summed method time) over its
cases with a percentile case bootstrap (analysis.stats; the same seed for every method, so the resamples
are paired across methods); the pools are the paper's three corpora (`paper`, 482 cases with the
ProbeEdit-S stand-in) and every corpus of the run (`all`), each resampled within corpora.

`fastest` names, per kernel source and corpus or pool, the fastest method a deployment can run and its margin
over the runner-up, the fastest method of another family (a sibling setting of the same method, e.g. prompt lookup
at another k, is no rival to it), and sets Copy-as-Decode's best deployable variant beside the best rival, with a
paired bootstrap interval of their ratio. Deployable (`deployable`): not a bound (an `ideal` program, whose
directive tokens are free, or drafts without a budget, which no engine serves) and a draft budget k no larger than
params rivals.deployable_k_max (what engines ship: llama.cpp's n-gram drafters are recommended at 48-64 tokens).
The best rival and Copy-as-Decode's best variant are each chosen per corpus or pool after pricing, among every
deployable setting the run simulated: the paired interval is conditional on that choice.

`with_band` adds the ratio's extrapolation band: the same choice, ratio and paired interval under each rule past the
profiled N (params bounds.prefill_past_n's `marginal` and `linear`, the lowest and highest defensible; the judged
figure is one of them), `copy_over_rival_band_low/_high` and `copy_over_rival_<rule>_ci_low/_high`, which the claims
layer reads (analysis.claims.decision). `crossover`
names, per rival family (and match policy) with a draft budget, the k at which it overtakes Copy-as-Decode's best.
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
    """family, label, role (analysis.rivals.methods: baseline, copy, bound, rival), draft budget `k` (null: none or
    unbounded) and `rival_group` (the family, with prompt lookup's match policy) of each row's method."""
    methods = [parse_method(n) for n in frame["method"].unique().to_list()]
    info = pl.DataFrame({
        "method": [m.name for m in methods],
        "family": [m.family for m in methods],
        "label": [m.label for m in methods],
        "role": [m.role for m in methods],
        "k": [m.k for m in methods],
        "rival_group": [m.family if m.policy is None else f"{m.family}-{m.policy}" for m in methods],
    }, schema_overrides={"k": pl.Int64})
    return frame.join(info, on="method", how="left")


def deployable(k_max: int) -> pl.Expr:
    """A row a deployment can run (module docstring): Copy-as-Decode or a rival, not a bound, k <= k_max."""
    return pl.col("role").is_in(["copy", "rival"]) & (pl.col("k").is_null() | (pl.col("k") <= k_max))


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
    per case, gold tokens per forward, decode steps per case, the share of forwards priced by extrapolation and
    that share by cause: a prefill past the profiled N (`extrapolated_n_share`), a context outside the profiled
    ones (`extrapolated_context_share`: held at the one profiled context, or extended), a batch past the measured
    one (`extrapolated_batch_share`: 0, every forward here runs at batch 1, as measured)."""
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
                "extrapolated_n_share": float(part["extrapolated_n_forwards"].sum()) / forwards,
                "extrapolated_context_share": float(part["extrapolated_context_forwards"].sum()) / forwards,
                "extrapolated_batch_share": 0.0,
            })
    return method_columns(pl.DataFrame(records)).select(
        "kernel_source", "corpus", "pool", "method", "family", "role", "label", "k", "rival_group", "n_cases",
        "speedup", "ci_low", "ci_high", "forwards_per_case", "gold_tokens_per_forward", "decode_steps_per_case",
        "extrapolated_share", "extrapolated_n_share", "extrapolated_context_share", "extrapolated_batch_share")


def point_speedups(percase: pl.DataFrame) -> pl.DataFrame:
    """Per kernel source, method and corpus or pool: the speedup alone (ratio of sums, no interval), with the
    method columns: what the extrapolation band compares under each rule."""
    records = []
    ordered = percase.sort("kernel_source", "method", "corpus", "case_id")
    for (source, method), rows in ordered.group_by(list(GROUP_KEYS), maintain_order=True):
        for corpus, pool, part in groups(rows):
            records.append({"kernel_source": source, "method": method, "corpus": corpus, "pool": pool,
                            "speedup": float(part["ar_seconds"].sum() / part["seconds"].sum())})
    return method_columns(pl.DataFrame(records))


def _best(rows: pl.DataFrame) -> dict | None:
    return rows.sort("speedup", descending=True).row(0, named=True) if rows.height else None


def fastest(table: pl.DataFrame, percase: pl.DataFrame, resamples: int, seed: int, ci: float,
            k_max: int) -> pl.DataFrame:
    """Per kernel source and corpus or pool: the fastest deployable method (`deployable`) and its margin over the
    runner-up (the fastest of another family); the best rival and Copy-as-Decode's best deployable variant,
    with the paired bootstrap interval of Copy-as-Decode's speedup over that rival (summed rival time over
    summed Copy-as-Decode time), and how many deployable settings each was chosen among."""
    records = []
    runnable = table.filter(deployable(k_max))
    for (source, corpus, pool), rows in runnable.group_by(["kernel_source", "corpus", "pool"], maintain_order=True):
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
                  "rival_settings": int((rows["role"] == "rival").sum()), "copy_settings": int((rows["role"] == "copy").sum()),
                  "deployable_k_max": k_max,
                  "copy_over_rival": None, "copy_over_rival_ci_low": None, "copy_over_rival_ci_high": None}
        if rival and copy:
            pair = _paired(percase, source, corpus, pool, rival["method"], copy["method"])
            interval = ratio_of_sums_ci(pair["rival"], pair["copy"], resamples, seed, ci, strata=pair["strata"])
            record.update(copy_over_rival=float(pair["rival"].sum() / pair["copy"].sum()),
                          copy_over_rival_ci_low=interval.low, copy_over_rival_ci_high=interval.high)
        records.append(record)
    return pl.DataFrame(records, infer_schema_length=None).sort("kernel_source", "pool", "corpus")


def best_pair_intervals(percase: pl.DataFrame, k_max: int, resamples: int, seed: int, ci: float) -> pl.DataFrame:
    """Per kernel source and corpus or pool: Copy-as-Decode's best deployable speedup over the best deployable
    rival's (`copy_over_rival`, the same choice `fastest` makes, from point speedups) and its paired case-bootstrap
    interval (`_ci_low`, `_ci_high`), all under the pricing `percase` was priced with."""
    runnable = point_speedups(percase).filter(deployable(k_max))
    records = []
    for (source, corpus, pool), rows in runnable.group_by(["kernel_source", "corpus", "pool"], maintain_order=True):
        rival, copy = _best(rows.filter(pl.col("role") == "rival")), _best(rows.filter(pl.col("role") == "copy"))
        if not (rival and copy):
            continue
        pair = _paired(percase, source, corpus, pool, rival["method"], copy["method"])
        interval = ratio_of_sums_ci(pair["rival"], pair["copy"], resamples, seed, ci, strata=pair["strata"])
        records.append({"kernel_source": source, "corpus": corpus, "pool": pool,
                        "copy_over_rival": float(pair["rival"].sum() / pair["copy"].sum()),
                        "copy_over_rival_ci_low": interval.low, "copy_over_rival_ci_high": interval.high})
    return pl.DataFrame(records, schema={"kernel_source": pl.String, "corpus": pl.String, "pool": pl.String,
                                         "copy_over_rival": pl.Float64, "copy_over_rival_ci_low": pl.Float64,
                                         "copy_over_rival_ci_high": pl.Float64})


def with_band(fast: pl.DataFrame, pairs_by_rule: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """`fast` with the extrapolation band of copy_over_rival: its lowest and highest value over the pricing rules
    past the profiled N (`pairs_by_rule`: `best_pair_intervals` under each), and the value and paired interval under
    each rule (`copy_over_rival_<rule>`, `copy_over_rival_<rule>_ci_low/_high`), which the verdict reads: a ranking
    that one rule's interval decides and another's does not, or reverses, depends on the pricing assumption."""
    keys = ["kernel_source", "corpus", "pool"]
    out = fast
    for rule, pairs in pairs_by_rule.items():
        out = out.join(pairs.rename({c: c.replace("copy_over_rival", f"copy_over_rival_{rule}", 1)
                                     for c in pairs.columns if c not in keys}), on=keys, how="left")
    columns = [f"copy_over_rival_{rule}" for rule in pairs_by_rule]
    return out.with_columns(copy_over_rival_band_low=pl.min_horizontal(columns),
                            copy_over_rival_band_high=pl.max_horizontal(columns))


def flip_point(speedups: dict[int | None, float], copy_speedup: float) -> tuple[int | None, int | None, bool | None]:
    """Where a rival family's draft budget k overtakes Copy-as-Decode (speedups over AR by k; None: unbounded):
    the largest bounded k it still beats below the first that passes it, the smallest that passes it, and whether
    unbounded drafts pass it (None: no unbounded row)."""
    bounded = sorted(k for k in speedups if k is not None)
    passing = [k for k in bounded if speedups[k] > copy_speedup]
    loses_from = min(passing) if passing else None
    wins = [k for k in bounded if speedups[k] <= copy_speedup and (loses_from is None or k < loses_from)]
    unbounded = speedups[None] > copy_speedup if None in speedups else None
    return (max(wins) if wins else None), loses_from, unbounded


def crossover(table: pl.DataFrame, k_max: int) -> pl.DataFrame:
    """Per kernel source, corpus or pool and rival group with a draft budget (prompt lookup per match policy,
    suffix decoding, ...): Copy-as-Decode's best deployable speedup, the rival's speedup at each k, and where the
    ranking flips (`flip_point`): Copy-as-Decode still faster up to k = `copy_wins_up_to`, the rival faster from
    k = `rival_wins_from` (null: at no simulated k), and whether drafts without a budget (a bound) pass it."""
    records = []
    keys = ["kernel_source", "corpus", "pool"]
    for (source, corpus, pool), rows in table.group_by(keys, maintain_order=True):
        copies = rows.filter(deployable(k_max) & (pl.col("role") == "copy"))
        if copies.height == 0:
            continue
        best = copies.sort("speedup", descending=True).row(0, named=True)
        budgeted = rows.filter(pl.col("role").is_in(["rival", "bound"]) & (pl.col("family") != "copy")
                               & pl.col("rival_group").is_in(rows.filter(pl.col("k").is_not_null())["rival_group"].unique().to_list()))
        for (group,), members in budgeted.group_by(["rival_group"], maintain_order=True):
            speedups = {r["k"]: float(r["speedup"]) for r in members.iter_rows(named=True)}
            wins, loses, unbounded = flip_point(speedups, float(best["speedup"]))
            records.append({"kernel_source": source, "corpus": corpus, "pool": pool, "rival_group": group,
                            "best_copy": best["method"], "best_copy_speedup": float(best["speedup"]),
                            "ks": ", ".join(str(k) for k in sorted(k for k in speedups if k is not None)),
                            "copy_wins_up_to": wins, "rival_wins_from": loses, "unbounded_passes": unbounded,
                            "rival_speedup_at_cap": max((v for k, v in speedups.items() if k is not None and k <= k_max),
                                                        default=None)})
    schema = {"copy_wins_up_to": pl.Int64, "rival_wins_from": pl.Int64, "unbounded_passes": pl.Boolean,
              "rival_speedup_at_cap": pl.Float64}
    return pl.DataFrame(records, schema_overrides=schema, infer_schema_length=None).sort(
        "kernel_source", "pool", "corpus", "rival_group") if records else pl.DataFrame()


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
