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
positive numbers), the grammar that does not depend on the source. llguidance is optional: without
it the benchmark reports this suite's side and says why llguidance is missing.

Given each program's source, a third llguidance side ("llguidance (forced)") walks the same programs
under their sources' forced-span grammars (analysis.grammar.export, the grammar of the decoder's
llguidance engine) in the decoder's layout: the program's tokens, each copy's tokens right after its
directive. Its masks are timed at the program's tokens only (the copied ones are never decoded), and
each copy's cost is `compute_ff_tokens` plus consuming them (the engine's copy preparation), beside
ours: tokenizing the copied text (the suite decoder's, `span` in the summary).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.errors import ParamsError
from analysis.grammar.export import RANGE_MODES

LLGUIDANCE_MISSING = "llguidance is not installed (pip install llguidance); only this suite's masks were timed"
FORCED_SIDE = "llguidance (forced)"


def lark_grammar(n_lines: int, range_mode: str = "full") -> str:
    """The symbolic program grammar llguidance gets (analysis.grammar.export.symbolic_lark), with the
    benchmark's error type for a bad range mode."""
    from analysis.errors import GrammarError
    from analysis.grammar.export import symbolic_lark

    try:
        return symbolic_lark(n_lines, range_mode)
    except GrammarError as exc:
        raise ParamsError(f"maskbench: {exc}") from None


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
    from analysis.grammar.fsm import ProgramFSM
    from kernels_profile.decode.decoder import MaskTable

    build = time.perf_counter()
    fsm = ProgramFSM(vocab.suite_tokenizer, {"lines": n_lines}, eos_ids=vocab.eos_ids)
    table = MaskTable(fsm, vocab.width)
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


def apply_costs(width: int, masks: list[tuple], bitmask, repeats: int, thread_count: int | None) -> dict:
    """Applying a cached mask to one float32 logits row, the three ways interleaved per repeat (so a
    busy machine slows them alike): our additive row, our boolean tensor via masked_fill_, and
    llguidance's bit-packed mask (when given), with `thread_count` torch threads (params
    decode.mask_benchmark.threads; None: the count in force)."""
    from kernels_profile.runtime.loading import threads

    with threads(thread_count):
        return _apply_costs(width, masks, bitmask, repeats)


def _apply_costs(width: int, masks: list[tuple], bitmask, repeats: int) -> dict:
    import torch

    from kernels_profile.decode.decoder import apply_mask

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


def _layout(vocab: Vocabulary, program: str, source: str) -> list[tuple[list[int], list[int], str]]:
    """Per op: its own tokens, the copied text's tokens (empty for a gen) and the copied text."""
    from analysis.grammar.program import Copy, Program, parse, render_op
    from analysis.grammar.resolver import resolve

    tok = vocab.suite_tokenizer
    out = []
    for op in parse(program).ops:
        copied = resolve(Program((op,)), source) if isinstance(op, Copy) else ""
        out.append((list(tok.encode_program(render_op(op)).ids), list(tok.encode_program(copied).ids) if copied else [],
                    copied))
    return out


def span_costs(vocab: Vocabulary, programs: list[str], sources: list[str]) -> dict:
    """Ours: tokenizing each copied text (the suite decoder's copy preparation), microseconds."""
    tok = vocab.suite_tokenizer
    times = []
    for program, source in zip(programs, sources):
        for _, _, copied in _layout(vocab, program, source):
            if copied:
                t0 = time.perf_counter()
                tok.encode_program(copied)
                times.append(time.perf_counter() - t0)
    return quantiles_us(times)


def llguidance_forced_side(vocab: Vocabulary, programs: list[str], sources: list[str]) -> dict:
    """llguidance over each program's forced-span grammar (module docstring): two passes like the other
    sides, masks at program tokens, each copy's ff call and commit timed."""
    import llguidance

    from analysis.grammar.export import export
    from analysis.grammar.llg import MaskBuffer, compile_matcher, consume

    tokenizer = llguidance.LLTokenizer(vocab.tokenizer_json, eos_token=list(vocab.eos_ids))
    buffer = MaskBuffer(tokenizer.vocab_size)
    compiled = [compile_matcher(tokenizer, export(src, "lark", forced=True).text, f"maskbench program {k}")
                for k, src in enumerate(sources)]
    layouts = [_layout(vocab, p, src) for p, src in zip(programs, sources)]
    passes, spans, ff_equal, ff_total = [], [], 0, 0
    for number in range(2):
        times = []
        for c, layout in zip(compiled, layouts):
            matcher = c.matcher
            matcher.reset()
            for own, copied, _ in layout:
                for token in own:
                    t0 = time.perf_counter()
                    buffer.fill(matcher)
                    times.append(time.perf_counter() - t0)
                    consume(matcher, [token], "a program token")
                if copied:
                    t0 = time.perf_counter()
                    ff = matcher.compute_ff_tokens()
                    consume(matcher, ff, "its fast-forward tokens")
                    spans.append(time.perf_counter() - t0)
                    ff_equal += number == 0 and ff == copied
                    ff_total += number == 0
                    rest = matcher.compute_ff_bytes()  # what llguidance held back of the copy, if anything
                    if rest:
                        consume(matcher, tokenizer.tokenize_bytes(rest), "the rest of the copied text")
            t0 = time.perf_counter()
            buffer.fill(matcher)
            times.append(time.perf_counter() - t0)
        passes.append(times)
    compile_s = [c.seconds for c in compiled]
    return {"build_s": float(np.median(compile_s)), "compile": quantiles_us(compile_s),
            "cold": quantiles_us(passes[0]), "warm": quantiles_us(passes[1]), "span": quantiles_us(spans),
            "ff_equal": ff_equal, "copy_spans": ff_total}


def fits(program: str, n_lines: int) -> bool:
    """Does a line-level program parse with every copy within 1..n_lines?"""
    from analysis.errors import ProgramError
    from analysis.grammar.program import parse

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
              apply_repeats: int, threads: int, sources: list[str] | None = None) -> dict:
    """Both sides on one vocabulary; `programs` must fit `n_lines` (their copies within 1..n_lines).
    With `sources` (each program's source), the forced-span side and the per-copy costs too."""
    sequences = program_sequences(vocab, programs, n_lines)
    result = {"vocabulary": vocab.name, "vocab_size": vocab.suite_tokenizer.vocab_size, "n_lines": n_lines,
              "programs": len(programs), "steps_per_pass": sum(len(s) + 1 for s in sequences),
              "llguidance": {}}
    result["ours"], table = ours(vocab, sequences, n_lines)
    bitmask = None
    if sources is not None:
        if len(sources) != len(programs):
            raise ParamsError(f"maskbench: {len(programs)} programs but {len(sources)} sources")
        result["ours"]["span"] = span_costs(vocab, programs, sources)
    if llguidance_available():
        for mode in range_modes:
            result["llguidance"][mode], bitmask = llguidance_side(vocab, sequences, n_lines, mode)
        if sources is not None:
            result["llguidance_forced"] = llguidance_forced_side(vocab, programs, sources)
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
    from kernels_profile.runtime.models import (
        ModelError,
        eos_ids,
        load_hf_tokenizer,
        published_config,
    )
    from kernels_profile.runtime.hf import ModelTokenizer

    hf = load_hf_tokenizer(model)
    tok = ModelTokenizer.from_hf(hf, eos_ids(model, hf), model)
    suite = tok.fsm_tokenizer
    try:
        width = int(published_config(model).get("vocab_size", suite.vocab_size))
    except ModelError:  # a model without a published config (SmolLM2 reads its GGUF): the tokenizer's size
        width = suite.vocab_size
    return Vocabulary(model, suite, suite.backend.to_str(), tok.eos_ids, max(width, suite.vocab_size))


def summary_rows(results: list[dict]) -> list[dict]:
    """One row per (vocabulary, side): p50/p99 of mask steps, cold and warm, of applying a mask and, where
    the sources were given, of preparing a copy's tokens (span: ours tokenizes the copied text, the
    forced side computes and commits its fast-forward tokens). build_s: the grammar's build; for the
    forced side, one source's compile, p50 over the programs."""
    rows = []
    for r in results:
        sides = [("ours", r["ours"], r["apply"]["ours"])]
        sides += [(f"llguidance ({m})", v, r["apply"].get("llguidance")) for m, v in r["llguidance"].items()]
        if "llguidance_forced" in r:
            sides.append((FORCED_SIDE, r["llguidance_forced"], r["apply"].get("llguidance")))
        for side, v, apply in sides:
            span = v.get("span")
            rows.append({"vocabulary": r["vocabulary"], "side": side,
                         **{f"{phase}_{q}": v[phase][q] for phase in ("cold", "warm") for q in ("p50_us", "p99_us")},
                         "apply_p50_us": apply["p50_us"] if apply else None,
                         "apply_p99_us": apply["p99_us"] if apply else None,
                         "span_p50_us": span["p50_us"] if span else None,
                         "span_p99_us": span["p99_us"] if span else None, "build_s": v["build_s"]})
    return rows


def line_programs(limit: int, n_lines: int) -> list[str]:
    """The first `limit` line-level oracle programs (by case) whose copies fit 1..n_lines."""
    return [program for program, _ in line_program_sources(limit, n_lines)]


def line_program_sources(limit: int, n_lines: int) -> list[tuple[str, str]]:
    """`line_programs` with each program's source: (program, source)."""
    import polars as pl

    from analysis.corpora.cases import read_cases
    from analysis.layout import CASES, PROGRAMS
    from analysis.pipeline.io import read_parquet

    table = read_parquet(PROGRAMS, "copydecode programs").filter(pl.col("level") == "line").sort("case_id", "framing")
    table = table.join(read_cases(CASES).select("case_id", "framing", "source"), on=["case_id", "framing"], how="left")
    pairs = [(p, src) for p, src in zip(table["program"].to_list(), table["source"].to_list()) if fits(p, n_lines)]
    missing = [p for p, src in pairs[:limit] if src is None]
    if missing:
        raise ParamsError(f"maskbench: {len(missing)} programs name cases missing from {CASES}; rerun `copydecode programs`")
    return pairs[:limit]


BENCH_RANGE_MODES = ("full", "none")  # the benchmark's: llguidance's grammar with its line-range regex, and without (a lower bound)


def run_models(models: Sequence[str], programs: list[str], n_lines: int, apply_repeats: int, threads: int,
               range_modes: Sequence[str] = BENCH_RANGE_MODES, sources: list[str] | None = None) -> list[dict]:
    return [benchmark(vocabulary(m), programs, n_lines, range_modes, apply_repeats, threads, sources) for m in models]
