"""The copy-the-input baseline: what returning the input unchanged scores on an edit's quality measures, read beside
a model's score as its gain over copy.

"The Copy Ceiling" (arXiv 2609.24885) scores each model by its signed gain over what a verbatim copy of the
context achieves, and found it negative for all ten models it tested; on an edit task the same control tells
whether a model scores by editing or by copying. Two measures, each defined for a model's output and for the
input alike, so the gain is one subtraction:

* exact match: the text equals the gold target byte for byte (the pilot's EM); copying the input scores it only
  where an edit changes nothing (no case of the shipped corpora: every source differs from its target);
* gold-line recall: the share of the target's lines an output reproduces in order, the longest common
  subsequence of the two line lists (analysis.text.diff, the diff the line oracle uses) over the target's line
  count; copying the input scores the share of the target's lines the edit left untouched, so a model below it
  lost lines that copying would have kept.

Not a rival in the speed tables (analysis.rivals): returning the input is not lossless (its output is not the
gold), and it takes no forward at all.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from analysis.text.diff import myers_matches
from analysis.text.lines import split_lines


def exact_match(output: str | None, target: str) -> bool:
    return output is not None and output == target


def line_recall(output: str | None, target: str) -> float:
    """The share of the target's lines `output` reproduces in order (1.0 for an empty target reproduced; 0 for no
    output)."""
    gold = split_lines(target)
    if output is None:
        return 0.0
    if not gold:
        return 1.0 if output == target else 0.0
    return len(myers_matches(split_lines(output), gold)) / len(gold)


COPY_SCHEMA = {"split": pl.Utf8, "case_id": pl.Utf8, "target": pl.Utf8, "copy_exact": pl.Boolean,
               "copy_line_recall": pl.Float64}


def copy_scores(cases: Iterable[tuple[str, str, str, str]]) -> pl.DataFrame:
    """Per (split, case_id, source, target): the target and what copying the input scores (`copy_exact`,
    `copy_line_recall`)."""
    rows = [{"split": split, "case_id": case_id, "target": target, "copy_exact": exact_match(source, target),
             "copy_line_recall": line_recall(source, target)} for split, case_id, source, target in cases]
    return pl.DataFrame(rows, schema=COPY_SCHEMA)
