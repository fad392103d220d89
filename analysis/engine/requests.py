"""The engine run's requests: a seeded draw from the corpora, the same for every method.

Per corpus of the cases table (at the run's framing, with the single-framing corpora), the cases whose source
has at most `max_source_lines` lines are split at the corpus median of source lines into short (at or below)
and long (above); `short_per_corpus` and `long_per_corpus` cases are drawn from each half without replacement,
with a generator seeded by (seed, corpus), so adding a corpus changes no other corpus's draw. A corpus with
too few cases in a half gives what it has, and the shortfall is named in the draw's notes, never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.errors import CopyDecodeError
from analysis.pooling import framing_filter
from analysis.text.lines import split_lines

SHORT, LONG = "short", "long"


class EngineRunError(CopyDecodeError):
    """The engine run's inputs or records are missing or malformed."""


@dataclass(frozen=True)
class DrawSettings:
    seed: int
    short_per_corpus: int
    long_per_corpus: int
    framing: str
    max_source_lines: int


@dataclass(frozen=True)
class EngineRequest:
    """One drawn case: the request every method serves (`rid` is its name in every record)."""

    rid: str
    case_id: str
    corpus: str
    length: str          # SHORT | LONG
    source_lines: int
    source: str
    instruction: str | None


def _rng(seed: int, corpus: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *corpus.encode()]))


def draw_requests(cases: pl.DataFrame, draw: DrawSettings) -> tuple[list[EngineRequest], list[str]]:
    """The drawn requests in a fixed order (corpus, then short before long, then draw order) and the notes."""
    rows = cases.filter(framing_filter(draw.framing)).sort("corpus", "case_id")
    if rows.height == 0:
        raise EngineRunError(f"no case at framing {draw.framing!r} (with the single-framing corpora) to draw from")
    requests: list[EngineRequest] = []
    notes: list[str] = []
    for corpus in rows["corpus"].unique(maintain_order=True).to_list():
        group = rows.filter(pl.col("corpus") == corpus)
        lines = [len(split_lines(s)) for s in group["source"].to_list()]
        group = group.with_columns(source_lines=pl.Series(lines, dtype=pl.Int64))
        fit = group.filter(pl.col("source_lines") <= draw.max_source_lines)
        if fit.height == 0:
            notes.append(f"{corpus}: no case with at most {draw.max_source_lines} source lines; none drawn")
            continue
        median = float(np.median(fit["source_lines"].to_numpy()))
        rng = _rng(draw.seed, corpus)
        for length, half, want in ((SHORT, fit.filter(pl.col("source_lines") <= median), draw.short_per_corpus),
                                   (LONG, fit.filter(pl.col("source_lines") > median), draw.long_per_corpus)):
            take = min(want, half.height)
            if take < want:
                notes.append(f"{corpus}: {half.height} {length} case(s) for {want} asked")
            for i in sorted(rng.choice(half.height, size=take, replace=False).tolist()) if take else []:
                r = half.row(i, named=True)
                requests.append(EngineRequest(f"r{len(requests):03d}", r["case_id"], corpus, length,
                                              int(r["source_lines"]), r["source"], r.get("instruction")))
    if not requests:
        raise EngineRunError("the draw is empty: " + "; ".join(notes))
    return requests, notes


def closed_loop_order(rids: list[str], seed: int, stream: str) -> list[str]:
    """The order requests are submitted in one run: a seeded shuffle, the same for every method at a load and
    repeat (the stream names both), so methods are paired request by request."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, *stream.encode()]))
    return [rids[i] for i in rng.permutation(len(rids))]
