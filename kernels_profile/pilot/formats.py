"""The pilot's edit-format check, decoded (analysis.pilot.formats has the prompts, the judge and the table): the base
model writes each held-out case as a copy program, a unified diff and search/replace blocks, each prompt showing
one worked example, decoded greedily without a grammar; each decode seed's program adapter writes the program from
the prompt it was trained on, also without the grammar (the pilot's own decodes give the same under the grammar).

Each decode is a runtime JSON checkpoint keyed by everything that decides it (the model, the adapter's key, the
prompt, the case and its budget), so a rerun resumes case by case.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from analysis.parallel.progress import progress
from analysis.pilot.formats import FORMATS, FREE, PROGRAM, gold_text, judge, numbered_input, system_text
from kernels_profile.decode.decoder import DecodeError, decode_rewrite
from kernels_profile.pilot.train import load_adapter_state
from kernels_profile.runtime.checkpoints import FromScratch, checkpoint_key, read_json_checkpoint, write_json_checkpoint
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, PromptTemplate

CHECKPOINT_VERSION = "pilot-formats-1"  # bump when what a format decode's checkpoint holds changes
BASE = "base model"


@dataclass(frozen=True)
class FormatJob:
    """One variant writing one format: the base model (`seed` None) with the format's one-shot prompt, or a program
    adapter with its training prompt."""

    fmt: str
    seed: int | None

    @property
    def variant(self) -> str:
        return BASE if self.seed is None else f"program adapter, seed {self.seed}"

    @property
    def prompt(self) -> str:
        return "one worked example" if self.seed is None else "its training prompt (no example)"

    def template(self, diff_context: int) -> PromptTemplate:
        if self.seed is not None:
            return PROGRAM_TEMPLATE
        return PromptTemplate(f"format-{self.fmt}", system_text(self.fmt, diff_context), numbered=numbered_input(self.fmt))


def format_jobs(decode_seeds: tuple[int, ...]) -> list[FormatJob]:
    return [FormatJob(fmt, None) for fmt in FORMATS] + [FormatJob(PROGRAM, seed) for seed in decode_seeds]


def case_budget(tok, gold: str, margin: int) -> int:
    """The gold text's tokens in the format plus the margin (and the EOS), as the pilot budgets a decode."""
    return len(tok.encode(gold)) + margin + 1


def decode_format_case(loaded, job: FormatJob, case, s, states: dict, model_key: dict, checkpoints: Path,
                       scratch: FromScratch) -> dict:
    """One case written in one format by one variant, judged; a checkpoint read back when it holds this decode."""
    template = job.template(s.formats.diff_context)
    gold = gold_text(job.fmt, case.source, case.target, case.program, s.formats.diff_context)
    budget = case_budget(loaded.tok, gold, s.budget_margin)
    adapter = "base" if job.seed is None else states[(PROGRAM, job.seed)][0]
    key = checkpoint_key(CHECKPOINT_VERSION, {"model": model_key, "adapter": adapter, "system": template.system,
                                              "numbered": template.numbered, "case": [case.case_id, case.source,
                                              case.target, case.instruction], "budget": budget})
    path = checkpoints / f"format-{job.fmt}-{'base' if job.seed is None else f'seed{job.seed}'}-{key}.json"
    found = read_json_checkpoint(path, key, fields={"record"}, what="pilot formats")
    if found is not None:
        scratch.read_back(found.seconds)
        return found.content["record"]
    scratch.mark()
    record = {"variant": job.variant, "prompt": job.prompt, "decoding": FREE, "format": job.fmt,
              "case_id": case.case_id, "kind": case.kind, "budget": budget}
    if job.seed is not None:
        load_adapter_state(loaded.peft, states[(PROGRAM, job.seed)][1])
    try:
        with loaded.peft.disable_adapter() if job.seed is None else nullcontext():
            text, seconds, tokens, stopped = decode_rewrite(loaded.lm, loaded.tok, case.source, case.instruction,
                                                            template, budget, case.case_id)
    except DecodeError as exc:
        record |= {"error": str(exc), "well_formed": False, "applies": False, "exact_match": False}
    else:
        judged = judge(job.fmt, text, case.source, case.target)
        record |= {"tokens": tokens, "stopped": stopped, "seconds": seconds, "output": text,
                   "well_formed": judged.well_formed, "range_error": judged.range_error, "applies": judged.applies,
                   "exact_match": judged.exact_match, "error": judged.error}
    write_json_checkpoint({"record": record}, path, key, scratch.measured())
    return record


def decode_formats(s, loaded, cases: list, states: dict, model_key: dict, checkpoints: Path,
                   scratch: FromScratch) -> list[dict]:
    """Every format job on `cases` (analysis.pilot.formats.spread of the held-out cases), one bar over the decodes: the
    base model's, and each decode seed's program adapter's where `states` holds it (none with --formats-only)."""
    jobs = format_jobs(tuple(seed for seed in s.decode_seeds if (PROGRAM, seed) in states))
    bar = progress(None, "pilot: edit formats", total=len(jobs) * len(cases), unit="decode")
    records = []
    for job in jobs:
        bar.set_description(f"pilot: {job.variant} writes {job.fmt}")
        for case in cases:
            records.append({"model": s.model, **decode_format_case(loaded, job, case, s, states, model_key,
                                                                   checkpoints, scratch)})
            bar.update(1)
    bar.close()
    return records
