"""End-to-end measurement on a real KV cache, with plain arguments (the `e2e` stage orchestrates).

For one case, from the same cached prompt, with `repeats` repeats (a `MethodPlan` says which ran):
  ar                    regenerate the gold output token by token
  pld_<policy>_k<k>     prompt lookup decoding, gold acceptance ("PLD (policy) with gold acceptance"):
                        an upper bound on PLD for that match policy and draft length only
  cad_line, cad_token   Copy-as-Decode executor, line- / token-level oracle program (bound: `ideal`)
  cad_<level>_overhead  the same program, also decoding every directive token (bound: `overhead`)
plus the losslessness check (executor's final logits vs one-token steps over the same sequence) and
transformers' own generate(prompt_lookup_num_tokens=k) against plain greedy generate.

Ratios are measured as ratios (kernels_profile.measure.interleave): inside each repeat every method runs
once, back to back, in a seeded alternating order; a method's speedup is AR seconds / its seconds
within the same repeat. The prediction is kernels_profile.e2e.predict's, the report rows
kernels_profile.e2e.summary's; the prompt is kernels_profile.runtime.hf's, grammar-constrained generation
kernels_profile.decode.constrained's and the mask cost kernels_profile.decode.maskbench's.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.pooling import framing_filter
from kernels_profile.e2e.executor import MATCH_POLICIES
from kernels_profile.measure.interleave import interleaved_order

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
    from kernels_profile.e2e.executor import acceptance_histogram

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
    from kernels_profile.measure.equivalence import compare_logits

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
