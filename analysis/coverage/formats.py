"""Edit-format cost and token-boundary honesty.

Edit formats: the tokens a model must emit for the same edit written as
- rewrite:        the whole gold output
- unified_diff:   `difflib.unified_diff` of the lines with `context` lines around each hunk, headers
                  included (`--- a`, `+++ b`)
- search_replace: aider-style blocks, one per changed region; each SEARCH text is grown by whole
                  lines of context until it occurs exactly once in the source, so it is unambiguous
- copy_line, copy_token: the rendered oracle program

Token boundaries: a line-level copy splices source text into the output. The tokens a serving layer
prefills for it are the span's own tokenization; the gold output, tokenized whole, may cut that text
differently (BPE merges across the span's edges: '):\\n\\n' and friends). A span is `mismatched`
when its own tokens differ from the gold tokens covering exactly its bytes (or a gold token crosses
its edge). Token-level copies come from the gold tokenization and never mismatch.
"""

from __future__ import annotations

import difflib

import polars as pl

from analysis.text.diff import myers_matches
from analysis.grammar.program import Copy, Program
from analysis.coverage.spans import source_byte_range
from analysis.text.lines import split_lines
from analysis.text.tokens import TokenizedText, Tokenizer, line_byte_starts

FORMATS = ("rewrite", "unified_diff", "search_replace", "copy_line", "copy_token")


def unified_diff_text(source: str, target: str, context: int) -> str:
    return "".join(difflib.unified_diff(split_lines(source), split_lines(target), "a", "b", n=context, lineterm="\n"))


def _changed_regions(src: list[str], tgt: list[str]) -> list[tuple[int, int, int, int]]:
    """(i0, i1, j0, j1): source lines [i0, i1) become target lines [j0, j1), from the exact LCS."""
    regions = []
    i = j = 0
    for mi, mj in myers_matches(src, tgt) + [(len(src), len(tgt))]:
        if mi > i or mj > j:
            regions.append((i, mi, j, mj))
        i, j = mi + 1, mj + 1
    return regions


def _unique_window(src: list[str], source: str, i0: int, i1: int) -> tuple[int, int]:
    """Grow source lines [i0, i1) by one line each side until their text occurs exactly once."""
    lo, hi = i0, i1
    while True:
        search = "".join(src[lo:hi])
        if (search and source.count(search) == 1) or (lo == 0 and hi == len(src)):
            return lo, hi
        lo, hi = max(lo - 1, 0), min(hi + 1, len(src))


def search_replace_text(source: str, target: str) -> str:
    src, tgt = split_lines(source), split_lines(target)
    blocks = []
    for i0, i1, j0, j1 in _changed_regions(src, tgt):
        lo, hi = _unique_window(src, source, i0, i1)
        search = "".join(src[lo:hi])
        replace = "".join(src[lo:i0] + tgt[j0:j1] + src[i1:hi])
        blocks.append(f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n")
    return "".join(blocks)


def format_costs(tokenizer: Tokenizer, source: str, target: str, programs: dict[str, str], context: int) -> dict[str, int]:
    return {
        "rewrite": tokenizer.count(target),
        "unified_diff": tokenizer.count(unified_diff_text(source, target, context)),
        "search_replace": tokenizer.count(search_replace_text(source, target)),
        "copy_line": tokenizer.count(programs["line"]),
        "copy_token": tokenizer.count(programs["token"]),
    }


def span_boundary_rows(program: Program, source: TokenizedText, target: TokenizedText, tokenizer: Tokenizer) -> list[dict]:
    """Per copy span: its own token count, the gold tokens over its bytes, and whether they differ."""
    rows, pos = [], 0
    src_lines = line_byte_starts(source.text)
    src_bytes = source.text.encode("utf-8")
    gold_bounds = set(target.byte_bounds)
    for op in program.ops:
        if not isinstance(op, Copy):
            pos += len(op.text.encode("utf-8"))
            continue
        lo, hi = source_byte_range(op, source, src_lines)
        span_text = src_bytes[lo:hi].decode("utf-8")
        own = tokenizer.backend.encode(span_text, add_special_tokens=False).ids if op.unit == "lines" else list(source.ids[op.start - 1:op.end])
        end = pos + (hi - lo)
        aligned = pos in gold_bounds and end in gold_bounds
        gold = [t for t, b in zip(target.ids, target.byte_bounds) if pos <= b < end]
        rows.append({"unit": op.unit, "own_tokens": len(own), "gold_tokens": len(gold),
                     "mismatched": (not aligned) or list(own) != gold, "edge_inside_token": not aligned})
        pos = end
    return rows


def boundary_summary(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.group_by("level", "corpus", "framing")
        .agg(
            copy_spans=pl.len(),
            mismatched=pl.col("mismatched").sum(),
            edge_inside_token=pl.col("edge_inside_token").sum(),
            own_tokens=pl.col("own_tokens").sum(),
            gold_tokens=pl.col("gold_tokens").sum(),
        )
        .with_columns(
            mismatch_share=pl.col("mismatched") / pl.col("copy_spans"),
            token_delta=pl.col("own_tokens") - pl.col("gold_tokens"),
        )
        .sort("level", "corpus", "framing")
    )
