"""The fine-tuning pilot's tables and metrics, from its per-case records (torch-free; the stage and the
pilot notebook both call these, so the report and reports/metrics/pilot.json cannot disagree).

Definitions, stated once:
- exact match (EM): the resolved output equals the gold target, byte for byte; a case that could not
  run (its `error` is set) counts as a miss and is counted in `errors`.
- stopped on its own (`valid`, `stopped` == "eos"): the model ended a whole program (or rewrite) itself
  with EOS. Cut off: the budget ended it (`stopped` "forced": the walker's margin forced the program's
  completion and its EOS; "budget": a rewrite ran out). Reported as two counts, never merged.
- copy coverage: share of the output's tokens written by copy directives (the model's tokenizer, a token
  counting for the op in which its first byte lies, as analysis.coverage.spans), averaged over the cases that ran.
- teacher-forced metrics (kernels_profile.pilot.train.ForcedMetrics): one forward per held-out case with the
  gold sequence; loss per supervised token, directive-token accuracy, share of copy directives and gen
  spans whose every token is the argmax, share of whole programs so (a lower bound on greedy EM).
- uncertainty of an EM count (k of n cases): a 95% Clopper-Pearson interval; a before/after difference:
  the exact McNemar test on the paired outcomes (the same cases before and after; cases right only
  before vs right only after), "not significant" when p >= analysis.stats.SIGNIFICANCE. When the paired
  outcomes were not recorded (older metrics) they follow from the counts if either side is 0 of n.
- wall-clock ratio: per case, rewrite seconds / program seconds of the same adapter seed, measured back to
  back in a seeded order; reported as the median and IQR over cases (all cases, and the cases both got
  right), never as a ratio of totals.
- gain over copy (the Copy Ceiling's control, analysis.coverage.copyinput): beside EM, what returning the input
  unchanged scores on the same cases (`copy_em`) and the difference (`em_gain_over_copy`); beside it the
  gold-line recall of the outputs (`line_recall`, a case that could not run scores 0), the input's
  (`copy_line_recall`) and their difference (`line_recall_gain_over_copy`): a negative gain says copying the
  input would have kept more of the target than the model did.
"""

from __future__ import annotations

import polars as pl

from analysis.coverage.copyinput import line_recall
from analysis.pilot.data import run_task
from analysis.stats import SIGNIFICANCE, clopper_pearson, mcnemar_exact, quartiles
from analysis.errors import CorpusError
from analysis.results.numbers import fmt_pct, fmt_x

KEYS = ["phase", "mode", "seed", "split"]


def em_interval(k: int | None, n: int | None) -> tuple[float | None, float | None]:
    """95% Clopper-Pearson interval of k exact matches in n cases; (None, None) when not measured."""
    if k is None or not n:
        return None, None
    return clopper_pearson(int(k), int(n))


def with_em_interval(frame: pl.DataFrame, count: str, cases: str, prefix: str) -> pl.DataFrame:
    """`frame` with <prefix>_ci_low / <prefix>_ci_high: the 95% interval of count/cases per row."""
    ends = [em_interval(k, n) for k, n in zip(frame[count].to_list(), frame[cases].to_list())]
    return frame.with_columns(pl.Series(f"{prefix}_ci_low", [e[0] for e in ends], dtype=pl.Float64),
                              pl.Series(f"{prefix}_ci_high", [e[1] for e in ends], dtype=pl.Float64))


def paired_outcomes(records: pl.DataFrame, split: str) -> dict[str, dict]:
    """Per decoded program seed: the same cases before and after fine-tuning, counted by outcome
    (before_only and after_only are McNemar's discordant pairs); {} when the split was not decoded."""
    base = records.filter((pl.col("phase") == "before") & (pl.col("mode") == "program") & (pl.col("split") == split))
    after = records.filter((pl.col("phase") == "after") & (pl.col("mode") == "program") & (pl.col("split") == split))
    base = base.select("case_id", pl.col("exact_match").fill_null(False).alias("before"))
    out = {}
    for seed in sorted(after["seed"].drop_nulls().unique().to_list()):
        mine = after.filter(pl.col("seed") == seed).select("case_id", pl.col("exact_match").fill_null(False).alias("after"))
        both = base.join(mine, on="case_id", how="inner")
        out[str(seed)] = {"cases": both.height,
                          "both": int((both["before"] & both["after"]).sum()),
                          "before_only": int((both["before"] & ~both["after"]).sum()),
                          "after_only": int((~both["before"] & both["after"]).sum()),
                          "neither": int((~both["before"] & ~both["after"]).sum())}
    return out


def discordant(m: dict, split: str, seed: str) -> tuple[int, int] | None:
    """McNemar's discordant pairs (right only before, right only after) of one seed on a split ("heldout"
    or "humaneval"), from the recorded paired outcomes, else from the counts when either side is 0 of n
    (then every hit on the other side is discordant); None when neither says."""
    recorded = ((m.get(f"{split}_paired") or {}).get(str(seed))) or None
    if recorded:
        return recorded["before_only"], recorded["after_only"]
    before, after = m.get(f"{split}_em_before"), (m.get(f"{split}_em_after") or {}).get(str(seed))
    if before is None or after is None:
        return None
    if before == 0:
        return 0, int(after)
    if after == 0:
        return int(before), 0
    return None


def mcnemar_p(m: dict, split: str, seed: str) -> float | None:
    pairs = discordant(m, split, seed)
    return None if pairs is None else mcnemar_exact(*pairs)


def significance(p: float | None) -> str | None:
    return None if p is None else ("significant" if p < SIGNIFICANCE else "not significant")


def em_change_text(m: dict, split: str, seed: str) -> str:
    """'0 / 33 -> 2 / 33 (after 6.1%, 95% CI [0.7%, 20.2%]; McNemar exact p = 0.5, not significant)'."""
    n = m.get(f"{split}_cases")
    before, after = m.get(f"{split}_em_before"), (m.get(f"{split}_em_after") or {}).get(str(seed))
    if not n or after is None:
        return "not run"
    low, high = em_interval(after, n)
    text = f"{before if before is not None else '?'} / {n} -> {after} / {n} (after {fmt_pct(after / n)}, 95% CI " \
           f"[{fmt_pct(low)}, {fmt_pct(high)}]"
    p = mcnemar_p(m, split, seed)
    return text + (f"; McNemar exact p = {p:.2g}, {significance(p)})" if p is not None else
                   "; paired outcomes not recorded, no McNemar test)")


def em_table(records: pl.DataFrame, copies: pl.DataFrame | None = None) -> pl.DataFrame:
    """EM (with its 95% Clopper-Pearson interval), validity, coverage and errors per phase, mode, seed and split;
    with `copies` (analysis.coverage.copyinput.copy_scores of the cases decoded), the gain over copying the input."""
    table = with_em_interval(_em_table(records), "exact_match", "cases", "em")
    return table if copies is None else table.join(gain_over_copy(records, copies), on=KEYS, how="left",
                                                   nulls_equal=True)


def copy_metrics(copies: pl.DataFrame) -> dict[str, dict]:
    """Per split: cases, how many copying the input solves exactly and its mean gold-line recall (pilot.json)."""
    return {split: {"cases": rows.height, "exact_match": int(rows["copy_exact"].sum()),
                    "line_recall": float(rows["copy_line_recall"].mean())}
            for (split,), rows in copies.group_by("split", maintain_order=True)}


def gain_over_copy(records: pl.DataFrame, copies: pl.DataFrame) -> pl.DataFrame:
    """Per phase, mode, seed and split: EM and gold-line recall beside what copying the input scores on the same
    cases (module docstring); a record whose case `copies` lacks is a CorpusError naming it."""
    joined = records.join(copies, on=["split", "case_id"], how="left")
    missing = joined.filter(pl.col("target").is_null())
    if missing.height:
        raise CorpusError(f"pilot: no copy baseline for {missing['split'][0]}/{missing['case_id'][0]} "
                          f"({missing.height} records): the copies must cover every decoded case")
    recall = [line_recall(None if error is not None else output, target) for output, target, error
              in zip(joined["output"].to_list(), joined["target"].to_list(), joined["error"].to_list())]
    return (joined.with_columns(line_recall=pl.Series(recall, dtype=pl.Float64))
            .group_by(KEYS, maintain_order=True)
            .agg(copy_em=pl.col("copy_exact").cast(pl.Float64).mean(),
                 em_gain_over_copy=(pl.col("exact_match").fill_null(False).cast(pl.Float64)
                                    - pl.col("copy_exact").cast(pl.Float64)).mean(),
                 line_recall=pl.col("line_recall").mean(), copy_line_recall=pl.col("copy_line_recall").mean(),
                 line_recall_gain_over_copy=(pl.col("line_recall") - pl.col("copy_line_recall")).mean()))


def _em_table(records: pl.DataFrame) -> pl.DataFrame:
    return (records.group_by(KEYS, maintain_order=True)
            .agg(cases=pl.len(), exact_match=pl.col("exact_match").sum(), em=pl.col("exact_match").mean(),
                 valid=pl.col("valid").mean(), stopped=(pl.col("stopped") == "eos").sum(),
                 cut_off=pl.col("stopped").is_in(["forced", "budget"]).sum(),
                 copy_coverage=pl.col("copy_coverage").mean(),
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
    spread = (frame.select(quartiles("ratio", "ratio_median", "ratio_q25", "ratio_q75")).row(0, named=True)
              if frame.height else dict.fromkeys(("ratio_median", "ratio_q25", "ratio_q75")))
    return {"subset": subset, "cases": frame.height, **spread,
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
            "valid": rows["valid"].mean(), "stopped": int((rows["stopped"] == "eos").sum()),
            "cut_off": int(rows["stopped"].is_in(["forced", "budget"]).sum()),
            "copy_coverage": rows["copy_coverage"].mean(), "errors": int(rows["error"].is_not_null().sum())}


def _per_seed(records: pl.DataFrame, mode: str, split: str) -> dict:
    rows = records.filter((pl.col("phase") == "after") & (pl.col("mode") == mode) & (pl.col("split") == split))
    return {str(seed): _summary(rows.filter(pl.col("seed") == seed)) for seed in sorted(rows["seed"].unique().to_list())}


def em_range(per_seed: dict) -> list[float] | None:
    ems = [v["em"] for v in per_seed.values() if v.get("cases")]
    return [min(ems), max(ems)] if ems else None


def curve_table(curve: pl.DataFrame) -> pl.DataFrame:
    """The teacher-forced held-out curve, one row per adapter and step (step 0: the base model)."""
    return curve.sort("mode", "seed", "step")


def _forced(curve: pl.DataFrame, mode: str, seed: int | None, last: bool) -> dict | None:
    rows = curve.filter(pl.col("mode") == mode)
    if seed is not None:
        rows = rows.filter(pl.col("seed") == seed)
    if rows.is_empty():
        return None
    row = rows.sort("step").row(-1 if last else 0, named=True)
    return {k: v for k, v in row.items() if k not in ("mode", "seed")}


def _em_count(summary: dict | None) -> int | None:
    return summary.get("exact_match") if summary and summary.get("cases") else None


def stopped_counts(records: pl.DataFrame) -> list[dict]:
    """Per phase, mode, seed and split: cases, stopped on their own, cut off by the budget, errors."""
    return (records.group_by(KEYS, maintain_order=True)
            .agg(cases=pl.len(), stopped=(pl.col("stopped") == "eos").sum(),
                 cut_off=pl.col("stopped").is_in(["forced", "budget"]).sum(),
                 errors=pl.col("error").is_not_null().sum())
            .sort(["split", "phase", "mode", "seed"], descending=[True, True, False, False]).to_dicts())


def _seeds(seeds) -> str:
    return "seed" + ("s " if len(seeds) > 1 else " ") + ", ".join(str(x) for x in seeds)


def decoding_plan(s) -> str:
    """Which adapters decode what, in words: every program seed gets teacher-forced held-out metrics, only
    these get greedy decodes (the rest of the stage's time goes to training)."""
    parts = [f"{HELDOUT_NAME[s.data.task]}: base model and program {_seeds(s.decode_seeds)}"]
    if s.rewrite_seeds:
        parts.append(f"rewrite {_seeds(s.rewrite_seeds)} on the {HELDOUT_NAME[s.data.task]}, paired per case")
    else:
        parts.append("no rewrite adapter")
    if s.humaneval_seeds and s.humaneval_cases:
        parts.append(f"HEvalFix-Py ({s.humaneval_cases} cases): base model and program {_seeds(s.humaneval_seeds)}")
    else:
        parts.append("no HEvalFix-Py decoding")
    rest = sorted(set(s.seeds) - set(s.decode_seeds))
    if rest:
        parts.append(f"program {_seeds(rest)}: teacher-forced metrics only")
    return "; ".join(parts)


# pilot.task -> what its training cases are (metrics "scale" and "trained_on")
TASK_DATA = {"edit": "worded line edits", "bugfix": "synthetic bug fixes"}
TRAINED_ON = {"edit": "worded line edits (the ProbeEdit-S recipe on pinned-stdlib functions), not bug fixes",
              "bugfix": "synthetic bug fixes (seeded mutations of HumanEvalFix's bug types in pinned-stdlib "
                        "functions, asked \"Fix bugs in <function>.\"), the task HEvalFix-Py measures"}
HELDOUT_NAME = {"edit": "held-out edits", "bugfix": "held-out bug fixes"}


def training_note(m: dict) -> str:
    """What the adapters were trained on and what that makes the HEvalFix-Py row measure."""
    if run_task(m) == "bugfix":
        return (f"The adapters were trained on {m.get('trained_on', TRAINED_ON['bugfix'])} (on functions disjoint "
                "from every evaluation case), so the HEvalFix-Py row measures the trained task on unseen code")
    return (f"The adapters were trained on {m.get('trained_on', 'worded line edits')}, so the HEvalFix-Py row "
            "measures transfer to a task never trained on")


def metrics(records: pl.DataFrame, losses: pl.DataFrame, s, kept: dict, weights_note: str,
            curve: pl.DataFrame | None = None) -> dict:
    """reports/metrics/pilot.json: settings, before/after EM per seed, rewrite, HEvalFix-Py, speed, and the
    teacher-forced curve. Plain keys for readers (the claims table): heldout_em_before, heldout_em_after
    (exact matches per decoded seed), heldout_cases, humaneval_em_before, humaneval_em_after, humaneval_cases,
    teacher_forced_before / teacher_forced_after, curve, stopped_counts."""
    curve = curve if curve is not None else pl.DataFrame()
    before = records.filter((pl.col("phase") == "before") & (pl.col("split") == "heldout"))
    he_before = records.filter((pl.col("phase") == "before") & (pl.col("split") == "HEvalFix-Py"))
    program = _per_seed(records, "program", "heldout")
    humaneval = _per_seed(records, "program", "HEvalFix-Py")
    speed = speed_table(records)
    final_loss = (losses.group_by("mode", "seed").agg(pl.col("loss").tail(10).mean().alias("last10"))
                  .sort("mode", "seed"))
    schedule = f"{s.schedule} decay" if s.schedule != "constant" else "constant"
    steps_text = (f"{s.steps} steps of {s.batch} sequence{'s' if s.batch > 1 else ''}, lr {s.lr} "
                  f"({s.warmup} warmup steps, then {schedule})")
    modes = sorted(set(curve["mode"].to_list())) if curve.height else []
    forced_after = {m: {str(seed): _forced(curve, m, seed, last=True)
                        for seed in sorted(set(curve.filter(pl.col("mode") == m)["seed"].to_list()))} for m in modes}
    return {
        "model": s.model, "weights": s.weights, "weights_note": weights_note, "dtype": s.dtype, "device": s.device,
        "threads": s.threads, "method": "LoRA (peft) rank {r}, alpha {a} on {t}; AdamW, {st}; greedy decoding "
        "under the grammar FSM ({d})".format(r=s.lora_rank, a=s.lora_alpha, t=", ".join(s.lora_targets), st=steps_text,
                                            d=decoding_plan(s)),
        "decoding": decoding_plan(s),
        "task": s.data.task,
        "scale": f"{s.model} (135M parameters) on CPU, {s.steps} LoRA steps on {s.data.n_train} {TASK_DATA[s.data.task]}",
        "steps": s.steps, "lr": s.lr, "warmup": s.warmup, "schedule": s.schedule, "batch": s.batch,
        "seeds": list(s.seeds), "decode_seeds": list(s.decode_seeds), "rewrite_seeds": list(s.rewrite_seeds),
        "train_sequences": kept, "data": {"n_train": s.data.n_train, "n_heldout": s.data.n_heldout,
                                          "min_lines": s.data.min_lines, "max_lines": s.data.max_lines,
                                          "heldout_files": s.data.heldout_files, "seed": s.data.seed},
        "trained_on": TRAINED_ON[s.data.task],
        "budget": f"gold target tokens (or oracle program tokens, if more) + {s.budget_margin} + EOS",
        "before": _summary(before),
        "after_program": program, "after_program_em_range": em_range(program),
        "after_rewrite": _per_seed(records, "rewrite", "heldout"),
        "humaneval": humaneval,
        "humaneval_before": _summary(he_before),
        "humaneval_instruction": "HumanEvalFix's own: the buggy function ({} framing) and "
                                 "\"Fix bugs in <function>.\"".format(s.humaneval_framing),
        "speed": speed.to_dicts(),
        "final_loss": final_loss.to_dicts(),
        # plain names (the claims table and the README read these)
        "heldout_cases": before.height,
        "heldout_em_before": _em_count(_summary(before)),
        "heldout_em_after": {seed: _em_count(v) for seed, v in program.items()},
        "heldout_em_after_max": max((v["exact_match"] for v in program.values() if v.get("cases")), default=None),
        "humaneval_cases": he_before.height,
        "humaneval_em_before": _em_count(_summary(he_before)),
        "humaneval_em_after": {seed: _em_count(v) for seed, v in humaneval.items()},
        "teacher_forced_before": {m: _forced(curve, m, None, last=False) for m in modes},
        "teacher_forced_after": forced_after,
        "curve": curve_table(curve).to_dicts() if curve.height else [],
        "stopped_counts": stopped_counts(records),
        "heldout_paired": paired_outcomes(records, "heldout"),
        "humaneval_paired": paired_outcomes(records, "HEvalFix-Py"),
    }


def before_after_table(m: dict) -> pl.DataFrame:
    """The pilot's before/after table: held-out EM and teacher-forced metrics of each program adapter seed,
    HEvalFix-Py EM, each against the base model."""
    rows = []
    n, he_n = m.get("heldout_cases") or 0, m.get("humaneval_cases") or 0
    before = (m.get("teacher_forced_before") or {}).get("program") or {}
    for seed, after in sorted(((m.get("teacher_forced_after") or {}).get("program") or {}).items()):
        em_after = (m.get("heldout_em_after") or {}).get(seed)
        he_after = (m.get("humaneval_em_after") or {}).get(seed)
        rows.append({"seed": int(seed), "steps": m.get("steps"),
                     "heldout_em_before": m.get("heldout_em_before"), "heldout_em_after": em_after,
                     "heldout_cases": n,
                     "loss_before": before.get("loss"), "loss_after": after.get("loss"),
                     "directive_accuracy_before": before.get("directive_accuracy"),
                     "directive_accuracy_after": after.get("directive_accuracy"),
                     "copy_exact_before": before.get("copy_exact"), "copy_exact_after": after.get("copy_exact"),
                     "gen_exact_before": before.get("gen_exact"), "gen_exact_after": after.get("gen_exact"),
                     "forced_exact_before": before.get("all_exact"), "forced_exact_after": after.get("all_exact"),
                     "humaneval_em_before": m.get("humaneval_em_before") if he_after is not None else None,
                     "humaneval_em_after": he_after, "humaneval_cases": he_n if he_after is not None else None,
                     **significance_columns(m, seed)})
    schema = {"seed": pl.Int64, "steps": pl.Int64, "heldout_em_before": pl.Int64, "heldout_em_after": pl.Int64,
              "heldout_cases": pl.Int64, "loss_before": pl.Float64, "loss_after": pl.Float64,
              "directive_accuracy_before": pl.Float64, "directive_accuracy_after": pl.Float64,
              "copy_exact_before": pl.Float64, "copy_exact_after": pl.Float64, "gen_exact_before": pl.Float64,
              "gen_exact_after": pl.Float64, "forced_exact_before": pl.Float64, "forced_exact_after": pl.Float64,
              "humaneval_em_before": pl.Int64, "humaneval_em_after": pl.Int64, "humaneval_cases": pl.Int64}
    return pl.DataFrame(rows, schema={**schema, **SIGNIFICANCE_SCHEMA})


SIGNIFICANCE_SCHEMA = {f"{split}_{column}": dtype for split in ("heldout", "humaneval")
                       for column, dtype in (("em_after_ci_low", pl.Float64), ("em_after_ci_high", pl.Float64),
                                             ("mcnemar_p", pl.Float64), ("difference", pl.Utf8))}


def significance_columns(m: dict, seed: str) -> dict:
    """Per split: the after-EM 95% Clopper-Pearson interval, the exact McNemar p of before vs after and
    whether the difference is significant ("not significant" when p >= SIGNIFICANCE)."""
    out = {}
    for split in ("heldout", "humaneval"):
        after, n = (m.get(f"{split}_em_after") or {}).get(str(seed)), m.get(f"{split}_cases")
        low, high = em_interval(after, n)
        p = mcnemar_p(m, split, seed) if after is not None else None
        out.update({f"{split}_em_after_ci_low": low, f"{split}_em_after_ci_high": high, f"{split}_mcnemar_p": p,
                    f"{split}_difference": significance(p)})
    return out


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
    def em(summary: dict) -> str:
        return f"{summary.get('exact_match', 0)} / {summary.get('cases', 0)}" if summary.get("cases") else "not run"

    rows = [("held-out EM before fine-tuning", em(m["before"]))]
    for seed, summary in m.get("after_program", {}).items():
        rows.append((f"held-out EM after {m.get('steps')} steps (seed {seed})",
                     em_change_text(m, "heldout", seed) if summary.get("cases") and m.get("heldout_cases") else em(summary)))
    forced_before = (m.get("teacher_forced_before") or {}).get("program")
    for seed, after in ((m.get("teacher_forced_after") or {}).get("program") or {}).items():
        if forced_before and after:
            rows.append((f"held-out loss per supervised token, teacher-forced (seed {seed})",
                         f"{forced_before['loss']:.2f} -> {after['loss']:.2f}"))
    for seed, summary in m.get("after_rewrite", {}).items():
        rows.append((f"rewrite adapter EM (seed {seed})", em(summary)))
    he_before = m.get("humaneval_before") or {}
    for seed, summary in m.get("humaneval", {}).items():
        rows.append((f"HEvalFix-Py EM, bug-fix instruction (seed {seed})",
                     em_change_text(m, "humaneval", seed) if he_before.get("cases") and m.get("humaneval_cases")
                     else f"{em(he_before)} -> {em(summary)}" if he_before.get("cases") else em(summary)))
    for row in m.get("speed", []):
        if row["subset"] == "both exact" and row["cases"]:
            spread = f"IQR {fmt_x(row['ratio_q25'], 2)} to {fmt_x(row['ratio_q75'], 2)}"
            rows.append((f"program vs rewrite wall-clock, per case, {row['cases']} cases both exact (seed {row['seed']})",
                         f"{fmt_x(row['ratio_median'], 2)} ({spread})"))
    return rows


def em_change(m: dict, split: str, seed: str) -> tuple[str, str] | None:
    """('0/33 -> 2/33', 'after: 95% CI [0.7%, 20.2%], McNemar p = 0.5'): a tile's value and its detail."""
    n = m.get(f"{split}_cases")
    before, after = m.get(f"{split}_em_before"), (m.get(f"{split}_em_after") or {}).get(str(seed))
    if not n or after is None:
        return None
    low, high = em_interval(after, n)
    p = mcnemar_p(m, split, seed)
    return (f"{before if before is not None else '?'}/{n} -> {after}/{n}",
            f"after: 95% CI [{fmt_pct(low)}, {fmt_pct(high)}]" + (f", McNemar p = {p:.2g}" if p is not None else ""))


def lead_tiles(m: dict) -> list[tuple[str, str]]:
    """The pilot page's tiles (label, value): exact match before -> after per seed on the held-out cases and on
    HEvalFix-Py, the teacher-forced loss, and each frozen preset run's held-out change; short values, the
    intervals in the labels (the statistics tables below hold the rest)."""
    tiles = []
    for split, what in (("heldout", "held-out bug fixes"), ("humaneval", "HEvalFix-Py bug fixes")):
        for seed in sorted((m.get(f"{split}_em_after") or {}), key=str):
            change = em_change(m, split, seed)
            if change:
                tiles.append((f"exact match on {what}, before -> after {m.get('steps')} steps (seed {seed}); "
                              f"{change[1]}", change[0]))
    forced_before = (m.get("teacher_forced_before") or {}).get("program")
    for seed, after in ((m.get("teacher_forced_after") or {}).get("program") or {}).items():
        if forced_before and after:
            tiles.append((f"held-out loss per supervised token, teacher-forced (seed {seed})",
                          f"{forced_before['loss']:.2f} -> {after['loss']:.2f}"))
    for name, frozen in sorted((m.get("frozen") or {}).items()):
        fm = frozen["metrics"]
        for seed in sorted((fm.get("heldout_em_after") or {}), key=str):
            change = em_change(fm, "heldout", seed)
            if change:
                tiles.append((f"{name} (frozen run, {fm.get('steps')} steps, seed {seed}): held-out exact match; "
                              f"{change[1]}", change[0]))
    return tiles


# ---------------------------------------------------------------- frozen preset runs beside the default

FROZEN_FILES = ("metrics.json", "run.json")


def read_frozen(directory) -> dict[str, dict]:
    """Committed runs of pilot presets (reports/pilot/frozen/<preset>/): each one's metrics.json (what the
    stage wrote for the preset) and run.json (command, commit, dates, wall-clock seconds, machine), keyed by
    the folder's name. A folder missing either file is refused by name, never skipped."""
    import json
    from pathlib import Path

    runs: dict[str, dict] = {}
    root = Path(directory)
    if not root.is_dir():
        return runs
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        missing = [name for name in FROZEN_FILES if not (folder / name).is_file()]
        if missing:
            raise CorpusError(f"pilot: frozen run {folder} lacks {', '.join(missing)}")
        try:
            metrics_, run = (json.loads((folder / name).read_text()) for name in FROZEN_FILES)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"pilot: frozen run {folder} has an unreadable JSON file: {exc}") from exc
        runs[folder.name] = {"run": run, "metrics": metrics_}
    return runs


def _runs(m: dict) -> list[tuple[str, dict, dict]]:
    """(label, metrics, run info) of the default run and of every frozen preset run in `m`."""
    out = [("default (this run)", m, {})]
    for name, frozen in sorted((m.get("frozen") or {}).items()):
        out.append((f"{name} (frozen run, {frozen['run'].get('commit', '?')})", frozen["metrics"], frozen["run"]))
    return out


STEPS_SCHEMA = {"run": pl.Utf8, "seed": pl.Int64, "steps": pl.Int64, "step": pl.Int64, "loss": pl.Float64,
                "directive_accuracy": pl.Float64, "copy_exact": pl.Float64, "gen_exact": pl.Float64,
                "all_exact": pl.Float64, "forced_exact_cases": pl.Int64, "heldout_em": pl.Int64,
                "heldout_cases": pl.Int64}


def steps_table(m: dict) -> pl.DataFrame:
    """How the held-out metrics move with training steps, for the default and every frozen run: the
    program adapters' teacher-forced curve (loss per supervised token, copy directives and gen spans
    exactly right, whole programs exactly right = a lower bound on greedy EM), and the greedy held-out EM
    where it was measured (step 0: the base model; the last step: the trained adapter)."""
    rows = []
    for label, metrics_, _ in _runs(m):
        cases = metrics_.get("heldout_cases")
        for point in metrics_.get("curve") or []:
            if point.get("mode") != "program":
                continue
            step, seed = point["step"], point["seed"]
            em = None
            if step == 0:
                em = metrics_.get("heldout_em_before")
            elif step == metrics_.get("steps"):
                em = (metrics_.get("heldout_em_after") or {}).get(str(seed))
            exact = point.get("all_exact")
            rows.append({"run": label, "seed": seed, "steps": metrics_.get("steps"), "step": step,
                         "loss": point.get("loss"), "directive_accuracy": point.get("directive_accuracy"),
                         "copy_exact": point.get("copy_exact"), "gen_exact": point.get("gen_exact"),
                         "all_exact": exact,
                         "forced_exact_cases": round(exact * point["sequences"]) if exact is not None else None,
                         "heldout_em": em, "heldout_cases": cases if em is not None else None})
    return pl.DataFrame(rows, schema=STEPS_SCHEMA)


RUNS_SCHEMA = {"run": pl.Utf8, "model": pl.Utf8, "method": pl.Utf8, "steps": pl.Int64, "seconds": pl.Float64,
               "heldout_em_before": pl.Int64, "heldout_em_after": pl.Int64, "heldout_cases": pl.Int64,
               "forced_exact_after": pl.Float64, "loss_before": pl.Float64, "loss_after": pl.Float64,
               "humaneval_em_before": pl.Int64, "humaneval_em_after": pl.Int64, "humaneval_cases": pl.Int64}


def runs_table(m: dict) -> pl.DataFrame:
    """One row per program adapter seed of the default run and of every frozen preset run, labelled:
    held-out EM before -> after, teacher-forced loss and whole-program exactness, HEvalFix-Py EM before ->
    after where that run decoded it, and a frozen run's wall-clock seconds (its run.json)."""
    rows = []
    for label, metrics_, run in _runs(m):
        before = ((metrics_.get("teacher_forced_before") or {}).get("program")) or {}
        for seed, after in sorted(((metrics_.get("teacher_forced_after") or {}).get("program") or {}).items()):
            he_after = (metrics_.get("humaneval_em_after") or {}).get(seed)
            rows.append({"run": label, "model": metrics_.get("model"), "method": metrics_.get("method"),
                         "steps": metrics_.get("steps"), "seconds": run.get("seconds"),
                         "heldout_em_before": metrics_.get("heldout_em_before"),
                         "heldout_em_after": (metrics_.get("heldout_em_after") or {}).get(seed),
                         "heldout_cases": metrics_.get("heldout_cases"),
                         "forced_exact_after": (after or {}).get("all_exact"),
                         "loss_before": before.get("loss"), "loss_after": (after or {}).get("loss"),
                         "humaneval_em_before": metrics_.get("humaneval_em_before") if he_after is not None else None,
                         "humaneval_em_after": he_after,
                         "humaneval_cases": metrics_.get("humaneval_cases") if he_after is not None else None,
                         **significance_columns(metrics_, seed)})
    return pl.DataFrame(rows, schema={**RUNS_SCHEMA, **SIGNIFICANCE_SCHEMA})


def frozen_headline(m: dict) -> list[tuple[str, str]]:
    """The frozen preset runs' figures (labelled with the run), for the report lead and the README."""
    rows = []
    for name, frozen in sorted((m.get("frozen") or {}).items()):
        run = frozen["run"]
        when = f"frozen run of {run.get('commit', '?')}, {run.get('date', '?')}, {run.get('minutes', '?')} min"
        for what, value in headline(frozen["metrics"]):
            rows.append((f"[{name}, {when}] {what}", value))
    return rows
