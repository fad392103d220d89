"""Per-request forward sequences: the serving simulation's input (shared interface 1, written by the rivals
stage as data/rivals/forwards.parquet).

One row per (case_id, method): `case_id`, `corpus`, `framing`, `method`, `prompt_tokens` (tokens in the KV
cache before the first output forward, for the prompt that method would use), `gold_tokens`, and two
equal-length lists: `new_tokens` (per forward, the tokens it appends to the cache: its query length q) and
`emitted` (per forward, the output tokens it yields: 1 for a decode step, accepted + 1 for a speculative
verify, n for a copy prefill). The context before forward i is `prompt_tokens + sum(emitted[:i])`
(rejected draft tokens are cropped). A forward with q = 1 is a decode step; q > 1 is priced as a q-token
chunk at its context.

`read_forwards` checks the schema and every row (a bad file is a named error, never a silent skip);
`Trace` is one row as plain tuples, what the scheduler walks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from analysis.errors import CopyDecodeError
from analysis.layout import RIVALS_FORWARDS

FORWARDS = RIVALS_FORWARDS
FORWARDS_SCHEMA = {
    "case_id": pl.String, "corpus": pl.String, "framing": pl.String, "method": pl.String,
    "prompt_tokens": pl.Int64, "gold_tokens": pl.Int64,
    "new_tokens": pl.List(pl.Int32), "emitted": pl.List(pl.Int32),
}
KEY = ("case_id", "framing", "method")


class ForwardsError(CopyDecodeError):
    """The forwards table is missing, has the wrong schema, or holds an impossible row."""


@dataclass(frozen=True)
class Trace:
    """One request of one method: its prompt and its forwards."""

    case_id: str
    corpus: str
    method: str
    prompt_tokens: int
    gold_tokens: int
    new_tokens: tuple[int, ...]
    emitted: tuple[int, ...]

    @cached_property  # read at every completed forward of a simulation
    def output_tokens(self) -> int:
        return sum(self.emitted)


def check_forwards(frame: pl.DataFrame, where: str = "forwards table") -> pl.DataFrame:
    """The frame with FORWARDS_SCHEMA's types, or a ForwardsError naming the column, row or value."""
    missing = [c for c in FORWARDS_SCHEMA if c not in frame.columns]
    if missing:
        raise ForwardsError(f"{where}: missing columns {missing}; expected {list(FORWARDS_SCHEMA)}")
    try:
        frame = frame.select([pl.col(c).cast(t, strict=True) for c, t in FORWARDS_SCHEMA.items()])
    except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as exc:
        raise ForwardsError(f"{where}: a column does not have its type {FORWARDS_SCHEMA} ({exc})") from None
    if frame.height == 0:
        raise ForwardsError(f"{where}: no rows")
    nulls = [c for c in FORWARDS_SCHEMA if frame[c].null_count()]
    if nulls:
        raise ForwardsError(f"{where}: null values in {nulls}")
    dup = frame.group_by(KEY).len().filter(pl.col("len") > 1)
    if dup.height:
        raise ForwardsError(f"{where}: {dup.height} (case_id, framing, method) keys appear twice, e.g. {dup.row(0)[:3]}")
    checks = frame.with_row_index("row").with_columns(
        n_new=pl.col("new_tokens").list.len(), n_emitted=pl.col("emitted").list.len(),
        min_new=pl.col("new_tokens").list.min(), min_emitted=pl.col("emitted").list.min(),
        total_emitted=pl.col("emitted").list.sum())
    rules = (
        ("new_tokens and emitted have different lengths", pl.col("n_new") != pl.col("n_emitted")),
        ("no forwards", pl.col("n_new") == 0),
        ("a forward appends no token (new_tokens < 1)", pl.col("min_new") < 1),
        ("a forward emits a negative count", pl.col("min_emitted") < 0),
        ("negative prompt_tokens or gold_tokens", (pl.col("prompt_tokens") < 0) | (pl.col("gold_tokens") < 0)),
        ("it emits no output token", pl.col("total_emitted") == 0),
    )
    for why, bad in rules:
        hit = checks.filter(bad)
        if hit.height:
            r = hit.row(0, named=True)
            raise ForwardsError(f"{where}: row {r['row']} (case {r['case_id']!r}, method {r['method']!r}): {why} "
                                f"({hit.height} such rows)")
    return frame


def read_forwards(path: Path = FORWARDS) -> pl.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise ForwardsError(f"{path} not found: the rivals stage writes it (`copydecode rivals`, or `dvc repro`)")
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for a truncated or foreign file
        raise ForwardsError(f"{path}: not a readable parquet file ({type(exc).__name__}: {str(exc)[:160]})") from None
    return check_forwards(frame, str(path))


def traces(frame: pl.DataFrame) -> dict[tuple[str, str], Trace]:
    """{(case_id, method): Trace} of a checked frame (one framing per case: the caller picks the pool)."""
    out = {}
    for r in frame.iter_rows(named=True):
        out[(r["case_id"], r["method"])] = Trace(r["case_id"], r["corpus"], r["method"], int(r["prompt_tokens"]),
                                                 int(r["gold_tokens"]), tuple(int(q) for q in r["new_tokens"]),
                                                 tuple(int(e) for e in r["emitted"]))
    return out
