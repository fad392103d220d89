"""Grammar-constrained generation of copy programs with transformers' `generate`: the prompt and the
mask come from kernels_profile.runtime.hf (`prompt_ids`, `ProgramLogitsProcessor`); each generated program is
judged for validity (the FSM accepts it: a property of the mask, not a model result) and exact match
(its resolved output equals the target: the model's result)."""

from __future__ import annotations

import time

import polars as pl

from analysis.errors import ProgramError
from analysis.grammar.fsm import ProgramFSM
from analysis.grammar.program import parse
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines
from kernels_profile.decode.masks import MaskTables
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, ModelTokenizer, ProgramLogitsProcessor, prompt_ids


def constrained_generation(lm, tok: ModelTokenizer, rows: pl.DataFrame, max_new: int) -> list[dict]:
    """Per row (`case_id`, `corpus`, `source`, `instruction`, `target`): greedy `generate` under the
    line-level program grammar of the row's source, within `max_new` tokens (one automaton per line count)."""
    fsms = MaskTables(tok.fsm_tokenizer, tok.eos_ids)
    return [generate_one(lm, tok, row, max_new, fsms) for row in rows.iter_rows(named=True)]


def generate_one(lm, tok: ModelTokenizer, row: dict, max_new: int, fsms: MaskTables | None = None) -> dict:
    import torch

    eos = tok.eos_ids
    fsm = (fsms if fsms is not None else MaskTables(tok.fsm_tokenizer, eos)).fsm({"lines": len(split_lines(row["source"]))})
    prompt = prompt_ids(tok, PROGRAM_TEMPLATE, row["source"], row["instruction"])
    processor = ProgramLogitsProcessor(fsm, len(prompt), max_new)
    started = time.perf_counter()
    x = torch.tensor([prompt])
    # the mask given (one unpadded row: all ones), so transformers infers none and warns of none
    out = lm.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new, do_sample=False,
                            logits_processor=[processor], pad_token_id=eos[0] if eos else None)
    seconds = time.perf_counter() - started
    new = [t for t in out[0, len(prompt):].tolist() if t not in eos]
    raw = tok.decode_bytes(new)
    text = raw.decode("utf-8", errors="backslashreplace")  # shown in the report; validity is checked strictly
    valid, em = judged(fsm, raw, text, row)
    return {"case_id": row["case_id"], "corpus": row["corpus"], "valid": valid, "exact_match": em,
            "new_tokens": len(new), "seconds": seconds, "program": text}


def judged(fsm: ProgramFSM, raw: bytes, text: str, row: dict) -> tuple[bool, bool]:
    """(valid, exact match) of a generated program: bytes that are not UTF-8 or do not parse are neither."""
    try:
        raw.decode("utf-8")
        program = parse(text)
        valid = fsm.accepts(text)
        output = resolve(program, row["source"])
    except (ProgramError, UnicodeDecodeError):
        return False, False
    return valid, output == row["target"]
