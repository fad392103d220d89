"""Step-cost points from batch-1 measurements, and the step-cost models extrapolated from them.

The frozen H200 runs measured one sequence at a time. Their points for the step-cost form
(analysis.latency.stepcost) are steps with B = 1:

* eager raw files (kernels profile, AR loop `eager` and its paired eager prefill): a prefill of N tokens at
  context c is a step (q = N, c); a decode step is read off the AR run's cumulative times as the steady
  step between two profiled step counts N1 < N2 (N1 >= `decode_from`, past the warm-up's first steps):
  (T_ar(N2) - T_ar(N1)) / (N2 - N1) at context c + (N1 + N2) / 2. Both sides eager: like for like.
* a device-time probe (kernel.device_time: torch.profiler kernel time of one decode step and of prefills at
  one context): launch-free, what a graph-captured engine step approaches. With one context the KV-read
  and attention terms cannot be separated from the rest, so they are fixed from the datasheet (bytes of
  keys and values per cached token over HBM bandwidth; attention FLOPs over peak), and T* is fixed at the
  datasheet ridge (bf16 FLOPs per byte over the bytes per weight), `device_fixed_terms`.

Extrapolating to B > 1 (`EXTRAPOLATION_ASSUMPTIONS`): a step of B sequences costs what one sequence of
the same total tokens costs, plus each sequence's KV read and attention; no per-sequence host term (c_seq
is not identifiable at B = 1 and is fixed at 0); the knee T* is the datasheet ridge (`ridge_fixed_terms`) for
every batch-1 source. A batch-1 profile stops at a prefill of a few hundred tokens, where a host-dispatched
eager step is still flat: its knee could lie anywhere past the largest step, and a free fit put it at 530 on
one machine and 957 on another with the same error, moving the serving figures by a quarter. Fixed at the
ridge, the rest of the form is linear and has one solution. Every batch-1 source also carries the datasheet
floor of a step (`step_floor`), which the price past the fitted range never goes below.
"""

from __future__ import annotations

import polars as pl

from analysis.errors import ParamsError
from analysis.latency.roofline import BYTES_PER_PARAM, Roof, decoder_weights, step_floor_s
from analysis.latency.stepcost import StepFloor

EXTRAPOLATION_ASSUMPTIONS = (
    "measured at batch 1 only: a step of B sequences is priced as one sequence of the same total tokens T "
    "(the weights are read once per step and shared) plus every sequence's KV read and attention",
    "no per-sequence host term (c_seq = 0): it cannot be identified from batch-1 points",
    "the knee T* is the datasheet ridge: batch-1 steps stop near or below it, so the points cannot place it",
    "past the largest profiled step a step costs no less than the last profiled segment's marginal cost per token, "
    "and never less than the datasheet floor (the weights read once, or the step's FLOPs at peak)",
)


def _point(step_id: str, q: int, context: float, seconds: float) -> dict:
    return {"step_id": step_id, "batch": 1, "q": q, "context": int(round(context)), "tokens": q,
            "sum_context": float(context), "attention_keys": float(q * (context + (q + 1) / 2)), "context_max": int(round(context)),
            "seconds": seconds}


def batch1_points(raw: pl.DataFrame, model: str, baseline: str = "eager", decode_from: int = 8) -> pl.DataFrame:
    """Step points of one model and AR loop from a batch-1 raw file (medians over repeats)."""
    rows = raw.filter(pl.col("model") == model)
    if rows.height == 0:
        raise ParamsError(f"batch-1 step points: no rows of model {model!r} (have {sorted(set(raw['model']))})")
    pairs = rows.filter(pl.col("pair_baseline") == baseline) if "pair_baseline" in rows.columns else rows
    prefill = (pairs.filter((pl.col("method") == "prefill") & (pl.col("baseline") == "eager"))
               .group_by("context", "n").agg(pl.col("seconds").median()).sort("context", "n"))
    ar = pairs.filter((pl.col("method") == "ar") & (pl.col("baseline") == baseline))
    if prefill.height == 0 or ar.height == 0:
        raise ParamsError(f"batch-1 step points: {model}/{baseline} needs both AR and eager prefill rows")
    points = [_point(f"prefill-n{r['n']}-c{r['context']}", int(r["n"]), r["context"], float(r["seconds"]))
              for r in prefill.iter_rows(named=True)]
    segments = []
    for (context, _repeat), run in ar.sort("n").group_by("context", "repeat", maintain_order=True):
        ns, ts = run["n"].to_list(), run["seconds"].to_list()
        for (n1, t1), (n2, t2) in zip(zip(ns, ts), zip(ns[1:], ts[1:])):
            if n1 >= decode_from and t2 > t1:
                segments.append({"context": context, "n1": n1, "n2": n2, "step": (t2 - t1) / (n2 - n1)})
    if not segments:
        raise ParamsError(f"batch-1 step points: {model}/{baseline} has no AR segment past N = {decode_from}")
    steps = pl.DataFrame(segments).group_by("context", "n1", "n2").agg(pl.col("step").median()).sort("context", "n1")
    points += [_point(f"decode-n{r['n1']}-{r['n2']}-c{r['context']}", 1, r["context"] + (r["n1"] + r["n2"]) / 2,
                      float(r["step"])) for r in steps.iter_rows(named=True)]
    return pl.DataFrame(points)


def device_time_points(frame: pl.DataFrame, model: str) -> pl.DataFrame:
    """Step points of one model from a device-time probe frame (analysis.latency.device_time.read_device_time)."""
    rows = frame.filter(pl.col("model") == model).sort("n")
    if rows.height == 0:
        raise ParamsError(f"device-time step points: no record of model {model!r}")
    context = int(rows["context"][0])
    points = [_point(f"decode-c{context}", 1, context, float(rows["step_ms"][0]) / 1000)]
    points += [_point(f"prefill-n{r['n']}-c{context}", int(r["n"]), context, float(r["prefill_ms"]) / 1000)
               for r in rows.iter_rows(named=True)]
    return pl.DataFrame(points)


def kv_bytes_per_token(config: dict, dtype: str) -> float:
    """Bytes of keys and values one cached token holds across the layers."""
    try:
        heads, layers, hidden = config["num_attention_heads"], config["num_hidden_layers"], config["hidden_size"]
    except KeyError as exc:
        raise ParamsError(f"model config lacks {exc.args[0]!r}; cannot size its KV cache") from exc
    head_dim = config.get("head_dim") or hidden // heads
    kv_heads = config.get("num_key_value_heads", heads)
    return 2.0 * layers * kv_heads * head_dim * BYTES_PER_PARAM[dtype]


def attention_flops_per_key(config: dict) -> float:
    """FLOPs of one new token attending to one cached token (QK and AV over every layer's query heads)."""
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads
    return 4.0 * config["num_hidden_layers"] * heads * head_dim


def ridge_tokens(roof: Roof, dtype: str) -> float:
    """The datasheet ridge in tokens: a step of more tokens than this is compute-bound (bf16 FLOPs per weight
    byte read)."""
    return roof.gflops * BYTES_PER_PARAM[dtype] / (2.0 * roof.bandwidth_gbps)


def ridge_fixed_terms(roof: Roof, dtype: str) -> tuple[dict[str, float], tuple[str, ...]]:
    """T* at the datasheet ridge and c_seq = 0: the terms a batch-1 source cannot identify."""
    t_star = ridge_tokens(roof, dtype)
    return {"t_star": t_star, "c_seq": 0.0}, (f"T* = the datasheet ridge ({t_star:.0f} tokens, {dtype}): {roof.source}",)


def step_floor(config: dict, roof: Roof, dtype: str) -> StepFloor:
    """The datasheet floor of one step of the model on the device (analysis.latency.roofline's weight count)."""
    weights = decoder_weights(config)
    flops = roof.gflops * 1e9
    return StepFloor(read_s=float(step_floor_s(weights, roof, BYTES_PER_PARAM[dtype])),
                     token_s=2.0 * float(weights.layers if weights.layers is not None else weights.total) / flops,
                     key_s=4.0 * weights.attention_width / flops, seq_s=2.0 * weights.head / flops, source=roof.source)


def device_fixed_terms(config: dict, roof: Roof, dtype: str) -> tuple[dict[str, float], tuple[str, ...]]:
    """c_kv, c_a and T* of a one-context device-time source, from the datasheet, with the sentences saying so."""
    bandwidth, flops = roof.bandwidth_gbps * 1e9, roof.gflops * 1e9
    fixed = {"c_kv": kv_bytes_per_token(config, dtype) / bandwidth, "c_a": attention_flops_per_key(config) / flops,
             **ridge_fixed_terms(roof, dtype)[0]}
    why = (f"one probed context: c_kv = KV bytes per cached token / HBM bandwidth ({kv_bytes_per_token(config, dtype):,.0f} B "
           f"/ {roof.bandwidth_gbps:,.0f} GB/s), c_a = attention FLOPs per key / peak ({roof.gflops / 1000:,.0f} TFLOPS), "
           f"T* = the datasheet ridge ({fixed['t_star']:.0f} tokens): {roof.source}",)
    return fixed, why
