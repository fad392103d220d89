"""End-to-end measurement on a real KV cache, with plain arguments (the `e2e` stage orchestrates).

For one case, from the same cached prompt, with `repeats` repeats (a `MethodPlan` says which ran):
  ar                    regenerate the gold output token by token
  pld_<policy>_k<k>     prompt lookup decoding, gold acceptance ("PLD (policy) with gold acceptance"):
                        an upper bound on PLD for that match policy and draft length only
  cad_line, cad_token   Copy-as-Decode executor, line- / token-level oracle program (bound: `ideal`)
  cad_<level>_overhead  the same program, also decoding every directive token (bound: `overhead`)
plus the losslessness check (executor's final logits vs one-token steps over the same sequence),
transformers' own generate(prompt_lookup_num_tokens=k) against plain greedy generate, and
grammar-constrained generation of programs (validity, exact match, mask cost).

Ratios are measured as ratios (kernels_profile.interleave): inside each repeat every method runs
once, back to back, in a seeded alternating order; a method's speedup is AR seconds / its seconds
within the same repeat. The summary puts measured and predicted on the same two aggregations:
ratio of totals over cases and the median of per-case speedups. `case_table` keeps one row per case
and method (with PLD's acceptance histogram); `pooled_summary` is the headline basis, the ratio of
summed times per corpus and over every case, with the case count.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.layout import framing_filter
from analysis.stats import quartiles, ratio_pairs, summarize_ratios
from kernels_profile.executor import MATCH_POLICIES
from kernels_profile.interleave import interleaved_order

BASELINE = "ar"
LEVELS = ("line", "token")
OVERHEAD_SUFFIX = "_overhead"
_PLD_NAME = re.compile(r"pld_(latest|earliest)_k(\d+)")


@dataclass(frozen=True)
class PldSettings:
    k: int
    ngram_max: int
    policy: str

    def __post_init__(self):
        if self.policy not in MATCH_POLICIES:
            raise ParamsError(f"e2e.pld: match policy must be one of {MATCH_POLICIES}, got {self.policy!r}")
        if self.k < 1 or self.ngram_max < 1:
            raise ParamsError(f"e2e.pld: k and ngram_max must be >= 1, got k={self.k}, ngram_max={self.ngram_max}")

    @property
    def method(self) -> str:
        return f"pld_{self.policy}_k{self.k}"


@dataclass(frozen=True)
class MethodPlan:
    """What one case measures besides AR: PLD oracles, and the levels whose program also runs with
    its directive tokens decoded."""

    plds: tuple[PldSettings, ...]
    overhead_levels: tuple[str, ...]

    def __post_init__(self):
        names = [p.method for p in self.plds]
        if len(set(names)) != len(names):
            raise ParamsError(f"e2e: PLD settings repeat a (policy, k): {names}")
        bad = [lv for lv in self.overhead_levels if lv not in LEVELS]
        if bad:
            raise ParamsError(f"e2e.overhead has unknown levels {bad}; known: {', '.join(LEVELS)}")

    def methods(self) -> tuple[str, ...]:
        return (BASELINE, *(p.method for p in self.plds), *(cad_method(lv, False) for lv in LEVELS),
                *(cad_method(lv, True) for lv in self.overhead_levels))


def cad_method(level: str, overhead: bool) -> str:
    return f"cad_{level}" + (OVERHEAD_SUFFIX if overhead else "")


def cad_parts(method: str) -> tuple[str, bool] | None:
    """(level, overhead) of a Copy-as-Decode method name, or None for any other method."""
    for level in LEVELS:
        for overhead in (False, True):
            if method == cad_method(level, overhead):
                return level, overhead
    return None


def method_label(method: str) -> str:
    """The name a table shows for a method."""
    if method == BASELINE:
        return "AR (teacher-forced)"
    pld = _PLD_NAME.fullmatch(method)
    if pld:
        return f"PLD ({pld.group(1)}) with gold acceptance, k={pld.group(2)}"
    cad = cad_parts(method)
    if cad:
        return f"Copy-as-Decode, {cad[0]} level" + (", directive tokens decoded" if cad[1] else "")
    raise ParamsError(f"e2e: unknown method {method!r}")


SAMPLE_STRATA = ("target_length", "none")


def sample_cases(table: pl.DataFrame, sample: tuple[tuple[str, int | None], ...], framing: str, seed: int,
                 stratify: str = "target_length") -> pl.DataFrame:
    """A seeded sample per corpus (a count of None takes every case of that corpus). `target_length`:
    the corpus's cases ordered by output length (characters, then id) are cut into `count` strata of
    near-equal size and one case is drawn from each, so a sample spans short to long edits; `none`:
    a simple random sample."""
    if stratify not in SAMPLE_STRATA:
        raise ParamsError(f"e2e.stratify must be one of {SAMPLE_STRATA}, got {stratify!r}")
    picked = []
    for corpus, count in sample:
        rows = table.filter((pl.col("corpus") == corpus) & framing_filter(framing))
        ids = sorted(set(rows["case_id"].to_list()))
        if not ids:
            raise ParamsError(f"e2e sample names corpus {corpus!r} with no cases at framing {framing!r}")
        rng = random.Random(f"{seed}/{corpus}")
        if count is None or count >= len(ids):
            chosen = ids
        elif stratify == "none":
            chosen = rng.sample(ids, count)
        else:
            lengths = rows.group_by("case_id").agg(pl.col("target").first().str.len_chars().alias("n"))
            ordered = lengths.sort("n", "case_id")["case_id"].to_list()
            chosen = [rng.choice(stratum) for stratum in _strata(ordered, count)]
        picked.append(rows.filter(pl.col("case_id").is_in(chosen)))
    return pl.concat(picked).sort("corpus", "case_id", "level")


def _strata(ordered: list, count: int) -> list[list]:
    """`ordered` cut into `count` contiguous, non-empty parts whose sizes differ by at most one."""
    size, extra = divmod(len(ordered), count)
    parts, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        parts.append(ordered[start:end])
        start = end
    return parts


def prompt_ids(hf_tok, source: str, instruction: str) -> list[int]:
    from kernels_profile.constrained import edit_messages

    messages = edit_messages(source, instruction)
    if getattr(hf_tok, "chat_template", None):
        ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    text = "\n\n".join(m["content"] for m in messages) + "\n\n"
    return hf_tok(text, add_special_tokens=False)["input_ids"]


def latency_curve(lm, grid: tuple[int, ...], ar_steps: int, contexts: tuple[int, ...], repeats: int) -> dict:
    """T_prefill(N) over `grid` and T_ar(N) for N = 1..ar_steps, on this model at each context (the
    shortest prompt and the longest prompt + output of the sample, so every op's context lies between),
    measured in the same run as the cases (medians over repeats). The e2e prediction is composed from
    these alone, never from a case's own measured AR time."""
    from kernels_profile.profiler import CacheBench

    prefill, ar = [], []
    for context in contexts:
        bench = CacheBench(lm, context, max(max(grid), ar_steps), seed=0)
        for n in grid:
            bench.prefill(n)  # warm-up
        bench.ar(min(ar_steps, 4), "eager")
        prefill += [{"n": n, "context": context, "median": float(np.median([bench.prefill(n) for _ in range(repeats)]))}
                    for n in grid]
        runs = [bench.ar(ar_steps, "eager") for _ in range(repeats)]
        ar += [{"n": n, "context": context, "median": float(np.median([r[n - 1] for r in runs]))}
               for n in sorted({1, 2, 4, 8, 16, 32, ar_steps}) if n <= ar_steps]
    return {"prefill": prefill, "ar": ar, "contexts": list(contexts)}


def curve_model(curve: dict, name: str):
    """The interpolated latency model (analysis.latency) of an e2e curve."""
    from analysis.latency import ModelKey
    from analysis.latency_fit import FitOptions, fit_points

    key = ModelKey(name, "e2e", "e2e", "cpu", "eager")
    return fit_points(pl.DataFrame(curve["ar"]), pl.DataFrame(curve["prefill"]), key, FitOptions("interp"))


def span_ops(segments) -> list:
    """The executor's segments as the bound's ops (copy: the tokens its prefill forwards)."""
    from analysis.bounds import SpanOp

    return [SpanOp(seg.kind, len(seg.ids), len(seg.ids) if seg.kind == "copy" else 0, seg.directive_tokens)
            for seg in segments]


def predicted_cost(segments, model, prompt_tokens: int):
    """The closed-form costs (analysis.bounds.case_cost) of the executor's own segments: regen, and
    program time without (ideal) and with (overhead) the directive tokens, each op costed at the
    context where it happens (prompt + output so far)."""
    from analysis.bounds import CostSettings, case_cost

    settings = CostSettings(context_mode="running", extrapolate=True)
    return case_cost(span_ops(segments), model, settings, prompt_tokens=prompt_tokens)


def predicted_speedup(segments, model, prompt_tokens: int, variant: str = "ideal") -> float:
    return predicted_cost(segments, model, prompt_tokens).bound(variant)


def method_predictions(segments: dict, model, prompt_tokens: int, plan: MethodPlan) -> list[dict]:
    """Per Copy-as-Decode method of the plan: predicted AR seconds (the bound's regen), predicted
    method seconds and their ratio, so that predictions aggregate over cases as the measurements do."""
    costs = {level: predicted_cost(segments[level], model, prompt_tokens) for level in LEVELS}
    records = []
    for method in plan.methods():
        parts = cad_parts(method)
        if parts is None:
            continue
        cost = costs[parts[0]]
        seconds = cost.program_overhead if parts[1] else cost.program_ideal
        records.append({"method": method, "predicted_ar_seconds": cost.regen, "predicted_seconds": seconds,
                        "predicted": cost.regen / seconds, "extrapolated_spans": cost.extrapolated_spans})
    return records


def method_runners(executor, gold_ids: list[int], segments: dict, plan: MethodPlan) -> dict:
    """method -> a call that runs it once from the cached prompt and returns its Run."""
    runners = {BASELINE: lambda: executor.autoregressive(gold_ids)[0]}
    for pld in plan.plds:
        runners[pld.method] = lambda pld=pld: executor.pld_oracle(gold_ids, pld.k, pld.ngram_max, pld.policy)
    for method in plan.methods():
        parts = cad_parts(method)
        if parts is not None:
            level, overhead = parts
            runners[method] = lambda level=level, overhead=overhead: executor.copy_as_decode(
                segments[level], directives=overhead)[0]
    return runners


def measure_case(executor, gold_ids: list[int], segments: dict, plan: MethodPlan, repeats: int,
                 order_seed: str) -> list[dict]:
    """Every method once per repeat, from the same cached prompt, back to back in the order
    `interleaved_order(methods, repeats, order_seed)` gives (`order_index`: position in its repeat)."""
    runners = method_runners(executor, gold_ids, segments, plan)
    draft_k = {p.method: p.k for p in plan.plds}
    records = []
    for repeat, order in enumerate(interleaved_order(plan.methods(), repeats, order_seed)):
        for index, method in enumerate(order):
            run = runners[method]()
            records.append({"method": method, "repeat": repeat, "order_index": index, "seconds": run.seconds,
                            "forwards": run.forwards, "tokens": run.tokens,
                            "accept_hist": pld_histogram(run, draft_k.get(method))})
    return records


def pld_histogram(run, k: int | None) -> list[int] | None:
    """A PLD run's acceptance length histogram (counts[n]: forwards that accepted n draft tokens,
    n = 0..k); None for any other method."""
    from kernels_profile.executor import acceptance_histogram

    if k is None:
        return None
    if len(run.accepted) != run.forwards:
        raise ValueError(f"a PLD run recorded {len(run.accepted)} acceptances for {run.forwards} forwards")
    return acceptance_histogram(run.accepted, k)


def draft_context(encode, source: str) -> list[int]:
    """What PLD drafts from: the unnumbered source text in the model's tokens (what the output copies),
    never the numbered prompt (whose `k: ` prefixes stop every draft at a line end)."""
    return list(encode(source))


def order_seed(seed: int, model: str, case_id: str) -> str:
    return f"{seed}/{model}/{case_id}"


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
    return {"vocab_size": fsm.vocab_size, "states": len(states), "cold": _microseconds(cold), "warm": _microseconds(warm),
            "apply": _microseconds(apply)}


def _microseconds(seconds: list[float]) -> dict:
    """Median and quartiles (analysis.stats.quartiles) of timings, in microseconds, and their count."""
    row = pl.DataFrame({"s": seconds}, schema={"s": pl.Float64}).select(
        quartiles("s", "median_us", "p25_us", "p75_us")).row(0, named=True)
    return {**{k: float(v * 1e6) for k, v in row.items()}, "n": len(seconds)}


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

CASE_KEYS = ("model", "corpus", "case_id")
PREDICTION_COLUMNS = ("predicted_ar_seconds", "predicted_seconds", "predicted", "extrapolated_spans")
GROUP_KEYS = ("model", "corpus", "method")


def per_pair_ratios(measurements: pl.DataFrame) -> pl.DataFrame:
    """Each method's AR seconds / method seconds within the same repeat of the same case; one case
    at a time, since cases may measure different methods (the PLD k sweep runs on some only)."""
    columns = [*CASE_KEYS, "method", "repeat", "seconds"] + (["order_index"] if "order_index" in measurements.columns else [])
    frames = [ratio_pairs(part.select(columns), BASELINE, CASE_KEYS)
              for _, part in measurements.group_by("model", "case_id", maintain_order=True)]
    return pl.concat(frames) if frames else pl.DataFrame()


def _per_case(measurements: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """Per case and method: median seconds over repeats, the median per-pair speedup, the prediction."""
    predicted = [c for c in PREDICTION_COLUMNS if c in measurements.columns]
    timed = measurements.group_by(*CASE_KEYS, "method").agg(
        pl.col("seconds").median(), pl.col("forwards").first(), *[pl.col(c).first() for c in predicted])
    ar = timed.filter(pl.col("method") == BASELINE).select(*CASE_KEYS, pl.col("seconds").alias("ar_seconds"))
    speedup = pairs.group_by(*CASE_KEYS, "method").agg(speedup=pl.col("ratio").median())
    joined = timed.join(ar, on=list(CASE_KEYS)).join(speedup, on=[*CASE_KEYS, "method"], how="left")
    joined = joined.with_columns(speedup=pl.when(pl.col("method") == BASELINE).then(1.0).otherwise(pl.col("speedup")))
    for column in PREDICTION_COLUMNS:
        if column not in joined.columns:
            joined = joined.with_columns(pl.lit(None, dtype=pl.Float64).alias(column))
    return joined


def speedup_summary(measurements: pl.DataFrame) -> pl.DataFrame:
    """Per model, corpus and method: the speedup over AR measured and predicted on the same two
    aggregations over cases, the per-pair ratios' spread, and the gap between them.

    speedup_total     sum of AR seconds / sum of method seconds (each case: median over repeats)
    speedup_median    median over cases of the per-case speedup (the median of its per-pair ratios);
                      speedup_q25 / speedup_q75 its quartiles over cases
    pair_ratio_*      median, quartiles, IQR, count of every per-pair ratio (cases x repeats)
    predicted_total   sum of predicted AR seconds / sum of predicted method seconds (analysis.bounds)
    predicted_median  median over cases of the per-case predicted speedup
    extrapolated_spans  ops of these cases whose predicted cost lies outside the measured curve
    predicted         = predicted_total: the prediction on speedup_total's basis
    gap_total, gap_median   measured / predicted - 1 on each basis
    """
    pairs = per_pair_ratios(measurements)
    per_case = _per_case(measurements, pairs)
    summary = per_case.group_by(*GROUP_KEYS).agg(
        # positional only: polars puts positional aggregations before keyword ones, so the column
        # order is the order written here
        pl.len().alias("cases"), pl.col("seconds").sum().alias("total_seconds"),
        (pl.col("ar_seconds").sum() / pl.col("seconds").sum()).alias("speedup_total"),
        *quartiles("speedup", "speedup_median", "speedup_q25", "speedup_q75"),
        pl.col("forwards").sum(),
        (pl.col("predicted_ar_seconds").sum() / pl.col("predicted_seconds").sum()).alias("predicted_total"),
        pl.col("predicted").median().alias("predicted_median"),
        pl.col("predicted").is_not_null().sum().alias("predicted_cases"),
        extrapolated_spans=pl.col("extrapolated_spans").sum(),
    )
    # a method without a prediction sums nothing: null, not 0/0
    summary = summary.with_columns(
        predicted_total=pl.when(pl.col("predicted_cases") > 0).then(pl.col("predicted_total")).otherwise(None),
        extrapolated_spans=pl.when(pl.col("predicted_cases") > 0).then(pl.col("extrapolated_spans")).otherwise(None),
    ).drop("predicted_cases")
    spread = summarize_ratios(pairs, ("model", "corpus")).select(
        "model", "corpus", "method", *[pl.col(f"ratio_{s}").alias(f"pair_ratio_{s}")
                                       for s in ("median", "q25", "q75", "iqr")], pl.col("pairs"))
    return (
        summary.join(spread, on=list(GROUP_KEYS), how="left")
        .with_columns(
            label=pl.col("method").map_elements(method_label, return_dtype=pl.String),
            predicted=pl.col("predicted_total"),
            gap_total=pl.col("speedup_total") / pl.col("predicted_total") - 1,
            gap_median=pl.col("speedup_median") / pl.col("predicted_median") - 1,
        )
        .select(*GROUP_KEYS, "label", "cases", "speedup_total", "predicted_total", "gap_total",
                "speedup_median", "predicted_median", "gap_median", "speedup_q25", "speedup_q75",
                "pair_ratio_median", "pair_ratio_q25", "pair_ratio_q75", "pair_ratio_iqr", "pairs",
                "predicted", "extrapolated_spans", "forwards", "total_seconds")
        .sort(*GROUP_KEYS)
    )


# ---------------------------------------------------------------- per case and pooled (the headline basis)

POOL_ALL = "pooled"  # the pool of every measured case of a model (analysis.layout.POOLED)


def _hist_text(hist) -> str | None:
    """An acceptance histogram as `n:count` pairs for the non-zero counts (`0:3 4:1 10:7`)."""
    if hist is None:
        return None
    return " ".join(f"{n}:{c}" for n, c in enumerate(hist) if c)


def case_table(measurements: pl.DataFrame) -> pl.DataFrame:
    """One row per case and method: the case's output tokens, AR seconds and the method's seconds
    (medians over repeats), its median per-pair speedup, forwards, tokens per forward and (PLD) the
    acceptance histogram of draft tokens per forward (`n:count`; gold acceptance is deterministic, so
    every repeat has the same one)."""
    pairs = per_pair_ratios(measurements)
    per_case = _per_case(measurements, pairs)
    extra = [c for c in ("gold_tokens", "tokens") if c in measurements.columns]
    first = measurements.sort("repeat").group_by(*CASE_KEYS, "method").agg(
        *[pl.col(c).first() for c in extra],
        *([pl.col("accept_hist").first()] if "accept_hist" in measurements.columns else []))
    out = per_case.select(*CASE_KEYS, "method", "ar_seconds", "seconds", "speedup", "forwards").join(
        first, on=[*CASE_KEYS, "method"], how="left")
    for column in ("gold_tokens", "tokens"):
        if column not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Int64).alias(column))
    hist = (out["accept_hist"].to_list() if "accept_hist" in out.columns else [None] * out.height)
    return (out.with_columns(
                label=pl.col("method").map_elements(method_label, return_dtype=pl.String),
                tokens_per_forward=pl.col("tokens") / pl.col("forwards"),
                accept_hist=pl.Series([_hist_text(h) for h in hist], dtype=pl.String))
            .select(*CASE_KEYS, "method", "label", "gold_tokens", "ar_seconds", "seconds", "speedup", "tokens",
                    "forwards", "tokens_per_forward", "accept_hist")
            .sort(*CASE_KEYS, "method"))


def pooled_summary(cases: pl.DataFrame) -> pl.DataFrame:
    """The headline basis: per model, method and pool (each corpus, and `pooled` over every measured
    case of the model), the ratio of summed times, sum of AR seconds / sum of method seconds over the
    cases that measured the method, with their count; never a best case."""
    keys = ["model", "method", "label"]
    aggregations = [pl.len().alias("cases"), pl.col("ar_seconds").sum(), pl.col("seconds").sum(),
                    pl.col("tokens").sum(), pl.col("forwards").sum()]
    by_corpus = cases.group_by(*keys, "corpus").agg(*aggregations)
    overall = cases.group_by(*keys).agg(*aggregations).with_columns(corpus=pl.lit(POOL_ALL))
    frame = pl.concat([by_corpus, overall.select(by_corpus.columns)])
    return (frame.with_columns(speedup_pooled=pl.col("ar_seconds") / pl.col("seconds"),
                               tokens_per_forward=pl.col("tokens") / pl.col("forwards"))
            .rename({"corpus": "pool"})
            .select("model", "pool", "method", "label", "cases", "ar_seconds", "seconds", "speedup_pooled",
                    "tokens", "forwards", "tokens_per_forward")
            .sort("model", pl.col("pool") == POOL_ALL, "pool", "method"))
