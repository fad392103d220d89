"""Programs -> span table, coverage with bootstrap intervals, and span-length histograms.

`spans.parquet` schema (one row per program operation):

    case_id, corpus, language, framing   as in cases.parquet
    level             "line" | "token"   which oracle wrote the program
    op_index          int                position of the op in its program
    kind              "copy" | "gen"
    n_tokens          int   gold-output tokens the op produces (gold tokenization of the target;
                            a token counts for the op in which its first byte lies)
    n_tokens_src      int   copy: source tokens the prefill forwards (first-byte rule on the source);
                            gen: 0
    n_lines           int   lines of the op's output text (analysis.text.lines.split_lines)
    directive_tokens  int   tokens of the directive the model must emit besides the payload:
                            copy: the whole `<copy .../>` tag; gen: `<gen>`, `</gen>` and the
                            extra tokens of any escapes in the body
    prompt_tokens     int   the case's prompt length, the KV-cache length when the first op starts
                            (`prompt_tokens`): source tokens (gold tokenization) plus a fixed template
                            overhead (params `spans.prompt_overhead_tokens`); the same on every row of a
                            case. An approximation of the e2e prompt, which also holds the instruction,
                            the system message and a line number per source line; the bounds use it in
                            `context_mode: running` only

Coverage of a set of cases = sum of copy n_tokens / sum of all n_tokens (a token-weighted ratio);
its interval is a percentile bootstrap over cases (analysis.stats.ratio_of_sums_ci).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import polars as pl

from analysis.errors import ParamsError
from analysis.grammar.program import Copy, Gen, Program, escape, parse, render_op
from analysis.parallel.progress import progress
from analysis.parallel.workers import SERIAL, ParallelSettings, map_cases
from analysis.pipeline.params import positive_int
from analysis.pooling import pooled_groups
from analysis.stats import ratio_of_sums_ci
from analysis.text.tokens import TokenizedText, Tokenizer, line_byte_starts

SPANS_SCHEMA = {
    "case_id": pl.String, "corpus": pl.String, "language": pl.String, "framing": pl.String,
    "level": pl.String, "op_index": pl.Int64, "kind": pl.String, "n_tokens": pl.Int64,
    "n_tokens_src": pl.Int64, "n_lines": pl.Int64, "directive_tokens": pl.Int64, "prompt_tokens": pl.Int64,
}


def prompt_tokens(source: TokenizedText, overhead: int) -> int:
    """The prompt length a case's program starts at: its source tokens plus the template overhead."""
    if overhead < 0:
        raise ParamsError(f"spans.prompt_overhead_tokens must be >= 0 tokens, got {overhead}")
    return len(source.ids) + overhead


@dataclass(frozen=True)
class SpanRow:
    op_index: int
    kind: str
    n_tokens: int
    n_tokens_src: int
    n_lines: int
    directive_tokens: int


class DirectiveCounter:
    """Token cost of directives, memoised: the same `<copy lines="3-9"/>` recurs across cases."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self._cache: dict[str, int] = {}
        self.gen_tags = tokenizer.count("<gen>") + tokenizer.count("</gen>")

    def count(self, text: str) -> int:
        if text not in self._cache:
            self._cache[text] = self.tokenizer.count(text)
        return self._cache[text]

    def of(self, op) -> int:
        if isinstance(op, Copy):
            return self.count(render_op(op))
        if "<" not in op.text and "&" not in op.text:  # nothing `escape` could rewrite
            return self.gen_tags
        escaped = escape(op.text)
        extra = 0 if escaped == op.text else self.tokenizer.count(escaped) - self.tokenizer.count(op.text)
        return self.gen_tags + extra


def _tokens_starting_in(byte_bounds: tuple[int, ...], lo: int, hi: int) -> int:
    starts = byte_bounds[:-1]
    return bisect_left(starts, hi) - bisect_left(starts, lo)


def source_byte_range(op: Copy, source: TokenizedText, line_byte_starts: list[int]) -> tuple[int, int]:
    if op.unit == "lines":
        return line_byte_starts[op.start - 1], line_byte_starts[op.end]
    return source.byte_bounds[op.start - 1], source.byte_bounds[op.end]


def program_spans(
    program: Program, source: TokenizedText, target: TokenizedText, directives: DirectiveCounter
) -> list[SpanRow]:
    """One SpanRow per op; n_tokens over all ops add up to len(target) exactly."""
    src_line_bytes = line_byte_starts(source.text)
    src_raw = source.text.encode("utf-8")  # once per program, not once per copy
    rows, pos = [], 0
    for index, op in enumerate(program.ops):
        if isinstance(op, Gen):
            raw = op.text.encode("utf-8")
            n_bytes, n_src, lo, hi = len(raw), 0, 0, len(raw)
        else:
            lo, hi = source_byte_range(op, source, src_line_bytes)
            raw, n_bytes = src_raw, hi - lo
            n_src = _tokens_starting_in(source.byte_bounds, lo, hi)
        n_tok = _tokens_starting_in(target.byte_bounds, pos, pos + n_bytes)
        rows.append(SpanRow(
            index, "gen" if isinstance(op, Gen) else "copy", n_tok, n_src,
            _lines_in(raw, lo, hi), directives.of(op),
        ))
        pos += n_bytes
    return rows


def _lines_in(raw: bytes, lo: int, hi: int) -> int:
    """len(split_lines(raw[lo:hi].decode())): the newlines, plus an unterminated last line."""
    return raw.count(b"\n", lo, hi) + (1 if hi > lo and raw[hi - 1] != 0x0A else 0)


# ---------------------------------------------------------------- coverage

PER_CASE_ORDER = ("corpus", "framing", "level", "case_id")  # unique per case: shards merge by re-sorting


def per_case_coverage(spans: pl.DataFrame) -> pl.DataFrame:
    return (
        spans.group_by("case_id", "corpus", "framing", "level")
        .agg(
            copied=pl.col("n_tokens").filter(pl.col("kind") == "copy").sum(),
            total=pl.col("n_tokens").sum(),
            n_copy_spans=(pl.col("kind") == "copy").sum(),
            n_gen_spans=(pl.col("kind") == "gen").sum(),
        )
        .sort(*PER_CASE_ORDER)
    )


def merge_per_case(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """per_case_coverage of shards (disjoint cases) -> that of their union."""
    return pl.concat(parts).sort(*PER_CASE_ORDER)


def coverage_table(per_case: pl.DataFrame, resamples: int, seed: int, ci: float) -> pl.DataFrame:
    records = []
    for level in sorted(set(per_case["level"])):
        at_level = per_case.filter(pl.col("level") == level)
        for corpus, framing, rows in pooled_groups(at_level):
            copied = rows["copied"].to_numpy().astype(float)
            total = rows["total"].to_numpy().astype(float)
            interval = ratio_of_sums_ci(copied, total, resamples, seed, ci)
            records.append({
                "corpus": corpus, "framing": framing, "level": level, "n_cases": rows.height,
                "gold_tokens": int(total.sum()), "copied_tokens": int(copied.sum()),
                "coverage": float(copied.sum() / total.sum()) if total.sum() else float("nan"),
                "ci_low": interval.low, "ci_high": interval.high,
                "copy_spans_per_case": float(rows["n_copy_spans"].mean()),
            })
    return pl.DataFrame(records).sort("level", "framing", "corpus")


# ---------------------------------------------------------------- histograms

def log2_bin(n: pl.Expr) -> pl.Expr:
    """Bin b holds lengths in [2^b, 2^(b+1)); the label says the range."""
    return n.clip(lower_bound=1).log(2).floor().cast(pl.Int64)


HISTOGRAM_KEYS = ("corpus", "framing", "level", "kind", "bin")


def span_bin_counts(spans: pl.DataFrame) -> pl.DataFrame:
    """Spans per (corpus, framing, level, kind, log2 bin): what `span_histogram` counts (shards add up)."""
    binned = spans.filter(pl.col("n_tokens") > 0).with_columns(bin=log2_bin(pl.col("n_tokens")))
    return binned.group_by(*HISTOGRAM_KEYS).agg(count=pl.len())


def span_histogram(spans: pl.DataFrame) -> pl.DataFrame:
    return histogram_from_counts(span_bin_counts(spans))


def histogram_from_counts(*parts: pl.DataFrame) -> pl.DataFrame:
    """The span histogram of the bin counts of one or more shards."""
    counts = pl.concat(parts)
    hist = (counts if len(parts) == 1 else
            counts.group_by(*HISTOGRAM_KEYS).agg(pl.col("count").sum().cast(counts.schema["count"])))
    return hist.with_columns(
        lo=(2 ** pl.col("bin")).cast(pl.Int64),
        hi=(2 ** (pl.col("bin") + 1) - 1).cast(pl.Int64),
    ).with_columns(
        range=pl.format("{}-{}", pl.col("lo"), pl.col("hi"))
    ).sort("corpus", "framing", "level", "kind", "bin")


# ---------------------------------------------------------------- the span table of programs

def prompt_overhead_tokens(params: dict) -> int:
    """params spans.prompt_overhead_tokens: the prompt's tokens besides the source (the spans stage's, the
    bench's)."""
    return positive_int(params, "spans.prompt_overhead_tokens", minimum=0)


def build_spans(table: pl.DataFrame, tokenizer, prompt_overhead_tokens: int = 0,
                parallel: ParallelSettings = SERIAL) -> pl.DataFrame:
    sources = tokenizer.encode_many(table["source"].to_list())
    targets = tokenizer.encode_many(table["target"].to_list())
    rows = list(zip(table.iter_rows(named=True), sources, targets))
    parts = map_cases(span_columns, rows, parallel, tokenizer, prompt_overhead_tokens, desc="spans")
    columns = {name: [value for part in parts for value in part[name]] for name in SPANS_SCHEMA}
    return pl.DataFrame(columns, schema=SPANS_SCHEMA)


def span_columns(chunk, tokenizer, prompt_overhead_tokens: int) -> list[dict[str, list]]:
    """The span columns of a chunk of (program row, source tokens, target tokens), as one part."""
    directives = DirectiveCounter(tokenizer)  # a memo only: a fresh one per chunk counts the same
    columns: dict[str, list] = {name: [] for name in SPANS_SCHEMA}
    for row, src, tgt in progress(chunk, "spans", len(chunk)):
        prompt = prompt_tokens(src, prompt_overhead_tokens)
        for span in program_spans(parse(row["program"]), src, tgt, directives):
            for key in ("case_id", "corpus", "language", "framing", "level"):
                columns[key].append(row[key])
            for key in ("op_index", "kind", "n_tokens", "n_tokens_src", "n_lines", "directive_tokens"):
                columns[key].append(getattr(span, key))
            columns["prompt_tokens"].append(prompt)
    return [columns]
