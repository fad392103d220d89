"""End-to-end measurement on a real KV cache, with plain arguments (the `e2e` stage orchestrates).

For one case, from the same cached prompt, with `repeats` repeats:
  ar            regenerate the gold output token by token
  pld_oracle    prompt lookup decoding, gold acceptance (upper bound on PLD)
  cad_line      Copy-as-Decode executor, line-level oracle program
  cad_token     Copy-as-Decode executor, token-level oracle program
plus the losslessness check (executor's final logits vs one-token steps over the same sequence),
transformers' own generate(prompt_lookup_num_tokens=k) against plain greedy generate, and
grammar-constrained generation of programs (validity, exact match, mask cost).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.layout import framing_filter

METHODS = ("ar", "pld_oracle", "cad_line", "cad_token")


def sample_cases(table: pl.DataFrame, sample: tuple[tuple[str, int | None], ...], framing: str, seed: int) -> pl.DataFrame:
    """A seeded sample per corpus (a count of None takes every case of that corpus)."""
    picked = []
    for corpus, count in sample:
        rows = table.filter((pl.col("corpus") == corpus) & framing_filter(framing))
        ids = sorted(set(rows["case_id"].to_list()))
        if not ids:
            raise ParamsError(f"e2e sample names corpus {corpus!r} with no cases at framing {framing!r}")
        chosen = ids if count is None else random.Random(f"{seed}/{corpus}").sample(ids, min(count, len(ids)))
        picked.append(rows.filter(pl.col("case_id").is_in(chosen)))
    return pl.concat(picked).sort("corpus", "case_id", "level")


def prompt_ids(hf_tok, source: str, instruction: str) -> list[int]:
    from kernels_profile.constrained import edit_messages

    messages = edit_messages(source, instruction)
    if getattr(hf_tok, "chat_template", None):
        ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    text = "\n\n".join(m["content"] for m in messages) + "\n\n"
    return hf_tok(text, add_special_tokens=False)["input_ids"]


def latency_curve(lm, grid: tuple[int, ...], ar_steps: int, context: int, repeats: int) -> dict:
    """T_prefill(N) over `grid` and T_ar(N) for N = 1..ar_steps, on this model at this context, measured
    in the same run as the cases (medians over repeats). The e2e prediction is composed from these
    alone, never from a case's own measured AR time."""
    from kernels_profile.profiler import CacheBench

    bench = CacheBench(lm, context, max(max(grid), ar_steps), seed=0)
    for n in grid:
        bench.prefill(n)  # warm-up
    bench.ar(min(ar_steps, 4), "eager")
    prefill = [{"n": n, "context": context, "median": float(np.median([bench.prefill(n) for _ in range(repeats)]))}
               for n in grid]
    runs = [bench.ar(ar_steps, "eager") for _ in range(repeats)]
    ar = [{"n": n, "context": context, "median": float(np.median([r[n - 1] for r in runs]))}
          for n in sorted({1, 2, 4, 8, 16, 32, ar_steps}) if n <= ar_steps]
    return {"prefill": prefill, "ar": ar, "context": context}


def curve_model(curve: dict, name: str):
    """The interpolated latency model (analysis.latency) of an e2e curve."""
    from analysis.latency import FitOptions, ModelKey, fit_points

    key = ModelKey(name, "e2e", "e2e", "cpu", "eager")
    return fit_points(pl.DataFrame(curve["ar"]), pl.DataFrame(curve["prefill"]), key, FitOptions("interp"))


def predicted_speedup(segments, model, context: int, prompt_tokens: int) -> float:
    """The closed-form bound (analysis.bounds, ideal variant) of the executor's own segments."""
    from analysis.bounds import CostSettings, SpanOp, case_cost

    ops = [SpanOp(s.kind, len(s.ids), len(s.ids) if s.kind == "copy" else 0, 0) for s in segments]
    settings = CostSettings(context_mode="fixed", context=context, extrapolate=True)
    return case_cost(ops, model, settings, prompt_tokens=prompt_tokens).bound("ideal")


@dataclass(frozen=True)
class PldSettings:
    k: int
    ngram_max: int


def measure_case(executor, gold_ids: list[int], segments: dict, pld: PldSettings, repeats: int) -> list[dict]:
    """Every method once per repeat, from the same cached prompt."""
    records = []
    for repeat in range(repeats):
        runs = {
            "ar": executor.autoregressive(gold_ids)[0],
            "pld_oracle": executor.pld_oracle(gold_ids, pld.k, pld.ngram_max),
            "cad_line": executor.copy_as_decode(segments["line"])[0],
            "cad_token": executor.copy_as_decode(segments["token"])[0],
        }
        for method, run in runs.items():
            records.append({"method": method, "repeat": repeat, "seconds": run.seconds,
                            "forwards": run.forwards, "tokens": run.tokens})
    return records


def losslessness(executor, segments, tolerance: float) -> dict:
    """Executor's final logits vs one-token steps over exactly the same token sequence."""
    from kernels_profile.equivalence import compare_logits

    _, cad_logits = executor.copy_as_decode(segments)
    sequence = [t for s in segments for t in s.ids]
    _, ar_logits = executor.autoregressive(sequence)
    check = compare_logits(cad_logits, ar_logits, tolerance)
    return {"logits_rel_diff": check.rel_diff, "argmax_equal": check.argmax_equal, "ok": check.ok}


def hf_pld_sanity(lm, prompt: list[int], max_new: int, k: int) -> dict:
    import torch

    x = torch.tensor([prompt])
    timings = {}
    outputs = {}
    for name, extra in (("greedy", {}), ("prompt_lookup", {"prompt_lookup_num_tokens": k})):
        started = time.perf_counter()
        out = lm.model.generate(x, max_new_tokens=max_new, do_sample=False, **extra)
        timings[name] = time.perf_counter() - started
        outputs[name] = out[0, len(prompt):].tolist()
    return {"greedy_s": timings["greedy"], "pld_s": timings["prompt_lookup"],
            "speedup": timings["greedy"] / timings["prompt_lookup"],
            "identical_output": outputs["greedy"] == outputs["prompt_lookup"], "new_tokens": len(outputs["greedy"])}


# ---------------------------------------------------------------- constrained generation

def mask_cost(fsm, programs: list[str], repeats: int = 200) -> dict:
    """Cold (first computation of a state's mask) and warm (cached) mask cost, and the cost of
    applying a mask to a logits row, over the states that rendered programs walk through."""
    import torch

    states, seen = [], set()
    for text in programs:
        state = fsm.initial
        for token in fsm.tokenizer.encode(text).ids:
            if state not in seen:
                seen.add(state)
                states.append(state)
            state = fsm.advance(state, token)
    cold = []
    for state in states:
        started = time.perf_counter()
        fsm.compute_mask(state)  # uncached: what the first visit of a state costs
        cold.append(time.perf_counter() - started)
    warm = []
    for _ in range(repeats):
        for state in states[:50]:
            started = time.perf_counter()
            fsm.allowed(state)
            warm.append(time.perf_counter() - started)
    logits = torch.randn(1, fsm.vocab_size)
    masks = [torch.from_numpy(fsm.allowed(s)) for s in states[:50]]
    apply = []
    for _ in range(repeats // 10 or 1):
        for m in masks:
            started = time.perf_counter()
            logits.masked_fill(~m, float("-inf"))
            apply.append(time.perf_counter() - started)
    q = lambda xs: {"median_us": float(np.median(xs) * 1e6), "p25_us": float(np.quantile(xs, 0.25) * 1e6),
                    "p75_us": float(np.quantile(xs, 0.75) * 1e6), "n": len(xs)}
    return {"vocab_size": fsm.vocab_size, "states": len(states), "cold": q(cold), "warm": q(warm), "apply": q(apply)}


def constrained_generation(lm, hf_tok, suite_tok, rows: pl.DataFrame, max_new: int, eos: tuple[int, ...]) -> list[dict]:
    import torch

    from analysis.errors import ProgramError
    from analysis.fsm import ProgramFSM
    from analysis.program import parse
    from analysis.resolver import resolve
    from analysis.text import split_lines
    from kernels_profile.constrained import ProgramLogitsProcessor

    records = []
    for row in rows.iter_rows(named=True):
        fsm = ProgramFSM(suite_tok, {"lines": len(split_lines(row["source"]))}, eos_ids=eos)
        prompt = prompt_ids(hf_tok, row["source"], row["instruction"])
        processor = ProgramLogitsProcessor(fsm, len(prompt), max_new)
        started = time.perf_counter()
        out = lm.model.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False,
                                logits_processor=[processor], pad_token_id=eos[0] if eos else None)
        seconds = time.perf_counter() - started
        new = [t for t in out[0, len(prompt):].tolist() if t not in eos]
        raw = b"".join(suite_tok.piece(t) for t in new)
        text = raw.decode("utf-8", errors="backslashreplace")  # shown in the report; validity is checked strictly
        try:
            raw.decode("utf-8")
            program = parse(text)
            valid = fsm.accepts(text)
            output = resolve(program, row["source"])
            em = output == row["target"]
        except (ProgramError, UnicodeDecodeError):
            valid, em = False, False
        records.append({"case_id": row["case_id"], "corpus": row["corpus"], "valid": valid, "exact_match": em,
                        "new_tokens": len(new), "seconds": seconds, "program": text})
    return records


# ---------------------------------------------------------------- summary

def speedup_summary(measurements: pl.DataFrame) -> pl.DataFrame:
    """Per model and corpus: each method's speedup over AR (ratio of total times, and the median and
    IQR of per-case speedups), with the closed-form prediction for the same cases beside it."""
    per_case = measurements.group_by("model", "corpus", "case_id", "method").agg(
        seconds=pl.col("seconds").median(), forwards=pl.col("forwards").first(),
        predicted_line=pl.col("predicted_line").first(), predicted_token=pl.col("predicted_token").first(),
    )
    ar = per_case.filter(pl.col("method") == "ar").select("model", "case_id", pl.col("seconds").alias("ar_seconds"))
    joined = per_case.join(ar, on=["model", "case_id"]).with_columns(speedup=pl.col("ar_seconds") / pl.col("seconds"))
    return joined.group_by("model", "corpus", "method").agg(
        cases=pl.len(), total_seconds=pl.col("seconds").sum(),
        speedup_total=pl.col("ar_seconds").sum() / pl.col("seconds").sum(),
        speedup_median=pl.col("speedup").median(),
        speedup_q25=pl.col("speedup").quantile(0.25, interpolation="linear"),
        speedup_q75=pl.col("speedup").quantile(0.75, interpolation="linear"),
        forwards=pl.col("forwards").sum(),
        predicted=pl.when(pl.col("method") == "cad_line").then(pl.col("predicted_line"))
        .when(pl.col("method") == "cad_token").then(pl.col("predicted_token")).otherwise(None).median(),
    ).sort("model", "corpus", "method")
