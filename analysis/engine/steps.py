"""Engine steps as the step-cost model sees them (analysis.latency.stepcost).

The driver logs, per engine step, each scheduled request's new tokens q_i, cached context c_i and draft tokens.
A step's shape is B (requests), T = sum q_i, sum c_i, K = sum q_i (c_i + (q_i + 1) / 2) (the attention's
(query, key) pairs) and the largest context; its cost is the wall-clock seconds of `LLMEngine.step` (schedule,
forward, sampling, drafting, output processing: what a request waits for).
"""

from __future__ import annotations

import polars as pl

from analysis.latency.stepcost import POINT_COLUMNS

STEP_FIELDS = ("seconds", "batch", "tokens", "sum_context", "attention_keys", "context_max", "drafts")


def step_rows(steps: list[dict]) -> list[list[float]]:
    """STEP_FIELDS per logged step (steps whose shape the driver could not read are left out)."""
    out = []
    for st in steps:
        rows = st.get("rows")
        if not rows:
            continue
        qs, cs = [r[1] for r in rows], [r[2] for r in rows]
        keys = sum(q * (c + (q + 1) / 2) for q, c in zip(qs, cs))
        out.append([round(st["s"], 6), len(rows), sum(qs), sum(cs), keys, max(cs), sum(r[3] for r in rows)])
    return out


def step_frame(lines: list[dict]) -> pl.DataFrame:
    """The steps of every run (steps.jsonl lines: run_id, method, concurrency, repeat, steps) as one frame with
    the step-cost fit's POINT_COLUMNS."""
    frames = []
    for line in lines:
        rows = line["steps"]
        if not rows:
            continue
        frame = pl.DataFrame(rows, schema=list(STEP_FIELDS), orient="row")
        frames.append(frame.with_columns(run_id=pl.lit(line["run_id"]), method=pl.lit(line["method"]),
                                         concurrency=pl.lit(line["concurrency"]), repeat=pl.lit(line["repeat"])))
    if not frames:
        return pl.DataFrame(schema={**{c: pl.Float64 for c in STEP_FIELDS}, "run_id": pl.String, "method": pl.String,
                                    "concurrency": pl.Int64, "repeat": pl.Int64})
    frame = pl.concat(frames, how="vertical_relaxed")
    return frame.with_columns(pl.col(c).cast(pl.Float64) for c in POINT_COLUMNS)
