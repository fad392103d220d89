"""The pilot's plan and its checkpoint keys, without a model: the cases it decodes (`EvalCase`: the held-out
pilot cases and a seeded HEvalFix-Py sample asked as HumanEvalFix asks), each case's decode budget, the
greedy decoding jobs (`EvalJob`, `evaluation_jobs`), the keys of every checkpoint the pilot stage writes
(adapters, the base model's teacher-forced metrics, each evaluation job), and the schemas of its records and
curve tables. The stage (kernels_profile.stages.pilot) reads, trains, decodes and writes; `pilot-sweep` reads
the same tables."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from analysis.corpora.humanevalpack import bugfix_instruction
from analysis.corpora.sample import sample_ids
from analysis.errors import CorpusError
from analysis.layout import CASES
from analysis.pilot.data import PilotCase
from kernels_profile.pilot.settings import PilotSettings
from kernels_profile.runtime.checkpoints import checkpoint_key, fingerprint

HELDOUT = "heldout"


@dataclass(frozen=True)
class EvalCase:
    """One case the pilot decodes: a held-out pilot case or an HEvalFix-Py case."""

    case_id: str
    split: str     # "heldout" or the corpus name
    kind: str      # the edit kind (held-out) or "bugfix"
    source: str
    target: str
    instruction: str
    program: str   # the line-level oracle program (its length sets the budget)


# ---------------------------------------------------------------- cases

def eval_case(case: PilotCase) -> EvalCase:
    return EvalCase(case.case_id, HELDOUT, case.kind, case.source, case.target, case.instruction, case.program)


def entry_point(declaration: str, case_id: str) -> str:
    """The function a HEvalFix case fixes: the last top-level `def` of its declaration."""
    names = re.findall(r"^def\s+([A-Za-z_]\w*)\s*\(", declaration, flags=re.MULTILINE)
    if not names:
        raise CorpusError(f"pilot: {case_id} has no top-level def in its declaration, so no function to name")
    return names[-1]


def humaneval_sample(cases: pl.DataFrame, n: int, seed: int, framing: str = "decl",
                     corpus: str = "HEvalFix-Py") -> list[EvalCase]:
    """A seeded sample of `n` cases of `corpus` (drawn from the body-framed ids, so every framing draws
    the same functions) in `framing`, each with HumanEvalFix's bug-fix instruction naming the function
    (found in the declaration: decl source minus the body)."""
    rows = cases.filter(pl.col("corpus") == corpus)
    body = {r["case_id"]: r for r in rows.filter(pl.col("framing") == "body").iter_rows(named=True)}
    decl = {r["case_id"]: r for r in rows.filter(pl.col("framing") == "decl").iter_rows(named=True)}
    framed = {r["case_id"]: r for r in rows.filter(pl.col("framing") == framing).iter_rows(named=True)}
    if len(body) < n:
        raise CorpusError(f"pilot: {corpus} has {len(body)} body cases in {CASES}, fewer than "
                          f"pilot.humaneval_cases={n}")
    ids = sorted(body, key=lambda c: int(c.rsplit("/", 1)[-1]))
    chosen = sample_ids(ids, n, seed)  # in the ids' order
    out = []
    for case_id in chosen:
        if case_id not in decl or case_id not in framed:
            raise CorpusError(f"pilot: {case_id} has no {'decl' if case_id not in decl else framing} framing in "
                              f"{CASES} (the corpora stage's hevalfix framings must include body, decl and {framing})")
        source = decl[case_id]["source"]
        if not source.endswith(body[case_id]["source"]):
            raise CorpusError(f"pilot: {case_id}'s decl source does not end with its body")
        name = entry_point(source[: len(source) - len(body[case_id]["source"])], case_id)
        row = framed[case_id]
        out.append(EvalCase(case_id, corpus, "bugfix", row["source"], row["target"], bugfix_instruction(name), ""))
    return out


# ---------------------------------------------------------------- keys and checkpoints

CHECKPOINT_VERSION = "pilot-2"  # bump when what a pilot checkpoint holds changes (2: runtime JSON, fingerprint)


def digest(parts: Any) -> str:
    return checkpoint_key(CHECKPOINT_VERSION, parts)


def model_key(s: PilotSettings) -> dict:
    """The model a checkpoint ran: its settings and runtime.fingerprint (shapes and weights, library
    versions incl. peft, torch threads)."""
    return {"model": s.model, "weights": s.weights, "dtype": s.dtype, "device": s.device,
            "fingerprint": fingerprint(s.model, s.weights)}


def sequences_hash(sequences) -> str:
    return checkpoint_key("sequences", [[q.ids, q.labels] for q in sequences])


def adapter_key(s: PilotSettings, mode: str, seed: int, sequences, heldout=()) -> str:
    """Everything that decides an adapter checkpoint: its weights and the held-out curve it keeps."""
    return digest({"model": model_key(s), "mode": mode, "sequences": sequences_hash(sequences),
                   "heldout": sequences_hash(heldout), "lora": asdict(s.lora()),
                   "training": asdict(s.training(seed))})


# ---------------------------------------------------------------- budgets

def case_budget(tok, case: EvalCase, margin: int) -> int:
    """Gold target tokens (or its oracle program's, when longer) plus the margin."""
    target = len(tok.encode(case.target))
    program = len(tok.encode(case.program)) if case.program else 0
    return max(target, program) + margin + 1  # +1: the EOS


def before_key(s: PilotSettings, heldout_sequences) -> str:
    """Everything that decides the base model's teacher-forced held-out metrics."""
    return digest({"model": model_key(s), "heldout": sequences_hash(heldout_sequences)})


def evaluation_key(s: PilotSettings, job: EvalJob, cases: list[EvalCase], budgets: dict[str, int],
                   adapters: dict[str, str]) -> str:
    """Everything that decides an evaluation job's records: the model, the job, its adapters' keys (or
    "base"), the threads, the order seed and every case with its budget."""
    return digest({"model": model_key(s), "job": job.key(), "adapters": adapters, "threads": s.threads,
                   "order_seed": s.order_seed,
                   "cases": [[c.case_id, c.source, c.target, c.instruction, budgets[c.case_id]] for c in cases]})


def forced_row(metrics) -> dict:
    return asdict(metrics)


CURVE_SCHEMA = {"mode": pl.Utf8, "seed": pl.Int64, "step": pl.Int64, "sequences": pl.Int64,
                "supervised_tokens": pl.Int64, "loss": pl.Float64, "directive_accuracy": pl.Float64,
                "copy_exact": pl.Float64, "gen_exact": pl.Float64, "eos_accuracy": pl.Float64,
                "all_exact": pl.Float64}


def curve_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in CURVE_SCHEMA} for r in rows], schema=CURVE_SCHEMA)


@dataclass(frozen=True)
class EvalJob:
    """One greedy decoding job: the base model (`before`) or a seed's adapters (`after`) on a split, in one
    mode or two (each case then runs both back to back in a seeded order)."""

    phase: str                 # before | after
    seed: int | None           # the adapters' training seed; None before fine-tuning
    split: str                 # HELDOUT | HEvalFix-Py
    modes: tuple[str, ...]     # program and/or rewrite

    def key(self) -> dict:
        """The job as its checkpoint key part (the dict the key was built from before it was typed)."""
        return {"phase": self.phase, "seed": self.seed, "split": self.split, "modes": list(self.modes)}

    def describe(self) -> str:
        return f"{self.phase} {'+'.join(self.modes)} seed {self.seed} {self.split}"


def evaluation_jobs(s: PilotSettings, n_humaneval: int) -> list[EvalJob]:
    """Greedy decoding jobs: the base model on the held-out cases (and HEvalFix-Py), each decode seed's
    program adapter (paired with its rewrite adapter where the seed has one), every rewrite seed, and
    the humaneval seeds' program adapters on HEvalFix-Py."""
    jobs = [EvalJob("before", None, HELDOUT, ("program",))]
    if n_humaneval:
        jobs.append(EvalJob("before", None, "HEvalFix-Py", ("program",)))
    for seed in sorted(set(s.decode_seeds) | set(s.rewrite_seeds)):
        modes = tuple(m for m, seeds in (("program", s.decode_seeds), ("rewrite", s.rewrite_seeds)) if seed in seeds)
        jobs.append(EvalJob("after", seed, HELDOUT, modes))
    if n_humaneval:
        jobs += [EvalJob("after", seed, "HEvalFix-Py", ("program",)) for seed in s.humaneval_seeds]
    return jobs


RECORD_SCHEMA = {
    "phase": pl.Utf8, "seed": pl.Int64, "split": pl.Utf8, "mode": pl.Utf8, "case_id": pl.Utf8, "kind": pl.Utf8,
    "position": pl.Int64, "paired": pl.Boolean, "budget": pl.Int64, "error": pl.Utf8, "exact_match": pl.Boolean,
    "valid": pl.Boolean, "stopped": pl.Utf8, "copy_coverage": pl.Float64, "seconds": pl.Float64, "prompt_s": pl.Float64,
    "decode_s": pl.Float64, "copy_s": pl.Float64, "mask_s": pl.Float64, "program_tokens": pl.Int64,
    "copied_tokens": pl.Int64, "forwards": pl.Int64, "program": pl.Utf8, "output": pl.Utf8,
}


def records_frame(records: list[dict]) -> pl.DataFrame:
    rows = [{k: r.get(k) for k in RECORD_SCHEMA} for r in records]
    return pl.DataFrame(rows, schema=RECORD_SCHEMA)
