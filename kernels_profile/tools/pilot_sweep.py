"""A small sweep of the pilot's training settings, judged by teacher-forced held-out metrics.

    copydecode pilot-sweep --threads 1 NAME:steps=96,lr=0.003,warmup=8,schedule=cosine ...

Each NAME trains one program adapter (seed `--seed`) from the params' `pilot` group with the given
overrides (steps, lr, warmup, schedule, batch, rank, alpha) and measures kernels_profile.pilot.train's
teacher-forced metrics on every held-out case before training and every `--every` steps. `all_exact`
(every supervised token the argmax) is a lower bound on greedy held-out EM. Writes
reports/pilot/sweep.{csv,md} (one row per config and step) and prints each row as it comes; a rerun
appends nothing, it rewrites the table from the configs given.

    copydecode pilot-sweep --from-checkpoints

reads the curve (and the losses so far) kept in every adapter checkpoint under data/pilot/checkpoints/,
finished or not, and writes reports/pilot/checkpoint_curve.{csv,md}: what an interrupted `copydecode
pilot` had measured (the stage itself writes data/pilot/curve.parquet only when it finishes).

    copydecode pilot-sweep --diagnose data/pilot/records.parquet

compares each held-out program an adapter decoded with its gold (line-level oracle) program, rebuilt from
the params' pilot data: copy ranges, how far the first copy's end is off, missing or extra copies, the
gen text right or not. Writes reports/pilot/range_errors.{csv,md} (one row per decoded held-out program;
the .md opens with the diagnosis in words, counted from the rows and naming the run: model, task, steps,
method from the run's metrics) and prints the counts: where greedy decoding goes wrong, read without
running a model.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError, ParamsError
from analysis.pipeline.io import output_set, write_csv, write_json, write_table, write_text, write_with
from analysis.pipeline.runrecord import RUN_JSON, frozen_record
from analysis.pilot.data import build_pilot_cases, run_task, with_split
from analysis.pilot.diagnosis import check_same_run, range_errors, write_diagnosis
from analysis.layout import METRICS, PILOT_CHECKPOINTS, PILOT_DIR, PILOT_FROZEN, PILOT_SWEEP
from analysis.pipeline.confine import confined, safe_name
from kernels_profile.pilot.settings import load_models, settings
from kernels_profile.pilot.train import (LoraSettings, TrainSettings, add_lora, load_checkpoint, teacher_forced, train,
                                         training_sequences)
from kernels_profile.runtime.loading import set_threads

OUT = PILOT_SWEEP
KEYS = {"steps": int, "lr": float, "warmup": int, "schedule": str, "batch": int, "rank": int, "alpha": int}


def parse_config(text: str) -> tuple[str, dict]:
    name, _, body = text.partition(":")
    values = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        if key not in KEYS:
            raise ParamsError(f"pilot-sweep: unknown setting {key!r} in {text!r}; known: {', '.join(KEYS)}")
        values[key] = KEYS[key](value)
    return name, values


def checkpoint_curve(directory: Path) -> pl.DataFrame:
    """One row per curve point kept in the adapter checkpoints in `directory` (step 0, the base model,
    is kept in the stage's forced-before JSON files, not here), with the steps trained so far."""
    rows = []
    for path in sorted(directory.glob("*-seed*-*.pt")):
        mode, seed = path.name.split("-seed")[0], int(path.name.split("-seed")[1].split("-")[0])
        state = load_checkpoint(path)  # weights only: a planted file runs no code
        for point in state.get("curve", []):
            rows.append({"mode": mode, "seed": seed, "trained_steps": len(state["losses"]), **point})
    return pl.DataFrame(rows)


def run_metrics(records: Path) -> Path:
    """The metrics of the run that wrote `records`: a preset run's metrics.json beside them, else the
    default run's reports/metrics/pilot.json."""
    beside = records.parent / "metrics.json"
    return beside if beside.is_file() else METRICS / "pilot.json"


def diagnose(records: Path, s, out: Path) -> pl.DataFrame:
    """range_errors of the run that wrote `records` (its held-out cases rebuilt from the params, whose
    task must be the run's), written to `out`.csv and to `out`.md after the diagnosis text."""
    import json

    metrics = run_metrics(records)
    if not metrics.is_file():
        raise CorpusError(f"pilot-sweep: no metrics for {records} (looked for {metrics}): finish the run first")
    m = json.loads(metrics.read_text())
    if run_task(m) != s.data.task:
        raise CorpusError(f"pilot-sweep: {records} comes from a task {run_task(m)} run ({metrics}) but the params' "
                          f"pilot.task is {s.data.task}: diagnose it with the params it ran with")
    frame = range_errors(pl.read_parquet(records), with_split(build_pilot_cases(s.data, s.probeedit), "heldout"))
    check_same_run(frame, m, records, metrics)
    write_diagnosis(frame, m, records, metrics, out)
    return frame


def freeze(preset: str, run: dict, source: Path, target: Path) -> Path:
    """Copy a finished preset run (`source`: data/pilot/<preset>/ with metrics.json, records, losses and
    curve) to `target`/<preset>/ with `run` (command, commit, start, end, seconds, machine) as its run.json
    (analysis.pipeline.runrecord.frozen_record: the working tree's commit where `run` names none) and a
    README naming them: the frozen run the default stage shows beside its own."""
    import json
    import shutil

    safe_name(preset, "pilot-sweep --freeze: the preset")  # it names two folders
    confined(Path(target) / preset / RUN_JSON, "pilot-sweep --freeze: the frozen run's folder")
    missing = [n for n in ("metrics.json", "records.parquet", "losses.parquet", "curve.parquet")
               if not (source / n).is_file()]
    if missing:
        raise CorpusError(f"pilot-sweep: {source} lacks {', '.join(missing)}: the {preset} run has not finished")
    out = target / preset
    new = not out.exists()
    metrics = json.loads((source / "metrics.json").read_text())
    run = frozen_record(run)
    try:
        with output_set("pilot-sweep", outputs=(out.as_posix(),)):  # the frozen run's files as one set
            write_json(metrics, out / "metrics.json")
            write_with(lambda tmp: shutil.copyfile(source / "records.parquet", tmp), out / "records.parquet")
            for name in ("losses", "curve"):
                write_csv(pl.read_parquet(source / f"{name}.parquet"), out / f"{name}.csv")
            write_json(run, out / RUN_JSON)
            write_text(_frozen_readme(preset, run, metrics), out / "README.md")
    except BaseException:
        # not at all: the folder the temporary files made is removed too (the pilot stage refuses a frozen
        # folder without its files)
        if new and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    return out


def _frozen_readme(preset: str, run: dict, metrics: dict) -> str:
    em = metrics.get("heldout_em_after") or {}
    return (
        f"# Frozen run: `{preset}`\n\n"
        f"- command: `{run.get('command')}` (run by hand; not part of the default `dvc repro`)\n"
        f"- code: commit {run.get('commit')}\n- started {run.get('started')}, ended {run.get('ended')}: "
        f"{run.get('seconds')} s ({run.get('minutes')} minutes) wall-clock\n- machine: {run.get('machine')}\n"
        f"- method: {metrics.get('method')}\n"
        f"- held-out EM: before {metrics.get('heldout_em_before')} / {metrics.get('heldout_cases')}, after "
        + ", ".join(f"seed {k}: {v} / {metrics.get('heldout_cases')}" for k, v in em.items()) + "\n"
        f"- HEvalFix-Py EM: before {metrics.get('humaneval_em_before')}, after {metrics.get('humaneval_em_after')} "
        f"(of {metrics.get('humaneval_cases')})\n\n"
        "Files: metrics.json (the stage's data/pilot/<preset>/metrics.json), curve.csv (teacher-forced held-out "
        "metrics by step), losses.csv (training loss per step), records.parquet (every decoded case), run.json "
        "(this page's facts, read by the default `copydecode pilot`).\n")


# `copydecode pilot-sweep`: its help line and what it reads and writes (the CLI's --help)
HELP = ("the pilot's training-settings sweep, an interrupted run's checkpoint curve, decoded range errors, or "
        "freezing a preset run")
READS_WRITES = ("reads params pilot (--params, --set: the sweep and --diagnose) and the pilot's checkpoints; it "
                "writes under the job's output folder (--out)")


def add_arguments(parser) -> None:
    """`copydecode pilot-sweep`'s options (one of: CONFIGs, --from-checkpoints, --diagnose, --freeze)."""
    parser.add_argument("configs", nargs="*", metavar="CONFIG",
                        help="NAME:key=value,... (keys: " + ", ".join(KEYS) + "); one adapter trained per CONFIG")
    parser.add_argument("--from-checkpoints", action="store_true",
                        help="write the curve kept in data/pilot/checkpoints/ (an interrupted run's)")
    parser.add_argument("--diagnose", type=Path, default=None, help="a pilot records.parquet to compare with gold")
    parser.add_argument("--freeze", default=None, metavar="PRESET",
                        help="copy data/pilot/PRESET/ to reports/pilot/frozen/PRESET/ with a run.json of --run")
    parser.add_argument("--run", default=None, help="JSON: command, commit, started, ended, seconds, minutes, machine")
    parser.add_argument("--out", type=Path, default=None, dest="table_out", metavar="STEM|DIR",
                        help="the table's path without suffix, its .csv and .md written beside (default: "
                             "reports/pilot/{sweep,checkpoint_curve,range_errors}); with --freeze, the folder the "
                             "preset's folder goes in (default: reports/pilot/frozen)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for the sweep (default: params pilot.threads)")
    parser.add_argument("--seed", type=int, default=0, help="the adapters' seed (default 0)")
    parser.add_argument("--every", type=int, default=None,
                        help="steps between curve points (default: params pilot.checkpoint_every)")


def command(args) -> int:
    """Run the one job `args` names; named errors (ParamsError, CorpusError) propagate to the CLI. The sweep
    and --diagnose read params `pilot` from `args.config` (the --params file with every --set applied, by the
    CLI); --freeze and --from-checkpoints read no params, so a --set there is refused rather than ignored."""
    import json

    args.out = args.table_out
    overrides = [*getattr(args, "overrides", []), *getattr(args, "overrides_after", [])]
    if overrides and (args.freeze or args.from_checkpoints):
        job = "--freeze" if args.freeze else "--from-checkpoints"
        raise ParamsError(f"pilot-sweep {job} reads no params (it copies a finished run's files): --set would be "
                          "ignored; drop it")
    if args.freeze:
        try:
            run = json.loads(args.run or "{}")
        except json.JSONDecodeError as exc:
            raise ParamsError(f"pilot-sweep: --run is not JSON ({exc})") from exc
        print(freeze(args.freeze, run, PILOT_DIR / args.freeze, args.out or PILOT_FROZEN))
        return 0
    if args.from_checkpoints:
        write_table(checkpoint_curve(PILOT_CHECKPOINTS), args.out or OUT.with_name("checkpoint_curve"), digits=3)
        return 0
    s = settings(args.config.params)
    if args.diagnose is not None:
        frame = diagnose(args.diagnose, s, args.out or OUT.with_name("range_errors"))
        for column in ("first_end_off", "copies_off", "ranges_exact", "gen_exact", "exact_match"):
            print(column, dict(sorted(frame[column].value_counts().iter_rows(), key=str)))
        return 0
    if not args.configs:
        raise ParamsError("pilot-sweep: name at least one CONFIG (NAME:key=value,...), or --from-checkpoints, "
                          "--diagnose or --freeze")
    set_threads(s.threads if args.threads is None else args.threads)
    cases = build_pilot_cases(s.data, s.probeedit)
    rows = []
    for text in args.configs:
        name, over = parse_config(text)
        lora = LoraSettings(rank=over.get("rank", s.lora_rank), alpha=over.get("alpha", s.lora_alpha),
                            dropout=s.lora().dropout, targets=s.lora_targets)
        loaded = load_models(s)
        loaded.peft = add_lora(loaded.lm, lora, seed=args.seed) if lora != s.lora() else loaded.peft
        tok = loaded.tok
        train_seqs, _ = training_sequences(tok, with_split(cases, "train"), "program", s.max_tokens)
        held, _ = training_sequences(tok, with_split(cases, "heldout"), "program", 10 ** 9)
        ts = TrainSettings(steps=over.get("steps", s.steps), lr=over.get("lr", s.lr), seed=args.seed,
                           max_tokens=s.max_tokens, checkpoint_every=args.every or s.checkpoint_every,
                           warmup=over.get("warmup", s.warmup), schedule=over.get("schedule", s.schedule),
                           batch=over.get("batch", s.batch))
        started = time.perf_counter()

        def measure(step: int) -> dict:
            row = {"config": name, "step": step, **{k: v for k, v in asdict(ts).items()
                                                    if k in ("lr", "warmup", "schedule", "batch")},
                   "rank": lora.rank, "elapsed_s": round(time.perf_counter() - started, 1),
                   **asdict(teacher_forced(loaded.peft, held))}
            print(row, flush=True)
            rows.append(row)
            return row

        with loaded.peft.disable_adapter():
            measure(0)
        losses, _ = train(loaded.peft, train_seqs, ts, None, on_checkpoint=measure)
        rows[-1]["train_loss_last10"] = sum(losses[-10:]) / len(losses[-10:])
        frame = pl.DataFrame(rows)
        write_table(frame, args.out or OUT, digits=3)
    return 0
