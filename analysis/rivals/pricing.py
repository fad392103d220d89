"""Pricing a method's forwards with a latency model, by the Copy-as-Decode bounds' own rules.

A case's forwards under one method (analysis.rivals.simulate): per forward `q` new tokens, `emitted`
output tokens and whether it is a prefill-type forward (`prefill`: a copy's prefill, a speculative
verify of q > 1 tokens, a forward that also prefills jump-forwarded tokens) or a decode step. With c
the KV-cache length when a forward starts (`prompt_tokens` plus the tokens emitted before it, in
`bounds.context_mode: running`; `bounds.context` in `fixed`), a forward costs:

    decode step        s(c), plus the first-step overhead o(c) when it starts a decode run
    prefill forward    T_prefill(q, c)

A decode run is a stretch of decode steps: it starts at the first forward of the case (after the prompt's
prefill) and after every prefill-type forward. `s`, `o` and T_prefill come from the model's one pricing call, the bounds' own
(`LatencyModel.prices`, params `bounds.step_cost`: `steady` splits T_ar into o + N s; `first_step` charges
every step T_ar(1, c) and no overhead). So AR's price is the bounds' `regen`, and a Copy-as-Decode
program's forwards (analysis.rivals.families.copy.copy_forwards) price to the bounds' `program_ideal` and
`program_overhead`, except after a copy that forwards no token (a blank line BPE glued to the line
before: no forward, so no new decode run), which the bounds count as a prefill (tested).

A cost evaluated outside the model's profiled range is extrapolated and counted per case
(`extrapolated_forwards`); a model that cannot give the step split raises its ParamsError.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.bounds import CostSettings
from analysis.latency.model import LatencyModel

PRICE_COLUMNS = ("seconds", "extrapolated_forwards")


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
                                  extrapolated_forwards=pl.lit(None, dtype=pl.Int64))
    f = flat_forwards(frame)
    c = np.full(len(f["q"]), settings.context, dtype=np.int64) if settings.context_mode == "fixed" else f["context"]
    decode = ~f["prefill"]
    previous_prefill = np.concatenate([[True], f["prefill"][:-1]])
    run_start = decode & (f["first"] | previous_prefill)
    seconds = np.zeros(len(c))
    flags = np.zeros(len(c), dtype=bool)
    prefill = f["prefill"]
    # one call to the model (the bounds' own: LatencyModel.prices): the step split on every context up to the
    # largest a decode step starts at, and each prefill-type forward at its q and context
    top = int(c[decode].max()) + 1 if decode.any() else 1
    priced = model.prices(np.arange(top, dtype=float), f["q"][prefill], c[prefill], settings.step_cost,
                          settings.steady_max_n)
    at = c[decode]
    seconds[decode] = priced.step.seconds[at] + np.where(run_start[decode], priced.overhead.seconds[at], 0.0)
    flags[decode] = priced.step.extrapolated[at] | (run_start[decode] & priced.overhead.extrapolated[at])
    seconds[prefill] = priced.prefill.seconds
    flags[prefill] = priced.prefill.extrapolated
    n = frame.height
    return frame.with_columns(
        seconds=pl.Series(np.bincount(f["row"], weights=seconds, minlength=n)),
        extrapolated_forwards=pl.Series(np.bincount(f["row"], weights=flags, minlength=n).astype(np.int64)))
