"""The data checks of every corpus: each text problem an edit corpus can hold gets a named decision, kept or
refused, and the cases it touches are counted per corpus in reports/metrics/corpora.json (`data_checks`), so
that no case is dropped or changed without a word.

Kept (counted; every stage takes such a case as it is, and the round trip proves its programs lossless):
    identical         source == target: a no-op edit; the whole target is one copy
    empty_source      nothing to copy: the whole target is generated (coverage 0)
    crlf              a line ends with '\\r\\n': the suite's one line splitter keeps each line's ending, so a
                      copy reproduces it byte for byte
    lone_cr           a '\\r' not followed by '\\n' (an old Mac line ending): it stays inside its line (only
                      '\\n' breaks a line), so it is copied or generated with that line
    no_final_newline  the source or the target ends without a line break: its last line is copied only where
                      the other text has it without one too
    final_newline_differs  one text ends with a line break and the other does not: the gold's last line is
                      generated, not copied (the line copy keeps each line's ending; EditEval holds such cases)
    non_ascii         any character past ASCII (the texts are UTF-8)
Refused (the corpora stage stops with an error that names the case or row and counts the cases):
    empty_target      nothing to generate: coverage and speedup are 0 of 0 (analysis.corpora.cases.cases_frame)
    not_utf8          a text that is not UTF-8 or holds a lone surrogate (the pairs, JSON Lines and dataset readers)
    over_max_text_bytes  a text past params corpora.max_text_bytes, with the memory it would need
                      (analysis.corpora.cases.check_text_sizes)
A refused problem is counted 0 in a written report: the stage writes nothing when it meets one.
"""

from __future__ import annotations

import polars as pl

KEPT: dict[str, str] = {
    "identical": "kept: a no-op edit, the whole target one copy",
    "empty_source": "kept: nothing to copy, the whole target generated",
    "crlf": "kept: '\\r\\n' ends its line, copied byte for byte",
    "lone_cr": "kept: a lone '\\r' stays inside its line",
    "no_final_newline": "kept: the last line copied only where the other text ends the same way",
    "final_newline_differs": "kept: one text ends with a line break, the other not; that last line is generated",
    "non_ascii": "kept: UTF-8 text",
}
REFUSED: dict[str, str] = {
    "empty_target": "refused: the stage stops, naming and counting the cases",
    "not_utf8": "refused: the stage stops, naming the row and the byte",
    "over_max_text_bytes": "refused: the stage stops, naming the case and the memory it would need",
}
DECISIONS: dict[str, str] = {**KEPT, **REFUSED}


def _either(column_test) -> pl.Expr:
    return column_test(pl.col("source")) | column_test(pl.col("target"))


def kept_problems() -> dict[str, pl.Expr]:
    """Each kept problem as a per-case predicate over the cases table's source and target."""
    return {
        "identical": pl.col("source") == pl.col("target"),
        "empty_source": pl.col("source") == "",
        "crlf": _either(lambda c: c.str.contains("\r\n", literal=True)),
        "lone_cr": _either(lambda c: c.str.contains(r"\r([^\n]|$)")),
        "no_final_newline": _either(lambda c: (c != "") & ~c.str.ends_with("\n")),
        "final_newline_differs": ((pl.col("source") != "") & (pl.col("source").str.ends_with("\n")
                                                             != pl.col("target").str.ends_with("\n"))),
        "non_ascii": _either(lambda c: c.str.contains(r"[^\x00-\x7f]")),
    }


def data_checks(frame: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Per corpus and framing (`<corpus>/<framing>`, the keys of corpora.json's `cases`): its cases and how many
    hold each problem; the refused problems are 0, as the frame passed the refusals."""
    counts = frame.group_by("corpus", "framing", maintain_order=True).agg(
        pl.len().alias("cases"), *[expr.sum().alias(name) for name, expr in kept_problems().items()])
    out = {}
    for row in counts.iter_rows(named=True):
        key = f"{row.pop('corpus')}/{row.pop('framing')}"
        out[key] = {**{k: int(v) for k, v in row.items()}, **{name: 0 for name in REFUSED}}
    return out
