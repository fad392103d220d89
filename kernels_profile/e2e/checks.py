"""The e2e stage's side checks on a loaded model, a step of their own after its measurement: transformers'
own prompt lookup against plain greedy generation (`hf_pld_sanity`, on the first measured cases' rewrite
prompts), and grammar-constrained generation of programs (kernels_profile.decode.constrained, on a seeded
sample of one corpus's cases, drawn through analysis.corpora.sample). Neither feeds a speedup: they say
whether transformers' own PLD is lossless and fast here, and whether the grammar mask lets a model write
valid programs (params e2e.hf_pld, e2e.constrained)."""

from __future__ import annotations

import time

import polars as pl

from analysis.corpora.sample import sample_ids
from analysis.errors import ParamsError
from analysis.rivals.methods import REWRITE_PROMPT
from kernels_profile.decode.constrained import constrained_generation
from kernels_profile.e2e.job import CaseJob
from kernels_profile.e2e.settings import E2EModel, E2ESettings
from kernels_profile.runtime.hf import ModelTokenizer


def model_checks(choice: E2EModel, lm, tok: ModelTokenizer, jobs: list[CaseJob], s: E2ESettings,
                 table: pl.DataFrame, bar) -> dict:
    """The checks params name for this model: {"hf_pld": [...], "constrained": [...]}, each only where
    its model list holds the model and its case count is above 0."""
    c, out = s.checks, {}
    if c.hf_pld_cases and choice.name in c.hf_pld_models:
        bar.set_postfix_str(f"{choice.name} transformers PLD")
        out["hf_pld"] = [{"case_id": j.case_id, **hf_pld_sanity(lm, list(j.prompts[REWRITE_PROMPT]),
                                                                 c.hf_pld_max_new_tokens, s.hf_pld_k)}
                         for j in jobs[:c.hf_pld_cases]]
    if c.constrained_cases and choice.name in c.constrained_models:
        bar.set_postfix_str(f"{choice.name} constrained generation")
        out["constrained"] = constrained_generation(lm, tok, constrained_rows(table, s), c.constrained_max_new_tokens)
    return out


def constrained_rows(table: pl.DataFrame, s: E2ESettings) -> pl.DataFrame:
    """The line-level rows of params e2e.constrained.cases cases of e2e.constrained.corpus at the stage's
    framing, seeded by `seed/constrained`."""
    c = s.checks
    pool = table.filter((pl.col("corpus") == c.constrained_corpus) & (pl.col("framing") == s.framing)
                        & (pl.col("level") == "line"))
    ids = sorted(pool["case_id"].to_list())
    if not ids:
        raise ParamsError(f"e2e.constrained.corpus {c.constrained_corpus!r} has no case at framing {s.framing!r}")
    return pool.filter(pl.col("case_id").is_in(sample_ids(ids, c.constrained_cases, s.seed, "constrained")))


def hf_pld_sanity(lm, prompt: list[int], max_new: int, k: int) -> dict:
    """transformers' generate(prompt_lookup_num_tokens=k) against plain greedy generate on `prompt`
    (the rewrite prompt), the model writing its own output: an output-identity check and its speed."""
    import torch

    x = torch.tensor([prompt])
    timings, outputs = {}, {}
    for name, extra in (("greedy", {}), ("prompt_lookup", {"prompt_lookup_num_tokens": k})):
        started = time.perf_counter()
        # the mask is given (one unpadded row: all ones), so transformers infers none and warns of none
        out = lm.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new, do_sample=False, **extra)
        timings[name] = time.perf_counter() - started
        outputs[name] = out[0, len(prompt):].tolist()
    return {"prompt": REWRITE_PROMPT, "greedy_s": timings["greedy"], "pld_s": timings["prompt_lookup"],
            "speedup": timings["greedy"] / timings["prompt_lookup"],
            "identical_output": outputs["greedy"] == outputs["prompt_lookup"], "new_tokens": len(outputs["greedy"])}
