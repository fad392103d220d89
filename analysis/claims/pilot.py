"""Claim 7: the fine-tuning pilot, Qwen2.5-Coder-1.5B: HEvalFix-Py EM 0/33 -> 12-17%.

From the pilot's metrics: the default run and the frozen preset runs it carries, each labelled. The
verdict's HEvalFix-Py lift is that of the bug-fix run (else the longest run) that decoded HEvalFix-Py before
and after fine-tuning: `reproduced` only when it meets the paper's lift, else `not reproduced at this
scale` naming the model, steps and measured EM."""

from __future__ import annotations

from pathlib import Path

from analysis.claims.registry import register
from analysis.claims.verdict import NOT_AT_SCALE, REPRODUCED, Claim, Scope, judge, metric_input
from analysis.pilot.data import run_task
from analysis.pilot.report import HELDOUT_NAME, em_change_text
from analysis.results.numbers import MISSING, fmt_pct, fmt_range
from analysis.results.pilot import pilot_em, pilot_runs
from analysis.stats import clopper_pearson

LIFT_CI = ("conservative 95%: the after EM's exact Clopper-Pearson interval less the before EM's (seeds pooled), "
           "wider than a paired interval")


def lift_interval(before: list[float], after: list[float], cases: int) -> tuple[float, float]:
    """A lift's interval from the two exact intervals (after minus before, ends crossed): never narrower than
    the data allow, whatever the pairing."""
    b_low, b_high = clopper_pearson(round(sum(before) * cases), len(before) * cases)
    a_low, a_high = clopper_pearson(round(sum(after) * cases), len(after) * cases)
    return a_low - b_high, a_high - b_low


def em_text(values: list[float]) -> str:
    if not values:
        return "not recorded"
    return fmt_pct(values[0]) if min(values) == max(values) else fmt_range(min(values), max(values), fmt_pct)


def counted_change(m: dict, split: str) -> str | None:
    """Each decoded seed's 'k / n -> k / n (after x%, 95% CI [..]; McNemar exact p = .., not significant)'
    (analysis.pilot.report), when the run recorded its counts; None otherwise."""
    after = m.get(f"{split}_em_after")
    if not isinstance(after, dict) or not m.get(f"{split}_cases") or m.get(f"{split}_em_before") is None:
        return None
    parts = [(seed, em_change_text(m, split, seed)) for seed, k in sorted(after.items()) if k is not None]
    if not parts:
        return None
    return "; ".join(text if len(parts) == 1 else f"seed {seed} {text}" for seed, text in parts)


def run_text(label: str, m: dict) -> str:
    em = pilot_em(m)
    seeds = len(em.heldout_after)
    he_counted, held_counted = counted_change(m, "humaneval"), counted_change(m, "heldout")
    he = (f"HEvalFix-Py EM {he_counted}; " if he_counted else
          f"HEvalFix-Py EM {em_text(em.humaneval_before)} -> {em_text(em.humaneval_after)}; "
          if em.humaneval_before or em.humaneval_after else "")
    held = (held_counted if held_counted else f"{em_text(em.heldout_before)} -> {em_text(em.heldout_after)}"
            + (f" ({seeds} seeds)" if seeds > 1 else ""))
    return f"{label} ({m.get('steps', MISSING)} steps): {he}{HELDOUT_NAME[run_task(m)]} EM {held}"


def pilot_scale(m: dict, label: str) -> str:
    """'<model>, <steps> steps (<label>), task <task> on <n> training sequences': what a pilot run trained."""
    kept = (m.get("train_sequences") or {}).get("program") if isinstance(m.get("train_sequences"), dict) else None
    size = kept.get("kept") if isinstance(kept, dict) else None
    n_train = (m.get("data") or {}).get("n_train") if isinstance(m.get("data"), dict) else None
    data = (f"{size} training sequences" if isinstance(size, int) else
            f"{n_train} training cases" if isinstance(n_train, int) else "training data size not recorded")
    return (f"{m.get('model', 'unknown model')}, {m.get('steps', MISSING)} steps ({label}), "
            f"task {run_task(m)} on {data}")


@register("finetune")
def finetune_claim(spec: dict, tables: Path, metrics_dir: Path) -> Claim:
    m = metric_input(spec, 0, tables, metrics_dir)
    runs = pilot_runs(m)
    ours = "; ".join(run_text(label, r) for label, r in runs)
    measured_runs = [(label, r) for label, r in runs if pilot_em(r).humaneval_before and pilot_em(r).humaneval_after]
    label, judged = (max(measured_runs, key=lambda lr: (run_task(lr[1]) == "bugfix", lr[1].get("steps") or 0))
                     if measured_runs else ("default", m))
    em = pilot_em(judged)
    missing = [what for what, values in (("HEvalFix-Py EM before fine-tuning", em.humaneval_before),
                                         ("HEvalFix-Py EM after fine-tuning", em.humaneval_after)) if not values]
    paper_lift = spec["em_after_low"] - spec["em_before"]
    lift = (sum(em.humaneval_after) / len(em.humaneval_after) - sum(em.humaneval_before) / len(em.humaneval_before)
            if not missing else None)
    scale = f"{pilot_scale(judged, label)}, against the paper's {spec.get('model', 'model')}"
    method = "; ".join(f"{lbl}: {r.get('method', MISSING)}" for lbl, r in runs) + " [pilot]"
    if lift is not None and judge(spec, lift, paper_lift):
        verdict = REPRODUCED
        reason = f"HEvalFix-Py lift {fmt_pct(lift)} reaches the paper's {fmt_pct(paper_lift)} ({scale})"
    else:
        verdict = NOT_AT_SCALE
        measured = (f"measured HEvalFix-Py lift {fmt_pct(lift)} against the paper's {fmt_pct(paper_lift)}"
                    if lift is not None else
                    "no HEvalFix-Py lift can be measured: " + " and ".join(missing) + " not recorded")
        reason = (f"{measured}; {scale}; held-out EM "
                  + (counted_change(judged, "heldout") or f"{em_text(em.heldout_before)} -> {em_text(em.heldout_after)}"))
    cases = judged.get("humaneval_cases")
    scope = Scope(f"HEvalFix-Py lift ({label})", f"+{fmt_pct(paper_lift)}",
                  MISSING if lift is None else f"+{fmt_pct(lift)}", verdict, reason, value=lift, paper_value=paper_lift,
                  cases=cases if isinstance(cases, int) else None,
                  ci=(lift_interval(em.humaneval_before, em.humaneval_after, cases)
                      if lift is not None and isinstance(cases, int) and cases > 0 else None),
                  ci_kind=LIFT_CI)
    return Claim(claim=f"7. {spec['title']}", paper=spec["text"], ours=ours, verdict=verdict, reason=reason,
                 method=method, scopes=(scope,))
