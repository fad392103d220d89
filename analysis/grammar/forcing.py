"""The forcing check: does llguidance, under a source's forced-span grammar, fast-forward each copy?

For one line-level program and its source, llguidance's matcher over the forced-span Lark grammar
(analysis.grammar.export) is walked along the decoder's sequence layout (kernels_profile.decode.sequence:
each op's own tokens, and after each copy directive the copied text's own tokens):

- before every token the model would write (directive and <gen> tokens, and the final EOS) the mask is
  computed (analysis.grammar.llg.StepMasks, timed: llguidance's mask, or where bytes are forced the
  tokens spelling them) and the token must be in it;
- *header-forced*: the directive's close was already forced before its last token (the end line was
  unambiguous after its digits), so an engine with jump-forward decodes no token for it;
- after each directive, `compute_ff_tokens()` (timed) is compared with the copied text's tokens:
  *ff-equal* when they are the same ids, which is what lets a decoder run the span as one prefill
  and stay on the suite's layout;
- a span has a *non-canonical edge* when the canonical tokenization of the whole stream (program with
  the copied text inlined) has no token boundary at the span's start or end: there a free decode of the
  same text would merge tokens across the edge, the boundary llguidance's docs warn about.

Compile time is the matcher's construction for the source's grammar, once per program.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from analysis.errors import GrammarError
from analysis.grammar.export import export
from analysis.grammar.llg import StepMasks, allowed, compile_grammar
from analysis.grammar.program import COPY_END, Copy, Program, parse, render_op
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines


@dataclass(frozen=True)
class SpanCheck:
    start: int
    end: int
    tokens: int               # the copied text's tokens
    ff_tokens: int            # what compute_ff_tokens() returned
    ff_equal: bool
    ff_prefix: bool           # ff is a prefix of the copied tokens (llguidance held back a tail that may merge)
    noncanonical_edge: bool
    header_forced: bool
    ff_seconds: float


@dataclass
class ProgramCheck:
    n_lines: int
    compile_seconds: float | None = None
    refused: str | None = None          # the GrammarError of a grammar that could not be built
    rejected: str | None = None         # where the matcher refused the program's stream
    spans: list[SpanCheck] = field(default_factory=list)
    mask_seconds: list[float] = field(default_factory=list)


def stream_edges(tokenizer, pieces: list[tuple[str, str]]) -> tuple[set[int], list[tuple[int, int]]]:
    """The canonical token boundaries (bytes) of the stream, and each copied piece's byte span."""
    spans, offset = [], 0
    for kind, text in pieces:
        size = len(text.encode("utf-8"))
        if kind == "copied":
            spans.append((offset, offset + size))
        offset += size
    bounds = set(tokenizer.encode_program("".join(t for _, t in pieces)).byte_bounds)
    return bounds, spans


def check_program(lltok, masks: StepMasks, tokenizer, program_text: str, source: str, eos: int) -> ProgramCheck:
    """The forcing check of one line-level program (module docstring); `masks` holds the tokenizer's
    pieces (built once for all programs)."""
    check = ProgramCheck(n_lines=len(split_lines(source)))
    try:
        compiled = compile_grammar(lltok, export(source, "lark", forced=True))
    except GrammarError as exc:
        check.refused = str(exc)
        return check
    check.compile_seconds = compiled.seconds
    matcher, bitmask = compiled.matcher, masks.allocate()
    program = parse(program_text)
    pieces: list[tuple[str, str]] = []
    forced: list[tuple] = []  # op, copied tokens, ff tokens, equal, prefix, header-forced, seconds

    def decode_step(token: int, where: str) -> bytes | None:
        """The forced bytes before `token` (None where the token is refused)."""
        t0 = time.perf_counter()
        ahead = masks.fill(matcher, bitmask)
        check.mask_seconds.append(time.perf_counter() - t0)
        if not allowed(bitmask, token) or not matcher.consume_token(token):
            check.rejected = f"{where}: token {token} ({tokenizer.piece(token)!r}) not allowed"
            return None
        return ahead

    for index, op in enumerate(program.ops):
        text = render_op(op)
        pieces.append(("op", text))
        ahead = b""
        for token in tokenizer.encode_program(text).ids:
            ahead = decode_step(token, f"op {index}")
            if ahead is None:
                return check
        if isinstance(op, Copy):
            copied = resolve(Program((op,)), source)
            want = list(tokenizer.encode(copied).ids)
            t0 = time.perf_counter()
            ff = matcher.compute_ff_tokens()
            seconds = time.perf_counter() - t0
            forced.append((op, len(want), len(ff), ff == want, want[:len(ff)] == ff,
                           ahead.startswith(COPY_END.encode()), seconds))
            pieces.append(("copied", copied))
            if not matcher.consume_tokens(want):
                check.rejected = f"op {index}: the copied text of lines {op.start}-{op.end} not accepted"
                return check
    if decode_step(eos, "end") is None or not matcher.is_accepting():
        check.rejected = check.rejected or "end: the matcher is not accepting"
        return check
    bounds, edges = stream_edges(tokenizer, pieces)
    for (op, n_want, n_ff, equal, prefix, header, seconds), (lo, hi) in zip(forced, edges):
        check.spans.append(SpanCheck(op.start, op.end, n_want, n_ff, equal, prefix,
                                     lo not in bounds or hi not in bounds, header, seconds))
    return check
