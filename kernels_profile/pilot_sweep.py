"""A small sweep of the pilot's training settings, judged by teacher-forced held-out metrics.

    python -m kernels_profile.pilot_sweep --threads 1 NAME:steps=96,lr=0.003,warmup=8,schedule=cosine ...

Each NAME trains one program adapter (seed `--seed`) from the params' `pilot` group with the given
overrides (steps, lr, warmup, schedule, batch, rank, alpha) and measures kernels_profile.pilot's
teacher-forced metrics on every held-out case before training and every `--every` steps. `all_exact`
(every supervised token the argmax) is a lower bound on greedy held-out EM. Writes
reports/pilot/sweep.{csv,md} (one row per config and step) and prints each row as it comes; a rerun
appends nothing, it rewrites the table from the configs given.

    python -m kernels_profile.pilot_sweep --from-checkpoints

reads the curve (and the losses so far) kept in every adapter checkpoint under data/pilot/checkpoints/,
finished or not, and writes reports/pilot/checkpoint_curve.{csv,md}: what an interrupted `copydecode
pilot` had measured (the stage itself writes data/pilot/curve.parquet only when it finishes).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import polars as pl

from analysis.config import Config
from analysis.io import write_table
from analysis.pilotdata import build_pilot_cases, with_split

OUT = Path("reports/pilot/sweep")
KEYS = {"steps": int, "lr": float, "warmup": int, "schedule": str, "batch": int, "rank": int, "alpha": int}


def parse_config(text: str) -> tuple[str, dict]:
    name, _, body = text.partition(":")
    values = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        if key not in KEYS:
            raise SystemExit(f"pilot_sweep: unknown setting {key!r}; known: {', '.join(KEYS)}")
        values[key] = KEYS[key](value)
    return name, values


def checkpoint_curve(directory: Path) -> pl.DataFrame:
    """One row per curve point kept in the adapter checkpoints in `directory` (step 0, the base model,
    is kept in the stage's forced-before JSON files, not here), with the steps trained so far."""
    import torch

    rows = []
    for path in sorted(directory.glob("*-seed*-*.pt")):
        mode, seed = path.name.split("-seed")[0], int(path.name.split("-seed")[1].split("-")[0])
        state = torch.load(path, weights_only=False)
        for point in state.get("curve", []):
            rows.append({"mode": mode, "seed": seed, "trained_steps": len(state["losses"]), **point})
    return pl.DataFrame(rows)


def main(argv=None) -> None:
    from kernels_profile.pilot import LoraSettings, TrainSettings, add_lora, teacher_forced, train, training_sequences
    from kernels_profile.runtime import set_threads
    from kernels_profile.stages.pilot import load_models, settings

    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--from-checkpoints", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=24)
    args = ap.parse_args(argv)
    if args.from_checkpoints:
        from analysis.layout import PILOT_CHECKPOINTS

        write_table(checkpoint_curve(PILOT_CHECKPOINTS), OUT.with_name("checkpoint_curve"), digits=3)
        return
    s = settings(Config.load("params.yaml"))
    set_threads(args.threads)
    cases = build_pilot_cases(s.data, s.probeedit)
    rows = []
    for text in args.configs:
        name, over = parse_config(text)
        lora = LoraSettings(rank=over.get("rank", s.lora_rank), alpha=over.get("alpha", s.lora_alpha),
                            targets=s.lora_targets)
        loaded = load_models(s)
        loaded.peft = add_lora(loaded.lm, lora, seed=args.seed) if lora != s.lora() else loaded.peft
        tok = loaded.tok
        train_seqs, _ = training_sequences(tok, with_split(cases, "train"), "program", s.max_tokens)
        held, _ = training_sequences(tok, with_split(cases, "heldout"), "program", 10 ** 9)
        ts = TrainSettings(steps=over.get("steps", s.steps), lr=over.get("lr", s.lr), seed=args.seed,
                           max_tokens=s.max_tokens, checkpoint_every=args.every,
                           warmup=over.get("warmup", 0), schedule=over.get("schedule", "constant"),
                           batch=over.get("batch", 1))
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
        write_table(frame, OUT, digits=3)


if __name__ == "__main__":
    main()
