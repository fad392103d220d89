"""Per-step cost of grammar masks: this suite's FSM tables beside llguidance, on the same grammar.

For each vocabulary (Qwen2.5, SmolLM2) the same token sequences (rendered line-level programs,
tokenized as program text) are walked twice: the first pass starts from empty caches (cold: what a
fresh decoder pays, first visits of states included), the second pass finds every mask cached (warm).
Timed per step: computing the next-token mask (ours: `MaskTable.bias`, the decoder's own call;
llguidance: `fill_next_token_bitmask` into its bitmask) and applying it to one float32 logits row
(ours: one add of the cached 0/-inf row, with masked_fill of the cached boolean tensor beside it; llguidance: `apply_token_bitmask_inplace` with
its bit-packed mask). Advancing (walker / consume_token) is timed apart from the mask.

The grammar given to llguidance (`lark_grammar`) is the program language of analysis.grammar.program: ops
back to back, `<copy lines="i-j"/>`, `<gen>BODY</gen>` with the canonical escapes, written with
llguidance's regex intersection and negation. The line-range constraint 1 <= i <= j <= n is regular
for a fixed n, so llguidance can take it: `range_mode="full"` spells it as one alternation over i
with a numeric-range regex for j in [i, n]; "bounded" keeps only i, j <= n; "none" drops it (any
positive numbers), the grammar that does not depend on the source. llguidance is a declared dependency
(pyproject.toml); where it is missing all the same (an environment installed without dependencies), the
benchmark still reports this suite's side and says why llguidance's is absent (LLGUIDANCE_MISSING).

The forced-span side ("llguidance (forced spans)", `forced_side`) is the decoder's llguidance engine
(kernels_profile.decode.llg_engine): each program's own source gets its forced-span grammar
(analysis.grammar.export), and the program's stream (directives followed by the copied text) is walked
along the decoder's layout, timing the mask of every token the model writes (analysis.grammar.llg.
StepMasks) and, per copy span, `compute_ff_tokens()`; beside it, this suite's per-span cost is tokenizing
the copied text (what the suite engine feeds after a directive).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.errors import ParamsError, ProgramError
from analysis.grammar.program import (COPY_END, COPY_TAGS, GEN_CLOSE, GEN_OPEN, RANGE_SEP, Copy, Program, parse,
                                      render_op)
from analysis.grammar.export import export
from analysis.grammar.llg import StepMasks, compile_grammar, ll_tokenizer, suite_pieces
from analysis.grammar.resolver import resolve
from analysis.layout import PROGRAMS
from analysis.parallel.tables import joined_programs
from analysis.pipeline.io import read_parquet
from kernels_profile.decode.decoder import apply_mask
from kernels_profile.decode.masks import MaskTables
from kernels_profile.runtime.hf import ModelTokenizer
from kernels_profile.runtime.loading import threads
from kernels_profile.runtime.models import ModelError, eos_ids, load_hf_tokenizer, published_config

RANGE_MODES = ("full", "bounded", "none")
LLGUIDANCE_MISSING = "llguidance is not installed (pip install llguidance); only this suite's masks were timed"


# ---------------------------------------------------------------- the grammar for llguidance

def _same_length(a: str, b: str) -> str:
    """A regex for the digit strings of length len(a) between a and b (inclusive), a <= b."""
    if a == b:
        return a
    if len(a) == 1:
        return f"[{a}-{b}]"
    if a[0] == b[0]:
        return a[0] + "(" + _same_length(a[1:], b[1:]) + ")"
    rest = len(a) - 1
    parts = [a[0] + "(" + _same_length(a[1:], "9" * rest) + ")"]
    if int(b[0]) - int(a[0]) > 1:
        parts.append(f"[{int(a[0]) + 1}-{int(b[0]) - 1}][0-9]{{{rest}}}")
    parts.append(b[0] + "(" + _same_length("0" * rest, b[1:]) + ")")
    return "|".join(parts)


def range_regex(lo: int, hi: int) -> str:
    """A regex matching exactly the decimal numbers (no leading zeros) in [lo, hi], lo >= 1."""
    if not 1 <= lo <= hi:
        raise ParamsError(f"range_regex needs 1 <= lo <= hi, got {lo}, {hi}")
    parts = []
    for length in range(len(str(lo)), len(str(hi)) + 1):
        a, b = max(lo, 10 ** (length - 1)), min(hi, 10 ** length - 1)
        parts.append("(" + _same_length(str(a), str(b)) + ")")
    return "|".join(parts)


def _lit(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _rx(text: str) -> str:
    return text.replace("/", "\\/")


def lark_grammar(n_lines: int, range_mode: str = "full") -> str:
    """The line-level program grammar in llguidance's Lark dialect (see the module docstring)."""
    if range_mode not in RANGE_MODES:
        raise ParamsError(f"maskbench range_mode must be one of {', '.join(RANGE_MODES)}, got {range_mode!r}")
    if n_lines < 1:
        raise ParamsError(f"maskbench needs a source of at least one line, got n_lines={n_lines}")
    sep = _rx(RANGE_SEP)
    if range_mode == "full":
        span = "|".join(f"{i}{sep}({range_regex(i, n_lines)})" for i in range(1, n_lines + 1))
    else:
        number = range_regex(1, n_lines) if range_mode == "bounded" else "[1-9][0-9]*"
        span = f"({number}){sep}({number})"
    close = _rx(GEN_CLOSE)
    any_ = r"(.|\n)"
    # a body (with its closing tag) holds no raw tag start before the close, and only canonical escapes
    bad_lt = r"&lt;([^cg\/]|c[^o]|co[^p]|cop[^y]|g[^e]|ge[^n]|\/[^g]|\/g[^e]|\/ge[^n])"
    bad_amp = r"&amp;([^la]|l[^t]|lt[^;]|a[^m]|am[^p]|amp[^;])"
    body = (f"/{any_}+{close}/ & ~/{any_}*(<copy|<gen|<\\/gen){any_}*{close}/"
            f" & ~/{any_}*{bad_lt}{any_}*/ & ~/{any_}*{bad_amp}{any_}*/")
    return "\n".join([
        "start: op*",
        "op: cp | gn",
        f"cp: {_lit(COPY_TAGS['lines'])} SPAN {_lit(COPY_END)}",
        f"gn: {_lit(GEN_OPEN)} BODY",
        f"SPAN: /{span}/",
        f"BODY: {body}",
    ]) + "\n"


# ---------------------------------------------------------------- timing

def quantiles_us(seconds: Sequence[float]) -> dict:
    xs = np.asarray(seconds, dtype=float) * 1e6
    if not len(xs):
        return {"p50_us": None, "p99_us": None, "n": 0}
    return {"p50_us": float(np.percentile(xs, 50)), "p99_us": float(np.percentile(xs, 99)), "n": len(xs)}


@dataclass(frozen=True)
class Vocabulary:
    """One model's vocabulary as both sides need it."""

    name: str
    suite_tokenizer: object     # analysis.text.tokens.Tokenizer
    tokenizer_json: str         # the tokenizers JSON llguidance reads
    eos_ids: tuple[int, ...]
    width: int                  # logits row width (embedding rows)


def ours(vocab: Vocabulary, sequences: list[list[int]], n_lines: int) -> tuple[dict, object]:
    build = time.perf_counter()
    table = MaskTables(vocab.suite_tokenizer, vocab.eos_ids, vocab.width).table({"lines": n_lines})
    fsm = table.fsm
    build = time.perf_counter() - build
    passes, advance, first = [], [], []
    for _ in range(2):
        times = []
        for ids in sequences:
            walker = fsm.walker()
            for token in ids + [vocab.eos_ids[0]]:
                before = table.computed
                t0 = time.perf_counter()
                table.bias(walker)
                times.append(time.perf_counter() - t0)
                if table.computed > before:
                    first.append(times[-1])
                t0 = time.perf_counter()
                walker.advance(token)
                advance.append(time.perf_counter() - t0)
        passes.append(times)
    return {"build_s": build, "cold": quantiles_us(passes[0]), "warm": quantiles_us(passes[1]),
            "first_visit": quantiles_us(first), "advance": quantiles_us(advance),
            "states": len(table.cached())}, table


def copied(op, source: str) -> str | None:
    """The text a copy op copies (None for a gen op)."""
    return resolve(Program((op,)), source) if isinstance(op, Copy) else None


def span_texts(cases: Sequence[tuple[str, str]]) -> list[str]:
    """The copied text of every copy of the (program, source) cases."""
    return [copied(c, source) for program, source in cases for c in parse(program).copies]


def suite_span_costs(vocab: Vocabulary, cases: Sequence[tuple[str, str]]) -> dict:
    """This suite's per-span cost: tokenizing the copied text on its own (the suite engine's copy)."""
    times = []
    for text in span_texts(cases):
        t0 = time.perf_counter()
        vocab.suite_tokenizer.encode_program(text)
        times.append(time.perf_counter() - t0)
    return quantiles_us(times)


def forced_side(vocab: Vocabulary, cases: Sequence[tuple[str, str]]) -> dict:
    """llguidance under each case's forced-span grammar, walked twice (cold: a fresh matcher; warm: the
    same matcher reset); per step the mask, per copy `compute_ff_tokens()` (module docstring)."""
    lltok = ll_tokenizer(vocab.suite_tokenizer, vocab.eos_ids, n_vocab=vocab.width)
    steps = StepMasks(suite_pieces(vocab.suite_tokenizer, vocab.eos_ids, vocab.width), vocab.width)
    bitmask = steps.allocate()
    encode = vocab.suite_tokenizer.encode_program
    builds, passes, ff, unequal = [], [[], []], [], 0
    for program, source in cases:
        compiled = compile_grammar(lltok, export(source, "lark", forced=True))
        builds.append(compiled.seconds)
        layout = [(list(encode(render_op(op)).ids),
                   list(vocab.suite_tokenizer.encode(text).ids) if (text := copied(op, source)) else None)
                  for op in parse(program).ops]
        for k in range(2):
            matcher = compiled.matcher
            matcher.reset()
            for written, copied_ids in layout:
                for token in written:
                    t0 = time.perf_counter()
                    steps.fill(matcher, bitmask)
                    passes[k].append(time.perf_counter() - t0)
                    matcher.consume_token(token)
                if copied_ids is not None:
                    t0 = time.perf_counter()
                    forced = matcher.compute_ff_tokens()
                    if k == 0:
                        ff.append(time.perf_counter() - t0)
                        unequal += forced != copied_ids
                    matcher.consume_tokens(copied_ids)
            t0 = time.perf_counter()
            steps.fill(matcher, bitmask)  # the step that writes EOS
            passes[k].append(time.perf_counter() - t0)
    return {"build_s": float(np.median(builds)) if builds else None, "cases": len(cases),
            "cold": quantiles_us(passes[0]), "warm": quantiles_us(passes[1]), "ff": quantiles_us(ff),
            "ff_unequal_spans": unequal, "statistic": "build_s: median matcher construction per source"}


def apply_costs(width: int, masks: list[tuple], bitmask, repeats: int, thread_count: int | None) -> dict:
    """Applying a cached mask to one float32 logits row, the three ways interleaved per repeat (so a
    busy machine slows them alike): our additive row, our boolean tensor via masked_fill_, and
    llguidance's bit-packed mask (when given), with `thread_count` torch threads (params
    decode.mask_benchmark.threads; None: the count in force)."""
    with threads(thread_count):
        return _apply_costs(width, masks, bitmask, repeats)


def _apply_costs(width: int, masks: list[tuple], bitmask, repeats: int) -> dict:
    import torch

    row = torch.randn(1, width, generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {"ours": [], "ours_masked_fill": [], "llguidance": []}
    if bitmask is not None:
        from llguidance.torch import apply_token_bitmask_inplace
    for k in range(repeats):
        mask, bias = masks[k % len(masks)]
        for name, spent in times.items():
            if name == "llguidance" and bitmask is None:
                continue
            logits = row[0].clone() if name != "llguidance" else row.clone()
            t0 = time.perf_counter()
            if name == "ours":
                apply_mask(logits, bias)
            elif name == "ours_masked_fill":
                logits.masked_fill_(~mask, float("-inf"))
            else:
                apply_token_bitmask_inplace(logits, bitmask)
            spent.append(time.perf_counter() - t0)
    return {name: quantiles_us(xs) for name, xs in times.items() if xs}


def llguidance_side(vocab: Vocabulary, sequences: list[list[int]], n_lines: int, range_mode: str) -> tuple[dict, object]:
    import llguidance
    from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

    t0 = time.perf_counter()
    tokenizer = llguidance.LLTokenizer(vocab.tokenizer_json, eos_token=vocab.eos_ids[0])
    grammar = llguidance.LLMatcher.grammar_from_lark(lark_grammar(n_lines, range_mode))
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
    build = time.perf_counter() - t0
    if matcher.is_error():
        raise ParamsError(f"llguidance refused the grammar ({range_mode}, n={n_lines}): {matcher.get_error()}")
    bitmask = allocate_token_bitmask(1, tokenizer.vocab_size)
    passes, advance, rejected = [], [], 0
    for _ in range(2):
        times = []
        for ids in sequences:
            matcher.reset()
            for token in ids + [vocab.eos_ids[0]]:
                t0 = time.perf_counter()
                fill_next_token_bitmask(matcher, bitmask)
                times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                ok = matcher.consume_token(token)
                advance.append(time.perf_counter() - t0)
                if not ok or matcher.is_error():
                    rejected += 1
                    break
        passes.append(times)
    return {"build_s": build, "cold": quantiles_us(passes[0]), "warm": quantiles_us(passes[1]),
            "advance": quantiles_us(advance), "rejected_sequences": rejected, "range_mode": range_mode}, bitmask


def fits(program: str, n_lines: int) -> bool:
    """Does a line-level program parse with every copy within 1..n_lines?"""
    try:
        copies = parse(program).copies
    except ProgramError:
        return False
    return all(c.unit == "lines" and 1 <= c.start <= c.end <= n_lines for c in copies)


def llguidance_available() -> bool:
    return importlib.util.find_spec("llguidance") is not None


def program_sequences(vocab: Vocabulary, programs: list[str], n_lines: int) -> list[list[int]]:
    """The programs as token sequences; each must fit `n_lines` (its copies within 1..n_lines)."""
    too_long = [k for k, p in enumerate(programs) if not fits(p, n_lines)]
    if too_long:
        raise ParamsError(f"maskbench: programs {too_long[:5]} copy past line {n_lines} (or do not parse)")
    return [list(vocab.suite_tokenizer.encode_program(p).ids) for p in programs]


def benchmark(vocab: Vocabulary, programs: list[str], n_lines: int, range_modes: Sequence[str],
              apply_repeats: int, threads: int, cases: Sequence[tuple[str, str]] = ()) -> dict:
    """Both sides on one vocabulary; `programs` must fit `n_lines` (their copies within 1..n_lines);
    `cases` (program, source) also get the forced-span side and the per-span costs."""
    sequences = program_sequences(vocab, programs, n_lines)
    result = {"vocabulary": vocab.name, "vocab_size": vocab.suite_tokenizer.vocab_size, "n_lines": n_lines,
              "programs": len(programs), "steps_per_pass": sum(len(s) + 1 for s in sequences),
              "llguidance": {}}
    result["ours"], table = ours(vocab, sequences, n_lines)
    if cases:
        result["ours"]["span"] = suite_span_costs(vocab, cases)
    bitmask = None
    if llguidance_available():
        for mode in range_modes:
            result["llguidance"][mode], bitmask = llguidance_side(vocab, sequences, n_lines, mode)
        if cases:
            result["llguidance_forced"] = forced_side(vocab, cases)
    else:
        result["llguidance_note"] = LLGUIDANCE_MISSING
    result["apply"] = apply_costs(vocab.width, table.cached(), bitmask, apply_repeats, threads)
    return result


STATISTIC = "p50 and p99 microseconds per decoding step (kernels_profile.decode.maskbench)"


def suite_costs(vocab: Vocabulary, programs: list[str], n_lines: int, apply_repeats: int,
                threads: int | None) -> dict:
    """This suite's side alone on one vocabulary (the e2e stage's mask cost), in the benchmark's own
    statistic: mask steps of the first pass (cold), of the steps that computed a mask (first_visit), of
    the second pass (warm) and of advancing the walker; applying a cached additive mask row (apply)."""
    side, table = ours(vocab, program_sequences(vocab, programs, n_lines), n_lines)
    apply = apply_costs(vocab.width, table.cached(), None, apply_repeats, threads)
    return {"statistic": STATISTIC, "vocabulary": vocab.name, "vocab_size": vocab.suite_tokenizer.vocab_size,
            "n_lines": n_lines, "programs": len(programs), "states": side["states"],
            **{phase: side[phase] for phase in ("cold", "first_visit", "warm", "advance")}, "apply": apply["ours"]}


def vocabulary(model: str) -> Vocabulary:
    """The vocabulary of a registry model (its tokenizer and EOS ids)."""
    hf = load_hf_tokenizer(model)
    tok = ModelTokenizer.from_hf(hf, eos_ids(model, hf), model)
    suite = tok.fsm_tokenizer
    try:
        width = int(published_config(model).get("vocab_size", suite.vocab_size))
    except ModelError:  # a model without a published config (SmolLM2 reads its GGUF): the tokenizer's size
        width = suite.vocab_size
    return Vocabulary(model, suite, suite.backend.to_str(), tok.eos_ids, max(width, suite.vocab_size))


def summary_rows(results: list[dict]) -> list[dict]:
    """One row per (vocabulary, side): p50/p99 of mask steps, cold and warm, and of applying a mask."""
    rows = []
    for r in results:
        sides = [("ours", r["ours"], r["apply"]["ours"], r["ours"].get("span"))]
        sides += [(f"llguidance ({m})", v, r["apply"].get("llguidance"), None) for m, v in r["llguidance"].items()]
        if "llguidance_forced" in r:
            forced = r["llguidance_forced"]
            sides.append((FORCED_SIDE, forced, r["apply"].get("llguidance"), forced["ff"]))
        for side, v, apply, span in sides:
            rows.append({"vocabulary": r["vocabulary"], "side": side,
                         **{f"{phase}_{q}": v[phase][q] for phase in ("cold", "warm") for q in ("p50_us", "p99_us")},
                         "apply_p50_us": apply["p50_us"] if apply else None,
                         "apply_p99_us": apply["p99_us"] if apply else None,
                         "span_p50_us": span["p50_us"] if span else None,
                         "span_p99_us": span["p99_us"] if span else None, "build_s": v["build_s"]})
    return rows


# per span: ours tokenizes the copied text (the suite engine's copy), llguidance computes its ff tokens
FORCED_SIDE = "llguidance (forced spans)"


def line_programs(limit: int, n_lines: int) -> list[str]:
    """The first `limit` line-level oracle programs (by case) whose copies fit 1..n_lines."""
    import polars as pl

    table = read_parquet(PROGRAMS, "copydecode programs").filter(pl.col("level") == "line").sort("case_id", "framing")
    return [p for p in table["program"].to_list() if fits(p, n_lines)][:limit]


def line_cases(limit: int, n_lines: int) -> list[tuple[str, str]]:
    """(program, source) of the first `limit` line-level oracle programs whose copies fit 1..n_lines
    (the same programs as `line_programs`), for the forced-span side."""
    import polars as pl

    table = joined_programs().filter(pl.col("level") == "line").sort("case_id", "framing")
    rows = [(p, s) for p, s in zip(table["program"].to_list(), table["source"].to_list()) if fits(p, n_lines)]
    return rows[:limit]


BENCH_RANGE_MODES = ("full", "none")  # the benchmark's: llguidance's grammar with its line-range regex, and without (a lower bound)


def run_models(models: Sequence[str], programs: list[str], n_lines: int, apply_repeats: int, threads: int,
               range_modes: Sequence[str] = BENCH_RANGE_MODES, cases: Sequence[tuple[str, str]] = ()) -> list[dict]:
    return [benchmark(vocabulary(m), programs, n_lines, range_modes, apply_repeats, threads, cases) for m in models]
