"""The forcing check: does llguidance's fast-forward after each copy directive give the copied text's tokens?

For one case (its source and line-level program), the source's forced-span Lark grammar
(analysis.grammar.export) is compiled into an llguidance matcher and the program is walked as the
decoder feeds it (kernels_profile.decode.sequence's layout): each op's own tokens, and after a copy
directive the copied text's tokens. Right after each directive the matcher's `compute_ff_tokens()`
is compared with those tokens:

- ff-equal: the ff tokens are exactly the copied text tokenized on its own (the decoder's layout), so
  an engine that executes them runs the same forward the suite's decoder does;
- ff short: they stop before the span's end (llguidance holds back final tokens that a longer token
  could span, its canonical-tokenization rule; the rest is then decoded token by token);
- non-canonical edge: the ff tokens differ from the *output's* own tokenization (the whole edited
  text tokenized at once) over the span, because that tokenization does not split at the span's
  start or end, or splits inside it otherwise. This is the boundary llguidance's docs warn about
  (forcing tokens a tokenizer would have merged skews what the model writes next).

Timed: the grammar's compile (text to a matcher ready for its first mask), llguidance's mask at every
token the model would write (the directives' and the gens' tokens, and the final EOS), and the ff
call after each directive. The walk must end accepting; any refusal is a GrammarError naming the case.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import GrammarError, ProgramError
from analysis.grammar.export import export
from analysis.grammar.llg import MaskBuffer, compile_matcher, consume, engine_error
from analysis.grammar.program import Copy, Program, parse, render_op
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines


@dataclass(frozen=True)
class SpanCheck:
    start: int
    end: int
    tokens: int          # the copied text's tokens (the decoder's layout)
    ff_tokens: int
    ff_equal: bool
    ff_short: bool       # ff bytes end before the span's end
    non_canonical: bool  # ff tokens differ from the output's own tokenization over the span
    ff_s: float


@dataclass(frozen=True)
class CaseCheck:
    case_id: str
    corpus: str
    framing: str
    n_lines: int
    compile_s: float
    mask_s: tuple[float, ...]  # one per token the model writes
    spans: tuple[SpanCheck, ...]


def _token_bounds(tokenizer, ids: list[int]) -> list[int]:
    bounds = [0]
    for i in ids:
        bounds.append(bounds[-1] + len(tokenizer.piece(i)))
    return bounds


def _non_canonical(ff: list[int], out_ids: list[int], out_bounds: list[int], a: int, b: int, short: bool) -> bool:
    """Do the ff tokens for output bytes [a, b) differ from the output's own tokens there?"""
    if not ff:
        return False
    k = bisect_left(out_bounds, a)
    if k == len(out_bounds) or out_bounds[k] != a:
        return True  # the output's tokenization has a token across the span's start
    if out_ids[k:k + len(ff)] != ff:
        return True
    return not short and out_bounds[k + len(ff)] != b


def check_case(ll_tok, tokenizer, eos: int, case_id: str, corpus: str, framing: str, source: str,
               program_text: str) -> CaseCheck:
    """The forcing check of one line-level program (module docstring)."""
    try:
        program = parse(program_text)
        if any(isinstance(op, Copy) and op.unit != "lines" for op in program.ops):
            raise GrammarError(f"{case_id}: the forcing check takes line-level programs; this one copies tokens")
        output = resolve(program, source)
    except ProgramError as exc:
        raise ProgramError(f"{case_id}: {exc}") from None
    compiled = compile_matcher(ll_tok, export(source, "lark", forced=True, name=case_id).text,
                               f"{case_id} ({len(split_lines(source))} lines)")
    matcher, buffer = compiled.matcher, MaskBuffer(ll_tok.vocab_size)
    out_ids = list(tokenizer.encode_program(output).ids)
    out_bounds = _token_bounds(tokenizer, out_ids)
    masks: list[float] = []
    spans: list[SpanCheck] = []
    position = 0  # bytes of output written so far

    def written(ids: list[int], what: str) -> None:
        for token in ids:
            t0 = time.perf_counter()
            buffer.fill(matcher)
            masks.append(time.perf_counter() - t0)
            consume(matcher, [token], f"{case_id}: {what}")

    for index, op in enumerate(program.ops):
        written(list(tokenizer.encode_program(render_op(op)).ids), f"op {index} ({render_op(op)[:40]!r})")
        if not isinstance(op, Copy):
            position += len(op.text.encode("utf-8"))
            continue
        text = resolve(Program((op,)), source).encode("utf-8")
        layout = list(tokenizer.encode_program(text.decode("utf-8")).ids)
        t0 = time.perf_counter()
        ff = matcher.compute_ff_tokens()
        ff_s = time.perf_counter() - t0
        ff_bytes = b"".join(tokenizer.piece(i) for i in ff)
        if not text.startswith(ff_bytes):
            raise GrammarError(f"{case_id}: op {index}: llguidance's fast-forward {ff_bytes[:40]!r} is not the "
                               f"copied text {text[:40]!r}")
        short = len(ff_bytes) < len(text)
        spans.append(SpanCheck(op.start, op.end, len(layout), len(ff), ff == layout, short,
                               _non_canonical(ff, out_ids, out_bounds, position, position + len(text), short), ff_s))
        consume(matcher, layout, f"{case_id}: op {index}: the copied text's tokens")
        position += len(text)
    written([eos], "EOS after the last op")
    if not matcher.is_accepting() and not matcher.is_stopped():
        raise GrammarError(f"{case_id}: llguidance does not accept the whole program ({engine_error(matcher)})")
    return CaseCheck(case_id, corpus, framing, len(split_lines(source)), compiled.seconds, tuple(masks), tuple(spans))


def check_chunk(chunk, tokenizer, eos: int) -> list[CaseCheck]:
    """The checks of a chunk of (case_id, corpus, framing, source, program) rows; llguidance's tokenizer
    is built once per process."""
    from analysis.parallel.progress import progress

    ll_tok = _ll_tokenizer(tokenizer, eos)
    return [check_case(ll_tok, tokenizer, eos, *row) for row in progress(chunk, "grammar forcing", len(chunk))]


_LL: dict[tuple, object] = {}


def _ll_tokenizer(tokenizer, eos: int):
    from analysis.grammar.llg import ll_tokenizer

    key = (getattr(tokenizer, "spec", None) or id(tokenizer), eos)
    if key not in _LL:
        _LL[key] = ll_tokenizer(tokenizer, (eos,))
    return _LL[key]


# ---------------------------------------------------------------- tables

def span_rows(checks: list[CaseCheck]) -> pl.DataFrame:
    rows = [{"case_id": c.case_id, "corpus": c.corpus, "framing": c.framing, "n_lines": c.n_lines, "start": s.start, "end": s.end,
             "tokens": s.tokens, "ff_tokens": s.ff_tokens, "ff_equal": s.ff_equal, "ff_short": s.ff_short,
             "non_canonical": s.non_canonical, "ff_us": s.ff_s * 1e6} for c in checks for s in c.spans]
    schema = {"case_id": pl.String, "corpus": pl.String, "framing": pl.String, "n_lines": pl.Int64, "start": pl.Int64, "end": pl.Int64,
              "tokens": pl.Int64, "ff_tokens": pl.Int64, "ff_equal": pl.Boolean, "ff_short": pl.Boolean,
              "non_canonical": pl.Boolean, "ff_us": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def _quantile(values: list[float], q: float, scale: float) -> float | None:
    return float(np.percentile(np.asarray(values) * scale, q)) if values else None


def summary(checks: list[CaseCheck], corpora: list[str]) -> pl.DataFrame:
    """One row per corpus (in `corpora`'s order) and one for all of them: cases, copy spans, ff-equal
    share, ff-short and non-canonical spans, compile time (ms) and mask time (us) p50/p99."""
    rows = []
    for corpus in [*corpora, "all"]:
        chosen = [c for c in checks if corpus == "all" or c.corpus == corpus]
        spans = [s for c in chosen for s in c.spans]
        masks = [m for c in chosen for m in c.mask_s]
        compile_s = [c.compile_s for c in chosen]
        n = len(spans)
        rows.append({
            "corpus": corpus, "cases": len(chosen), "max_lines": max((c.n_lines for c in chosen), default=0),
            "copy_spans": n, "ff_equal": sum(s.ff_equal for s in spans),
            "ff_equal_share": sum(s.ff_equal for s in spans) / n if n else None,
            "ff_short": sum(s.ff_short for s in spans),
            "non_canonical": sum(s.non_canonical for s in spans),
            "non_canonical_share": sum(s.non_canonical for s in spans) / n if n else None,
            "compile_p50_ms": _quantile(compile_s, 50, 1e3), "compile_p99_ms": _quantile(compile_s, 99, 1e3),
            "mask_p50_us": _quantile(masks, 50, 1e6), "mask_p99_us": _quantile(masks, 99, 1e6),
            "ff_p50_us": _quantile([s.ff_s for s in spans], 50, 1e6),
            "ff_p99_us": _quantile([s.ff_s for s in spans], 99, 1e6),
            "mask_steps": len(masks),
        })
    return pl.DataFrame(rows)
