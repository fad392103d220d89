"""`copydecode pilot`: the fine-tuning pilot (the paper's claim 7) -- teach a real model to write programs.

    copydecode pilot                       # the params' default (SmolLM2-135M-Instruct, CPU)
    copydecode pilot --preset pilot-gpu    # params pilot.presets: a larger run, its own output folder

What it does, in order (each step resumable; nothing finished is recomputed on a rerun):
1. Cases: analysis.pilot.data's training and held-out cases of `task` (`edit`: the ProbeEdit-S recipe,
   worded line edits; `bugfix`: seeded bug mutations fixed on HumanEvalFix's instruction) on
   pinned-stdlib functions disjoint from ProbeEdit-S's evaluation units (held-out files never
   trained on), and a
   seeded sample of HEvalFix-Py cases asked as HumanEvalFix asks: the buggy function
   (`humaneval_framing`) and "Fix bugs in <name>.".
2. Teacher-forced held-out metrics of the base model (kernels_profile.pilot.train.teacher_forced: one forward
   per case), the curve's step 0.
3. Training: one LoRA adapter per seed in `seeds` on the program layout (loss on directive, gen and EOS
   tokens) and one per seed in `rewrite_seeds` on the whole edited text; AdamW with `warmup` steps and
   a `schedule` decay, `batch` sequences a step. Every `checkpoint_every` steps the adapter's
   teacher-forced held-out metrics join the curve. Checkpoints (weights, optimiser, losses, curve) under
   data/pilot/checkpoints/, keyed by a hash of the training and held-out sequences, LoRA and training
   settings and kernels_profile.runtime.checkpoints.fingerprint (model, torch/transformers/peft versions, threads);
   an interrupted run resumes at its last checkpoint.
4. Greedy decoding ("before": the base model on the held-out cases and the HEvalFix-Py sample; "after":
   each of `decode_seeds`' program adapters on the held-out cases, paired per case with the seed's
   rewrite adapter where it has one (program and rewrite back to back in a seeded order, so their
   wall-clock ratio is measured per case), and the `humaneval_seeds` program adapters on HEvalFix-Py).
   Every evaluation (and the base model's teacher-forced metrics) is a runtime JSON checkpoint, keyed
   by its adapter and everything that decides its records; a resumed run's from-scratch time counts
   each at its recorded seconds (runtime.FromScratch).
5. The edit-format check (`formats`; analysis.pilot.formats, kernels_profile.pilot.formats): on a spread of the
   held-out cases the base model writes a copy program, a unified diff and search/replace blocks (one worked example
   in each prompt, greedy, no grammar), each decode seed's program adapter the program without the grammar; each
   output is read by its format's parser (well formed, range errors, applies, exact match) and set beside the same
   cases' decodes under the grammar from step 4. Each decode is a checkpoint.

Budgets: a case's decode budget is the gold target's token count (max with its oracle program's) plus
`budget_margin`, so a correct answer always fits and a model that never stops is cut off; the
FSM walker's margin then forces a whole program (recorded as stopped "forced", not as the model
stopping). A case that cannot run (prompt past the context, empty instruction, budget too small) is
recorded with its error and no output; the others go on.

Outputs: data/pilot/records.parquet (one row per decoded case), data/pilot/losses.parquet,
data/pilot/curve.parquet, data/pilot/formats.parquet (the edit-format check, one row per decode),
reports/tables/pilot_{em,speed,curve,before_after,steps,runs,formats}.{csv,md},
reports/figures/pilot_{loss,curve}.{png,svg}, reports/metrics/pilot.json, and the diagnosis of why the
held-out programs are wrong, counted from this run (analysis.pilot.diagnosis: reports/pilot/range_errors.{csv,md}).
A preset writes records, losses, curve, metrics and range_errors under data/pilot/<preset>/; a preset run committed under
reports/pilot/frozen/<preset>/ (its metrics.json and a run.json naming the command, commit, date and
wall-clock) is read by the default run and shown beside it, labelled (pilot.json "frozen", the
pilot_steps and pilot_runs tables).
"""

from __future__ import annotations

import random

import polars as pl

from analysis.corpora.cases import read_cases
from analysis.coverage.copyinput import copy_scores
from analysis.pipeline.console import RUN_NAME_KEY
from analysis.pipeline.io import markdown_table, save_chart, write_json, write_parquet, write_table
from analysis.layout import (
    CASES,
    FIGURES,
    METRICS,
    PILOT_CHECKPOINTS,
    PILOT_CURVE,
    PILOT_DIAGNOSIS,
    PILOT_DIR,
    PILOT_FORMATS,
    PILOT_FROZEN,
    PILOT_LOSSES,
    PILOT_RECORDS,
    TABLES,
)
from analysis.pilot.data import PilotCase, build_pilot_data, with_split
from analysis.pilot.diagnosis import range_errors, write_diagnosis
from analysis.parallel.progress import log_above_bars, progress, timed
from kernels_profile.decode.masks import MaskTables
from kernels_profile.pilot.settings import Loaded, PilotSettings, load_models, settings  # noqa: F401 (settings: the CLI's)
from kernels_profile.pilot.jobs import (
    HELDOUT,
    EvalCase,
    EvalJob,
    adapter_key,
    before_key,
    case_budget,
    curve_frame,
    eval_case,
    evaluation_jobs,
    evaluation_key,
    forced_row,
    humaneval_sample,
    model_key,
    records_frame,
)
from kernels_profile.runtime.checkpoints import FromScratch, read_json_checkpoint, write_json_checkpoint
from analysis.pilot import formats as formatcheck
from analysis.pilot import report as pilotreport
from analysis.pilot.formats import spread
from kernels_profile.pilot.formats import decode_formats
from analysis.present import charts
from kernels_profile.pilot.train import (adapter_state, load_adapter_state, program_record, reset_adapter,
                                         rewrite_record, teacher_forced, train, trained_seconds, training_sequences)

# `copydecode pilot`: its help line and what it reads and writes (the CLI's --help)
HELP = "fine-tuning pilot: LoRA adapters that write programs (or rewrites), EM and wall-clock"
READS_WRITES = ("reads data/corpora/cases.parquet, the pinned stdlib and the model's weights (params pilot); "
                "writes data/pilot/*.parquet (records, losses, curve, formats) and checkpoints, reports/tables/pilot_*.*, "
                "reports/figures/pilot_*.{png,svg}, reports/pilot/range_errors.*, reports/metrics/pilot.json")


def add_arguments(parser) -> None:
    """`pilot`'s own options (settings(params, preset, formats_only))."""
    parser.add_argument("--preset", default=None, help="a preset from params pilot.presets (e.g. pilot-gpu)")
    parser.add_argument("--formats-only", dest="formats_only", action="store_true",
                        help="only the edit-format check, with the base model (no training): which edit format the "
                             "model (params pilot.model, or the preset's) writes correctly, on params pilot.formats.cases "
                             "held-out cases; writes data/pilot/formats-<preset or default>/")


# ---------------------------------------------------------------- the run

def read_humaneval(s: PilotSettings) -> list[EvalCase]:
    if not s.humaneval_seeds or s.humaneval_cases == 0:
        return []
    return humaneval_sample(read_cases(CASES), s.humaneval_cases, s.humaneval_seed, s.humaneval_framing)


def before_metrics(s: PilotSettings, loaded: Loaded, mode: str, heldout_seqs, scratch: FromScratch) -> dict:
    """Teacher-forced held-out metrics of the base model (adapter disabled) in `mode`'s layout, a
    runtime JSON checkpoint (its seconds counted by `scratch`)."""
    key = before_key(s, heldout_seqs)
    path = PILOT_CHECKPOINTS / f"forced-before-{mode}-{key}.json"
    found = read_json_checkpoint(path, key, fields={"metrics"}, what="pilot")
    if found is not None:
        scratch.read_back(found.seconds)
        return found.content["metrics"]
    scratch.mark()
    with loaded.peft.disable_adapter():
        metrics = forced_row(teacher_forced(loaded.peft, heldout_seqs))
    write_json_checkpoint({"metrics": metrics}, path, key, scratch.measured())
    return metrics


def train_adapters(s: PilotSettings, loaded: Loaded, train_cases: list[PilotCase], heldout_cases: list[PilotCase],
                   scratch: FromScratch) -> tuple[dict, pl.DataFrame, dict, pl.DataFrame]:
    """Every adapter's trained weights by (mode, seed), the loss per step, how many sequences each mode
    kept (and left out as longer than max_tokens), and the teacher-forced held-out curve: the base
    model at step 0, then every `checkpoint_every` steps of every program adapter (33 forwards a point,
    about 30 s on 2 cores) and the last step of every rewrite adapter."""
    plan = [("program", seed) for seed in s.seeds] + [("rewrite", seed) for seed in s.rewrite_seeds]
    sequences, heldout, kept, before = {}, {}, {}, {}
    for mode in sorted({m for m, _ in plan}):
        sequences[mode], dropped = training_sequences(loaded.tok, train_cases, mode, s.max_tokens)
        heldout[mode], _ = training_sequences(loaded.tok, heldout_cases, mode, 10 ** 9)  # every case, any length
        kept[mode] = {"kept": len(sequences[mode]), "too_long": dropped}
    states, losses, curve = {}, [], []
    for mode in sorted(sequences):
        before[mode] = before_metrics(s, loaded, mode, heldout[mode], scratch)
    kept["from_scratch_known"] = True
    bar = progress(None, "pilot: training", total=len(plan) * s.steps, unit="step")
    for mode, seed in plan:
        key = adapter_key(s, mode, seed, sequences[mode], heldout[mode])
        reset_adapter(loaded.peft, seed)
        start = bar.n
        bar.set_description(f"pilot: training {mode} seed {seed}")

        def on_step(step: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")

        def on_checkpoint(step: int, mode=mode) -> dict | None:
            if mode == "rewrite" and step < s.steps:  # the curve is the program adapters'; a rewrite gets its end
                return None
            return forced_row(teacher_forced(loaded.peft, heldout[mode]))

        checkpoint = PILOT_CHECKPOINTS / f"{mode}-seed{seed}-{key}.pt"
        scratch.mark()
        steps, points = train(loaded.peft, sequences[mode], s.training(seed), checkpoint, on_step=on_step,
                              on_checkpoint=on_checkpoint)
        recorded = trained_seconds(checkpoint, with_curve=True)  # training and its curve's evaluations
        if recorded is None:  # a checkpoint written before it recorded its seconds
            kept["from_scratch_known"] = False
            scratch.measured()
        else:
            scratch.resumed(recorded)
        bar.update(s.steps - (bar.n - start))  # steps resumed from a checkpoint
        states[(mode, seed)] = (key, adapter_state(loaded.peft))
        losses += [{"mode": mode, "seed": seed, "step": i + 1, "loss": v} for i, v in enumerate(steps)]
        curve += [{"mode": mode, "seed": seed, "step": 0, **before[mode]}]
        curve += [{"mode": mode, "seed": seed, **point} for point in points]
    bar.close()
    return states, pl.DataFrame(losses, schema={"mode": pl.Utf8, "seed": pl.Int64, "step": pl.Int64,
                                                 "loss": pl.Float64}), kept, curve_frame(curve)


def decode_case(loaded: Loaded, mode: str, case: EvalCase, budget: int, masks: MaskTables) -> dict:
    if mode == "program":
        return program_record(loaded.lm, loaded.tok, case, budget, masks)
    return rewrite_record(loaded.lm, loaded.tok, case, budget)


def run_job(s: PilotSettings, loaded: Loaded, job: EvalJob, cases: list[EvalCase], states: dict,
            bar, scratch: FromScratch) -> list[dict]:
    """One evaluation job (one adapter per mode, or the base model); a runtime JSON checkpoint keyed by
    everything that decides its records (its seconds counted by `scratch`)."""
    after = job.phase == "after"
    budgets = {c.case_id: case_budget(loaded.tok, c, s.budget_margin) for c in cases}
    adapters = {m: (states[(m, job.seed)][0] if after else "base") for m in job.modes}
    key = evaluation_key(s, job, cases, budgets, adapters)
    path = PILOT_CHECKPOINTS / f"eval-{job.phase}-{job.split}-seed{job.seed}-{key}.json"
    found = read_json_checkpoint(path, key, fields={"job", "records"}, what="pilot")
    if found is not None:
        bar.update(len(cases) * len(job.modes))
        scratch.read_back(found.seconds)
        return found.content["records"]
    scratch.mark()
    rng = random.Random(f"{s.order_seed}/{job.seed}/{job.split}")
    masks = MaskTables.for_model(loaded.lm, loaded.tok)
    records = []
    for case in cases:
        order = list(job.modes)
        rng.shuffle(order)
        for position, mode in enumerate(order):
            if after:
                load_adapter_state(loaded.peft, states[(mode, job.seed)][1])
                record = decode_case(loaded, mode, case, budgets[case.case_id], masks)
            else:
                with loaded.peft.disable_adapter():
                    record = decode_case(loaded, mode, case, budgets[case.case_id], masks)
            records.append({**record, "phase": job.phase, "seed": job.seed, "split": job.split,
                            "kind": case.kind, "position": position, "paired": len(order) > 1})
            bar.update(1)
    write_json_checkpoint({"job": job.key(), "records": records}, path, key, scratch.measured())
    return records


def run_formats_only(s: PilotSettings) -> dict:
    """`copydecode pilot --formats-only`: the edit-format check alone, with the base model and no adapter (so any model
    a preset names can be asked without training one): the three formats without the grammar, and the program under
    the grammar (the pilot's "before" decode of the same cases). Its own folder, never the stage's outputs."""
    name = f"formats-{s.preset or 'default'}"
    out_dir = PILOT_DIR / name
    with timed(f"pilot-{name}"):
        scratch = FromScratch()
        data = build_pilot_data(s.data, s.probeedit)
        cases = spread([eval_case(c) for c in with_split(data.cases, HELDOUT)], s.formats.cases)
        loaded = load_models(s)
        records = decode_formats(s, loaded, cases, {}, model_key(s), PILOT_CHECKPOINTS, scratch)
        bar = progress(None, "pilot: base model under the grammar", total=len(cases), unit="decode")
        grammar = run_job(s, loaded, EvalJob("before", None, HELDOUT, ("program",)), cases, {}, bar, scratch)
        bar.close()
    frame = formatcheck.records_frame(records + formatcheck.grammar_rows(records_frame(grammar),
                                                                         [c.case_id for c in cases], s.model))
    write_parquet(frame, out_dir / PILOT_FORMATS.name)
    metrics = {"model": s.model, "weights": s.weights, "formats": formatcheck.formats_metrics(frame)}
    write_json(metrics, out_dir / "metrics.json")
    shown = formatcheck.page_table(metrics["formats"]["rows"])
    write_table(shown, out_dir / "pilot_formats", digits=3)
    log_above_bars(f"\npilot --formats-only: {s.model}, {len(cases)} held-out cases (written to {out_dir}):\n"
                   + markdown_table(shown, 3))
    return {"cases": len(cases), "out": str(out_dir), RUN_NAME_KEY: f"pilot-{name}"}


def run(s: PilotSettings) -> dict:
    if s.formats_only:
        return run_formats_only(s)
    frozen = pilotreport.read_frozen(PILOT_FROZEN) if s.preset is None else {}  # a broken one fails before any work
    run_name = "pilot" if s.preset is None else f"pilot-{s.preset}"  # a preset's time and summary are not the stage's
    with timed(run_name) as timing:
        scratch = FromScratch()  # setup (cases, ProbeEdit-S rebuilt for disjointness, the model) is the run's own time
        data = build_pilot_data(s.data, s.probeedit)
        cases = data.cases
        train_cases, heldout_cases = with_split(cases, "train"), with_split(cases, HELDOUT)
        heldout = [eval_case(c) for c in heldout_cases]
        humaneval = read_humaneval(s)  # before minutes of model loading, so a missing corpus fails fast
        loaded = load_models(s)
        states, losses, kept, curve = train_adapters(s, loaded, train_cases, heldout_cases, scratch)
        jobs = evaluation_jobs(s, len(humaneval))
        total = sum(len(humaneval if j.split != HELDOUT else heldout) * len(j.modes) for j in jobs)
        bar = progress(None, "pilot: decoding", total=total, unit="decode")
        records = []
        for job in jobs:
            bar.set_description(f"pilot: {job.describe()}")
            records += run_job(s, loaded, job, humaneval if job.split != HELDOUT else heldout, states, bar, scratch)
        bar.close()
        format_cases = spread(heldout, s.formats.cases)  # the edit-format check, on a spread of the held-out cases
        format_records = decode_formats(s, loaded, format_cases, states, model_key(s), PILOT_CHECKPOINTS, scratch)
        if kept.pop("from_scratch_known"):  # what this run would take with no checkpoint to resume from
            timing["from_scratch_s"] = scratch.seconds()
    frame = records_frame(records)
    out_dir = PILOT_DIR if s.preset is None else PILOT_DIR / s.preset
    write_parquet(frame, out_dir / PILOT_RECORDS.name)
    write_parquet(losses, out_dir / PILOT_LOSSES.name)
    write_parquet(curve, out_dir / PILOT_CURVE.name)
    formats = formatcheck.records_frame(format_records + formatcheck.grammar_rows(
        frame, [c.case_id for c in format_cases], s.model))
    write_parquet(formats, out_dir / PILOT_FORMATS.name)
    metrics = pilotreport.metrics(frame, losses, s, kept, loaded.lm.info.get("weights_note", ""), curve)
    metrics["formats"] = formatcheck.formats_metrics(formats)
    metrics["data"]["not_applied"] = data.not_applied  # functions a kind could not be applied to, per split/kind
    diagnosis = range_errors(frame, heldout_cases)  # why the held-out programs are wrong, counted from this run
    if s.preset is not None:
        write_json(metrics, out_dir / "metrics.json")
        write_diagnosis(diagnosis, metrics, out_dir / PILOT_RECORDS.name, out_dir / "metrics.json",
                        out_dir / PILOT_DIAGNOSIS.name, f"the pilot stage (`copydecode pilot --preset {s.preset}`)")
        return {**metrics, RUN_NAME_KEY: run_name}
    metrics["frozen"] = frozen  # committed preset runs, shown beside this one
    copies = copy_scores((c.split, c.case_id, c.source, c.target) for c in heldout + humaneval)
    metrics["copy_baseline"] = pilotreport.copy_metrics(copies)  # what returning the input scores, per split
    metrics["steps_table"] = pilotreport.steps_table(metrics).to_dicts()
    write_table(pilotreport.steps_table(metrics), TABLES / "pilot_steps", digits=3)
    write_table(pilotreport.runs_table(metrics), TABLES / "pilot_runs", digits=3)
    write_table(pilotreport.em_table(frame, copies), TABLES / "pilot_em", digits=3)
    write_table(pilotreport.curve_table(curve), TABLES / "pilot_curve", digits=3)
    write_table(pilotreport.before_after_table(metrics), TABLES / "pilot_before_after", digits=3)
    write_table(pilotreport.speed_table(frame), TABLES / "pilot_speed", digits=3)
    write_table(formatcheck.formats_table(formats), TABLES / "pilot_formats", digits=3)

    save_chart(charts.pilot_loss(losses), FIGURES / "pilot_loss")
    save_chart(charts.pilot_curve(curve), FIGURES / "pilot_curve")
    write_json(metrics, METRICS / "pilot.json")
    write_diagnosis(diagnosis, metrics, PILOT_RECORDS, METRICS / "pilot.json", PILOT_DIAGNOSIS,
                    "the pilot stage (`copydecode pilot`, part of `dvc repro`)")
    return metrics
