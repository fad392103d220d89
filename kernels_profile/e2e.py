"""The measured end-to-end comparison (`copydecode e2e`), one model at a time, on a seeded case sample.

For every sampled case, from the same cached prompt, timed with `repeats` repeats:
  ar            regenerate the gold output token by token
  pld_oracle    prompt lookup decoding, gold acceptance (upper bound on PLD)
  cad_line      Copy-as-Decode executor, line-level oracle program
  cad_token     Copy-as-Decode executor, token-level oracle program
plus the closed-form prediction for the same case (its spans, with t_step = the case's measured AR
time per token and T_prefill from a prefill curve measured on the same model in the same run),
the losslessness check (executor's final logits vs one-token steps over the same sequence),
transformers' own generate(prompt_lookup_num_tokens=k) against plain greedy generate, and
grammar-constrained generation of programs (validity, exact match, mask cost).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.params import get, positive_int

CHECKPOINTS = Path("data/e2e/checkpoints")
MEASUREMENTS = Path("data/e2e/measurements.parquet")
METHODS = ("ar", "pld_oracle", "cad_line", "cad_token")


@dataclass(frozen=True)
class ModelChoice:
    name: str
    weights: str
    dtype: str
    sample: dict[str, int]


def model_choices(params: dict[str, Any]) -> list[ModelChoice]:
    choices = []
    for entry in get(params, "e2e.models", list):
        try:
            choices.append(ModelChoice(entry["name"], entry["weights"], entry["dtype"], dict(entry["sample"])))
        except (KeyError, TypeError) as exc:
            raise ParamsError(f"e2e.models: each entry needs name, weights, dtype and sample; got {entry!r}") from exc
    return choices


def sample_cases(table: pl.DataFrame, sample: dict[str, int], framing: str, seed: int) -> pl.DataFrame:
    """A seeded sample per corpus ("all" takes every case of that corpus)."""
    picked = []
    for corpus, count in sample.items():
        rows = table.filter((pl.col("corpus") == corpus) & pl.col("framing").is_in([framing, "unit"]))
        ids = sorted(set(rows["case_id"].to_list()))
        if not ids:
            raise ParamsError(f"e2e sample names corpus {corpus!r} with no cases at framing {framing!r}")
        chosen = ids if count == "all" else random.Random(f"{seed}/{corpus}").sample(ids, min(int(count), len(ids)))
        picked.append(rows.filter(pl.col("case_id").is_in(chosen)))
    return pl.concat(picked).sort("corpus", "case_id", "level")


def load_model_and_tokenizer(choice: ModelChoice):
    from transformers import AutoTokenizer

    from analysis.tokenization import embedded_qwen_dir
    from kernels_profile.constrained import smollm2_tokenizer
    from kernels_profile.models import SMOLLM2, build_model

    lm = build_model(choice.name, choice.weights, choice.dtype, "cpu")
    hf_tok = smollm2_tokenizer() if choice.name == SMOLLM2 else AutoTokenizer.from_pretrained(str(embedded_qwen_dir()))
    return lm, hf_tok


def prompt_ids(hf_tok, source: str, instruction: str) -> list[int]:
    from kernels_profile.constrained import edit_messages

    messages = edit_messages(source, instruction)
    if getattr(hf_tok, "chat_template", None):
        ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    text = "\n\n".join(m["content"] for m in messages) + "\n\n"
    return hf_tok(text, add_special_tokens=False)["input_ids"]


def prefill_curve(lm, grid: list[int], context: int, repeats: int) -> dict:
    """T_prefill(N) on this model at this context, fitted like the kernel profile's prefill."""
    from kernels_profile.latency import PREFILL_TERMS, fit_curve, prefill_design
    from kernels_profile.profiler import CacheBench

    bench = CacheBench(lm, context, max(grid), seed=0)
    for n in grid:
        bench.prefill(n)  # warm-up
    rows = [{"n": n, "context": context, "median": float(np.median([bench.prefill(n) for _ in range(repeats)]))} for n in grid]
    fit = fit_curve(pl.DataFrame(rows), prefill_design, PREFILL_TERMS, [])
    return {"terms": fit.terms, "r2": fit.r2, "points": rows}


def predicted_speedup(segments, t_step: float, prefill_terms: dict, context: int) -> float:
    from analysis.bounds import KernelModel

    km = KernelModel(a=t_step, b=0.0, **prefill_terms)
    gold = sum(len(s.ids) for s in segments)
    cost = sum(float(km.t_prefill([len(s.ids)], context)[0]) if s.kind == "copy" else len(s.ids) * t_step for s in segments)
    return gold * t_step / cost


def measure_case(executor, row_line, row_token, gold_ids, segs, params, repeats) -> list[dict]:
    k, ngram = positive_int(params, "e2e.pld.k"), positive_int(params, "e2e.pld.ngram_max")
    records = []
    for repeat in range(repeats):
        runs = {
            "ar": executor.autoregressive(gold_ids)[0],
            "pld_oracle": executor.pld_oracle(gold_ids, k, ngram),
            "cad_line": executor.copy_as_decode(segs["line"])[0],
            "cad_token": executor.copy_as_decode(segs["token"])[0],
        }
        for method, run in runs.items():
            records.append({"method": method, "repeat": repeat, "seconds": run.seconds,
                            "forwards": run.forwards, "tokens": run.tokens})
    return records


def losslessness(executor, segments, tolerance: float) -> dict:
    """Executor's final logits vs one-token steps over exactly the same token sequence."""
    from kernels_profile.equivalence import _rel_diff

    _, cad_logits = executor.copy_as_decode(segments)
    sequence = [t for s in segments for t in s.ids]
    _, ar_logits = executor.autoregressive(sequence)
    diff = _rel_diff(cad_logits, ar_logits)
    return {"logits_rel_diff": diff, "argmax_equal": bool((cad_logits.argmax(-1) == ar_logits.argmax(-1)).all()),
            "ok": diff <= tolerance}


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
        fsm._masks.pop(state, None)
        started = time.perf_counter()
        fsm.allowed(state)
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


def constrained_generation(lm, hf_tok, suite_tok, rows: pl.DataFrame, max_new: int) -> list[dict]:
    import torch

    from analysis.errors import ProgramError
    from analysis.fsm import ProgramFSM
    from analysis.program import parse
    from analysis.resolver import resolve
    from analysis.text import split_lines
    from kernels_profile.constrained import ProgramLogitsProcessor

    eos = tuple(i for i in {hf_tok.eos_token_id} if i is not None)
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
        text = b"".join(suite_tok.piece(t) for t in new).decode("utf-8", errors="replace")
        try:
            program = parse(text)
            valid = fsm.accepts(text)
            output = resolve(program, row["source"])
            em = output == row["target"]
        except ProgramError:
            valid, em = False, False
        records.append({"case_id": row["case_id"], "corpus": row["corpus"], "valid": valid, "exact_match": em,
                        "new_tokens": len(new), "seconds": seconds, "program": text})
    return records


# ---------------------------------------------------------------- the stage

def _cases_with_programs() -> pl.DataFrame:
    from analysis.stages import _joined_programs

    return _joined_programs()


def _instructions(params) -> dict[str, str]:
    """HEvalFix's own instruction per task; ProbeEdit-S gets a generic one naming its edit kind."""
    from analysis import corpora

    hep = "corpora.humanevalpack"
    out = {}
    for language in get(params, f"{hep}.languages", list):
        records, _ = corpora.load_humanevalpack(language, get(params, f"{hep}.local_dir", str),
                                                get(params, f"{hep}.source", str), get(params, f"{hep}.verify_sha256", bool))
        for r in records:
            out[f"{corpora.corpus_name(language)}/{r['task_id'].rsplit('/', 1)[-1]}"] = r.get("instruction") or "Fix the bug."
    edits = Path("data/corpora/probeedit_edits.parquet")
    if edits.is_file():
        for r in pl.read_parquet(edits).iter_rows(named=True):
            out[r["case_id"]] = f"Apply one {r['kind'].replace('_', ' ')} edit at line {r['site_line']}."
    return out


def run_model(choice: ModelChoice, params: dict[str, Any], table: pl.DataFrame, instructions: dict[str, str], bar) -> dict:
    from analysis.program import parse
    from analysis.tokenization import load_tokenizer
    from kernels_profile.executor import Executor, program_segments

    framing = get(params, "e2e.framing", str)
    repeats = positive_int(params, "e2e.repeats")
    rows = sample_cases(table, choice.sample, framing, get(params, "e2e.seed", int))
    qwen = load_tokenizer(get(params, "tokenizer.spec", str))
    bar.set_postfix_str(f"loading {choice.name}")
    lm, hf_tok = load_model_and_tokenizer(choice)
    encode = lambda text: hf_tok(text, add_special_tokens=False)["input_ids"]
    case_ids = sorted(set(rows["case_id"].to_list()))
    prompts = {c: prompt_ids(hf_tok, rows.filter(pl.col("case_id") == c)["source"][0], instructions.get(c, "Fix the bug."))
               for c in case_ids}
    context = int(np.median([len(p) for p in prompts.values()]))
    bar.set_postfix_str(f"{choice.name} prefill curve")
    curve = prefill_curve(lm, [int(n) for n in get(params, "e2e.prefill_grid", list)], context, repeats)
    measured, lossless = [], []
    for case_id in case_ids:
        both = rows.filter(pl.col("case_id") == case_id)
        line, token = (both.filter(pl.col("level") == lv).row(0, named=True) for lv in ("line", "token"))
        ckpt = CHECKPOINTS / f"{choice.name}-{choice.dtype}-{case_id.replace('/', '_')}-r{repeats}.parquet"
        bar.set_postfix_str(f"{choice.name} {case_id}")
        bounds = qwen.encode(line["source"]).char_bounds
        segs = {"line": program_segments(parse(line["program"]), line["source"], None, encode),
                "token": program_segments(parse(token["program"]), token["source"], bounds, encode)}
        gold = encode(line["target"])
        if ckpt.is_file():
            frame = pl.read_parquet(ckpt)
        else:
            executor = Executor(lm, prompts[case_id])
            records = measure_case(executor, line, token, gold, segs, params, repeats)
            t_step = float(np.median([r["seconds"] for r in records if r["method"] == "ar"])) / max(len(gold), 1)
            if case_ids.index(case_id) < get(params, "e2e.lossless_cases", int):
                check = losslessness(executor, segs["line"], float(get(params, "e2e.losslessness_tolerance", float)))
            else:  # the check costs a second AR pass; it runs on the first lossless_cases cases only
                check = {"logits_rel_diff": None, "ok": None}
            frame = pl.DataFrame(records).with_columns(
                model=pl.lit(choice.name), weights=pl.lit(choice.weights), dtype=pl.lit(choice.dtype),
                case_id=pl.lit(case_id), corpus=pl.lit(line["corpus"]), gold_tokens=pl.lit(len(gold)),
                prompt_tokens=pl.lit(len(prompts[case_id])),
                predicted_line=pl.lit(predicted_speedup(segs["line"], t_step, curve["terms"], context)),
                predicted_token=pl.lit(predicted_speedup(segs["token"], t_step, curve["terms"], context)),
                lossless_rel_diff=pl.lit(check["logits_rel_diff"]), lossless_ok=pl.lit(check["ok"]),
            )
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            frame.write_parquet(ckpt)
        measured.append(frame)
        bar.update(1)
    result = {"measurements": pl.concat(measured, how="diagonal"), "prefill_curve": curve, "context": context}
    n_hf = positive_int(params, "e2e.hf_pld.cases", minimum=0)
    if n_hf and choice.name in get(params, "e2e.hf_pld.models", list):
        bar.set_postfix_str(f"{choice.name} transformers PLD")
        result["hf_pld"] = [
            {"case_id": c, **hf_pld_sanity(lm, prompts[c], positive_int(params, "e2e.hf_pld.max_new_tokens"),
                                           positive_int(params, "e2e.pld.k"))}
            for c in case_ids[:n_hf]
        ]
    n_con = positive_int(params, "e2e.constrained.cases", minimum=0)
    if n_con and choice.name in get(params, "e2e.constrained.models", list):
        from analysis import corpora
        from kernels_profile.constrained import suite_tokenizer

        bar.set_postfix_str(f"{choice.name} constrained generation")
        pool = table.filter((pl.col("corpus") == get(params, "e2e.constrained.corpus", str))
                            & (pl.col("framing") == framing) & (pl.col("level") == "line"))
        ids = sorted(pool["case_id"].to_list())
        chosen = random.Random(f"{get(params, 'e2e.seed', int)}/constrained").sample(ids, min(n_con, len(ids)))
        pool = pool.filter(pl.col("case_id").is_in(chosen)).with_columns(
            instruction=pl.col("case_id").replace_strict(instructions, default="Fix the bug."))
        suite_tok = suite_tokenizer(hf_tok, choice.name)
        result["constrained"] = constrained_generation(lm, hf_tok, suite_tok, pool,
                                                       positive_int(params, "e2e.constrained.max_new_tokens"))
    return result


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


def run_e2e(params: dict[str, Any], args=None) -> dict[str, Any]:
    from tqdm import tqdm

    from analysis.fsm import ProgramFSM
    from analysis.io import save_chart, write_json, write_parquet, write_table
    from analysis.tokenization import load_tokenizer

    started = time.perf_counter()
    choices = model_choices(params)
    table = _cases_with_programs()
    instructions = _instructions(params)
    total = sum(len(set(sample_cases(table, c.sample, get(params, "e2e.framing", str), get(params, "e2e.seed", int))["case_id"])) for c in choices)
    bar = tqdm(total=total, desc="e2e", unit="case")
    results = {c.name: run_model(c, params, table, instructions, bar) for c in choices}
    bar.close()
    measurements = pl.concat([r["measurements"] for r in results.values()], how="diagonal")
    write_parquet(measurements, MEASUREMENTS)
    summary = speedup_summary(measurements)
    write_table(summary, Path("reports/tables/e2e_speedup"), digits=3)
    save_chart(e2e_chart(summary), Path("reports/figures/e2e_speedup"))
    qwen = load_tokenizer(get(params, "tokenizer.spec", str))
    programs = table.filter(pl.col("level") == "line")["program"].head(40).to_list()
    fsm = ProgramFSM(qwen, {"lines": 400}, eos_ids=(151643,))
    constrained = [dict(r, model=m) for m, res in results.items() for r in res.get("constrained", [])]
    if constrained:
        write_table(pl.DataFrame(constrained).drop("program"), Path("reports/tables/e2e_constrained"), digits=3)
    metrics = {
        "mask_cost_qwen": mask_cost(fsm, programs),
        "speedups": {f"{r['model']}/{r['corpus']}/{r['method']}": {"speedup_total": r["speedup_total"],
                     "speedup_median": r["speedup_median"], "predicted": r["predicted"]} for r in summary.iter_rows(named=True)},
        "lossless": {m: {"cases": int(r["measurements"]["lossless_ok"].is_not_null().sum() // (4 * positive_int(params, "e2e.repeats"))),
                         "ok": int(r["measurements"].group_by("case_id").agg(pl.col("lossless_ok").first())["lossless_ok"].sum()),
                         "max_rel_diff": r["measurements"]["lossless_rel_diff"].max()} for m, r in results.items()},
        "hf_pld": {m: r.get("hf_pld", []) for m, r in results.items()},
        "constrained": {"cases": len(constrained), "valid": sum(r["valid"] for r in constrained),
                        "exact_match": sum(r["exact_match"] for r in constrained),
                        "programs": [{k: r[k] for k in ("model", "case_id", "valid", "exact_match", "program")} for r in constrained]},
        "prefill_curves": {m: {"context": r["context"], **r["prefill_curve"]} for m, r in results.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_json(metrics, Path("reports/metrics/e2e.json"))
    return {k: metrics[k] for k in ("speedups", "lossless", "seconds")}


def e2e_chart(summary: pl.DataFrame):
    import altair as alt

    data = summary.to_pandas()
    base = alt.Chart(data).encode(x=alt.X("method:N", sort=list(METHODS), title=None), xOffset="model:N")
    bars = base.mark_bar().encode(y=alt.Y("speedup_total:Q", title="measured speedup over AR (x)"), color="model:N")
    pred = base.mark_tick(color="black", thickness=2, size=18).encode(y="predicted:Q")
    return (bars + pred).properties(width=220, height=200).facet(column=alt.Column("corpus:N", title=None)).properties(
        title="Measured end to end (bars) vs closed-form prediction for the same cases (ticks)")
