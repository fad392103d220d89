"""The one price of a forward log (analysis.rivals.forwards.Forwards), on the Copy-as-Decode bounds' rules: the
rivals stage prices its forwards table with `price`, the e2e prediction each measured log with `price_log`.

With c the KV-cache length when a forward starts (`prompt_tokens` plus the tokens emitted before it, in
`bounds.context_mode: running`; `bounds.context` in `fixed`), a forward costs

    decode step        s(c), plus the first-step overhead o(c) when it starts a decode run
    prefill forward    T_prefill(q, c)

A decode run starts where the bounds' one rule says (`analysis.bounds.run_starts`): at a decode step that
opens the case (after the prompt's prefill) or follows a prefill-type forward. `s`, `o` and T_prefill come
from the model's one pricing call, the bounds' own (`LatencyModel.prices`, params `bounds.step_cost`:
`steady` splits T_ar into o + N s; `first_step` charges every step T_ar(1, c) and no overhead). So AR's
price is the bounds' `regen`, and a Copy-as-Decode program's forwards (analysis.rivals.families.copy) price
to the bounds' `program_ideal` and `program_overhead`, except after a copy that forwards no token (a blank
line BPE glued to the line before: no forward, so no new decode run), which the bounds count as a prefill
(tested). A cost evaluated outside the model's profiled range is extrapolated and counted per case
(`extrapolated_forwards`), and by cause: a prefill-type forward whose N lies outside the profiled N
(`extrapolated_n_forwards`; priced by params bounds.prefill_past_n's rule) and a forward whose context lies
outside the profiled contexts (`extrapolated_context_forwards`: held at the one profiled context, or
extended); a forward can be both. A model that cannot give the step split raises its ParamsError.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.bounds import CostSettings, run_starts
from analysis.latency.model import LatencyModel
from analysis.rivals.forwards import Forwards

PRICE_COLUMNS = ("seconds", "extrapolated_forwards", "extrapolated_n_forwards", "extrapolated_context_forwards")


def flat_forwards(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    """The forwards of every row as flat arrays: row, q, emitted, prefill, and the context each starts at
    in running mode (prompt_tokens plus the row's earlier emitted tokens)."""
    lengths = frame["new_tokens"].list.len().to_numpy().astype(np.int64)
    row = np.repeat(np.arange(frame.height), lengths)
    q = frame["new_tokens"].explode().to_numpy().astype(np.int64)
    emitted = frame["emitted"].explode().to_numpy().astype(np.int64)
    prefill = frame["prefill"].explode().to_numpy().astype(bool)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    before = np.cumsum(emitted) - emitted               # emitted before each forward, over all rows
    before -= np.repeat(before[starts], lengths)        # every row has a forward (analysis.serving.forwards)
    context = frame["prompt_tokens"].to_numpy().astype(np.int64)[row] + before
    first = np.zeros(len(q), dtype=bool)
    first[starts] = True
    return {"row": row, "q": q, "emitted": emitted, "prefill": prefill, "context": context, "first": first}


def price(frame: pl.DataFrame, model: LatencyModel, settings: CostSettings) -> pl.DataFrame:
    """`frame` (columns prompt_tokens, new_tokens, emitted, prefill; one row per case and method) with
    `seconds` (the sum of its forwards' costs) and `extrapolated_forwards`."""
    settings = settings.validate()
    if frame.height == 0:
        return frame.with_columns(seconds=pl.lit(None, dtype=pl.Float64),
                                  **{c: pl.lit(None, dtype=pl.Int64) for c in PRICE_COLUMNS[1:]})
    f = flat_forwards(frame)
    c = np.full(len(f["q"]), settings.context, dtype=np.int64) if settings.context_mode == "fixed" else f["context"]
    decode = ~f["prefill"]
    run_start = run_starts(decode, f["first"] | np.concatenate([[True], f["prefill"][:-1]]))
    seconds = np.zeros(len(c))
    flags, past_n, held = (np.zeros(len(c), dtype=bool) for _ in range(3))
    prefill = f["prefill"]
    # one call to the model (the bounds' own: LatencyModel.prices): the step split on every context up to the
    # largest a decode step starts at, and each prefill-type forward at its q and context
    top = int(c[decode].max()) + 1 if decode.any() else 1
    priced = model.prices(np.arange(top, dtype=float), f["q"][prefill], c[prefill], settings.step_cost,
                          settings.steady_max_n, settings.prefill_past_n)
    at = c[decode]
    seconds[decode] = priced.step.seconds[at] + np.where(run_start[decode], priced.overhead.seconds[at], 0.0)
    flags[decode] = priced.step.extrapolated[at] | (run_start[decode] & priced.overhead.extrapolated[at])
    held[decode] = flags[decode]  # a decode step's N is 1: only its context can lie outside the profile
    seconds[prefill] = priced.prefill.seconds
    flags[prefill], past_n[prefill] = priced.prefill.extrapolated, priced.prefill.n_flags
    held[prefill] = priced.prefill.context_flags
    n = frame.height
    count = lambda x: pl.Series(np.bincount(f["row"], weights=x, minlength=n).astype(np.int64))  # noqa: E731
    return frame.with_columns(seconds=pl.Series(np.bincount(f["row"], weights=seconds, minlength=n)),
                              extrapolated_forwards=count(flags), extrapolated_n_forwards=count(past_n),
                              extrapolated_context_forwards=count(held))


@dataclass(frozen=True)
class Priced:
    seconds: float
    extrapolated: int  # forwards priced outside the model's profiled range


def price_log(forwards: Forwards, prompt_tokens: int, model: LatencyModel, settings: CostSettings) -> Priced:
    """One forward log's seconds and extrapolated forwards (`price` on a one-row table)."""
    if not len(forwards):
        return Priced(0.0, 0)
    frame = pl.DataFrame({"prompt_tokens": [int(prompt_tokens)], "new_tokens": [forwards.new_tokens],
                          "emitted": [forwards.emitted], "prefill": [forwards.prefill]},
                         schema={"prompt_tokens": pl.Int64, "new_tokens": pl.List(pl.Int64),
                                 "emitted": pl.List(pl.Int64), "prefill": pl.List(pl.Boolean)})
    row = price(frame, model, settings).row(0, named=True)
    return Priced(float(row["seconds"]), int(row["extrapolated_forwards"]))
