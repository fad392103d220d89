"""The fine-tuning pilot's tables and metrics, from its per-case records (torch-free; the stage and the
pilot notebook both call these, so the report and reports/metrics/pilot.json cannot disagree).

Definitions, stated once:
- exact match (EM): the resolved output equals the gold target, byte for byte; a case that could not
  run (its `error` is set) counts as a miss and is counted in `errors`.
- valid: the model ended a whole program (or rewrite) itself with EOS, before the budget forced the end.
- copy coverage: share of the output's characters written by copy directives (program mode only),
  averaged over the cases that ran.
- wall-clock ratio: per case, rewrite seconds / program seconds of the same adapter seed, measured back to
  back in a seeded order; reported as the median and IQR over cases (all cases, and the cases both got
  right), never as a ratio of totals.
"""

from __future__ import annotations

import polars as pl

KEYS = ["phase", "mode", "seed", "split"]


def em_table(records: pl.DataFrame) -> pl.DataFrame:
    """EM, validity, coverage and errors per phase, mode, seed and split."""
    return (records.group_by(KEYS, maintain_order=True)
            .agg(cases=pl.len(), exact_match=pl.col("exact_match").sum(), em=pl.col("exact_match").mean(),
                 valid=pl.col("valid").mean(), copy_coverage=pl.col("copy_coverage").mean(),
                 errors=pl.col("error").is_not_null().sum(),
                 median_s=pl.col("seconds").median(), median_tokens=pl.col("program_tokens").median())
            .sort(["split", "phase", "mode", "seed"], descending=[True, True, False, False], nulls_last=False))


def paired(records: pl.DataFrame) -> pl.DataFrame:
    """One row per (seed, case) where program and rewrite both ran back to back and neither failed."""
    both = records.filter(pl.col("paired") & pl.col("error").is_null())
    program = both.filter(pl.col("mode") == "program").select(
        "seed", "split", "case_id", pl.col("seconds").alias("program_s"),
        pl.col("exact_match").alias("program_em"), pl.col("program_tokens").alias("program_tokens"))
    rewrite = both.filter(pl.col("mode") == "rewrite").select(
        "seed", "split", "case_id", pl.col("seconds").alias("rewrite_s"),
        pl.col("exact_match").alias("rewrite_em"), pl.col("program_tokens").alias("rewrite_tokens"))
    return (program.join(rewrite, on=["seed", "split", "case_id"], how="inner")
            .with_columns(ratio=pl.col("rewrite_s") / pl.col("program_s")))


def _ratio_row(frame: pl.DataFrame, subset: str) -> dict:
    r = frame["ratio"]
    return {"subset": subset, "cases": frame.height,
            "ratio_median": r.median() if frame.height else None,
            "ratio_q25": r.quantile(0.25, "linear") if frame.height else None,
            "ratio_q75": r.quantile(0.75, "linear") if frame.height else None,
            "program_s_median": frame["program_s"].median() if frame.height else None,
            "rewrite_s_median": frame["rewrite_s"].median() if frame.height else None,
            "program_tokens_median": frame["program_tokens"].median() if frame.height else None,
            "rewrite_tokens_median": frame["rewrite_tokens"].median() if frame.height else None}


SPEED_SCHEMA = {"seed": pl.Int64, "subset": pl.Utf8, "cases": pl.Int64, "ratio_median": pl.Float64,
                "ratio_q25": pl.Float64, "ratio_q75": pl.Float64, "program_s_median": pl.Float64,
                "rewrite_s_median": pl.Float64, "program_tokens_median": pl.Float64,
                "rewrite_tokens_median": pl.Float64}


def speed_table(records: pl.DataFrame) -> pl.DataFrame:
    """Per paired seed: the per-case wall-clock ratio over all cases and over the cases both got right."""
    pairs = paired(records)
    rows = []
    for seed in sorted(pairs["seed"].unique().to_list()):
        mine = pairs.filter(pl.col("seed") == seed)
        rows.append({"seed": seed, **_ratio_row(mine, "all cases")})
        rows.append({"seed": seed, **_ratio_row(mine.filter(pl.col("program_em") & pl.col("rewrite_em")),
                                                "both exact")})
    return pl.DataFrame(rows, schema=SPEED_SCHEMA)


def _summary(rows: pl.DataFrame) -> dict:
    if rows.is_empty():
        return {"cases": 0}
    return {"cases": rows.height, "exact_match": int(rows["exact_match"].sum()), "em": rows["exact_match"].mean(),
            "valid": rows["valid"].mean(), "copy_coverage": rows["copy_coverage"].mean(),
            "errors": int(rows["error"].is_not_null().sum())}


def _per_seed(records: pl.DataFrame, mode: str, split: str) -> dict:
    rows = records.filter((pl.col("phase") == "after") & (pl.col("mode") == mode) & (pl.col("split") == split))
    return {str(seed): _summary(rows.filter(pl.col("seed") == seed)) for seed in sorted(rows["seed"].unique().to_list())}


def em_range(per_seed: dict) -> list[float] | None:
    ems = [v["em"] for v in per_seed.values() if v.get("cases")]
    return [min(ems), max(ems)] if ems else None


def metrics(records: pl.DataFrame, losses: pl.DataFrame, s, kept: dict, weights_note: str) -> dict:
    """reports/metrics/pilot.json: settings, before/after EM per seed, rewrite, HEvalFix-Py, speed."""
    before = records.filter((pl.col("phase") == "before") & (pl.col("split") == "heldout"))
    program = _per_seed(records, "program", "heldout")
    speed = speed_table(records)
    final_loss = (losses.group_by("mode", "seed").agg(pl.col("loss").tail(10).mean().alias("last10"))
                  .sort("mode", "seed"))
    return {
        "model": s.model, "weights": s.weights, "weights_note": weights_note, "dtype": s.dtype, "device": s.device,
        "threads": s.threads, "method": "LoRA (peft) rank {r}, alpha {a} on {t}; AdamW lr {lr}, {n} steps of one "
        "sequence; greedy decoding under the grammar FSM".format(r=s.lora_rank, a=s.lora_alpha,
                                                                 t=", ".join(s.lora_targets), lr=s.lr, n=s.steps),
        "steps": s.steps, "lr": s.lr, "seeds": list(s.seeds), "rewrite_seeds": list(s.rewrite_seeds),
        "train_sequences": kept, "data": {"n_train": s.data.n_train, "n_heldout": s.data.n_heldout,
                                          "min_lines": s.data.min_lines, "max_lines": s.data.max_lines,
                                          "heldout_files": s.data.heldout_files, "seed": s.data.seed},
        "budget": f"gold target tokens (or oracle program tokens, if more) + {s.budget_margin} + EOS",
        "before": _summary(before),
        "after_program": program, "after_program_em_range": em_range(program),
        "after_rewrite": _per_seed(records, "rewrite", "heldout"),
        "humaneval": _per_seed(records, "program", "HEvalFix-Py"),
        "speed": speed.to_dicts(),
        "final_loss": final_loss.to_dicts(),
    }


def examples(records: pl.DataFrame, seed: int, n: int = 3, split: str = "heldout") -> pl.DataFrame:
    """Up to `n` programs the seed's adapter got right and `n` it got wrong (first by case order)."""
    mine = records.filter((pl.col("phase") == "after") & (pl.col("mode") == "program") & (pl.col("seed") == seed)
                          & (pl.col("split") == split) & pl.col("error").is_null())
    right = mine.filter(pl.col("exact_match")).head(n)
    wrong = mine.filter(~pl.col("exact_match")).head(n)
    return (pl.concat([right, wrong]).with_columns(result=pl.when(pl.col("exact_match")).then(pl.lit("right"))
                                                   .otherwise(pl.lit("wrong")))
            .select("result", "case_id", "kind", "valid", "copy_coverage", "program"))


def headline(m: dict) -> list[tuple[str, str]]:
    """The pilot's figures for a report lead and the summary claim, formatted (from metrics only)."""
    from analysis.numbers import fmt_pct, fmt_x

    def em(summary: dict) -> str:
        return f"{summary.get('exact_match', 0)} / {summary.get('cases', 0)}" if summary.get("cases") else "not run"

    rng = m.get("after_program_em_range")
    rows = [("held-out EM before fine-tuning", em(m["before"])),
            (f"held-out EM after ({len(m['after_program'])} seeds)",
             f"{fmt_pct(rng[0])} to {fmt_pct(rng[1])}" if rng else "not run")]
    for seed, summary in m.get("after_rewrite", {}).items():
        rows.append((f"rewrite adapter EM (seed {seed})", em(summary)))
    for seed, summary in m.get("humaneval", {}).items():
        rows.append((f"HEvalFix-Py EM after (seed {seed})", em(summary)))
    for row in m.get("speed", []):
        if row["subset"] == "all cases" and row["cases"]:
            spread = f"IQR {fmt_x(row['ratio_q25'], 2)} to {fmt_x(row['ratio_q75'], 2)}"
            rows.append((f"program vs rewrite wall-clock, per case (seed {row['seed']})",
                         f"{fmt_x(row['ratio_median'], 2)} ({spread})"))
    return rows
