"""What the reports show: the public names the notebooks and the reports stage import, gathered from
the modules that own them, plus the kernel report's roofline block and the case explorer.

Owners: reading stage outputs analysis.outputs; number formatting analysis.numbers; tables and page
blocks (HTML) analysis.pages; provenance analysis.provenance; the paper's claims and their verdicts
analysis.claims (torch-free, no HTML); corpus views analysis.corpusviews; kernel run environment and
latency fits analysis.kernelviews; headline.json analysis.claims_summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import polars as pl

from analysis.claims import (  # noqa: F401
    BEYOND,
    DIFFERS,
    NOT_APPLICABLE,
    NOT_AT_SCALE,
    NOT_RUN,
    PAPER,
    POOLINGS,
    REPRODUCED,
    VERDICTS,
    Claim,
    claims,
    claims_frame,
    counts as claim_counts,
    generated_share,
    paper_claims,
    paper_comparison,
    rules_frame,
)
from analysis.latency import paper_points  # noqa: F401
from analysis.corpusviews import (  # noqa: F401
    BENCHMARK,
    COMMITS_PREFIX,
    GIT_HISTORY,
    SIZE_MEASURES,
    USER_PAIRS,
    bound_cell,
    bounds_wide,
    case_sizes,
    corpus_bounds,
    corpus_cases,
    corpus_coverage,
    corpus_group,
    kernel_label,
    optimal_table,
    real_vs_benchmarks,
    size_distribution,
    size_table,
    tokenization_wide,
)
from analysis.errors import ParamsError
from analysis.claims_summary import headline  # noqa: F401
from analysis.kernelviews import (  # noqa: F401
    RunEnvironmentView,
    break_even_n,
    latency_fits,
    latency_formulas,
    run_environment_view,
)
from analysis.layout import (  # noqa: F401
    CASE_COSTS,
    CASES,
    METRICS,
    PROGRAMS,
    SPANS,
    context_label,
    framing_view,
    pooling_label,
)
from analysis.layout import PAPER_NAMES as PAPER_CORPORA  # noqa: F401
from analysis.numbers import MISSING, fmt_ci, fmt_count, fmt_int, fmt_num, fmt_pct, fmt_x  # noqa: F401
from analysis.outputs import (  # noqa: F401
    bounds_frame,
    latency_model,
    metrics,
    pick,
    pick_framing,
    pick_view,
    read_parquet_output,
    table,
)
from analysis.pages import (  # noqa: F401
    STAND_IN_NOTE,
    VERDICT_COLOURS,
    Html,
    esc,
    lead,
    mark_stand_in,
    note,
    pivot_wide,
    pre,
    show,
    summary_table,
)
from analysis.params import DEFAULT_PARAMS  # noqa: F401
from analysis.provenance import PARAMS_ENV, Provenance, cpu_model, provenance, provenance_html  # noqa: F401

# ---------------------------------------------------------------- kernels: roofline


def roofline_metrics(metrics_dir: Path = METRICS) -> dict | None:
    """kernels.json's `roofline` block (written by `kernels fit`), or None when not recorded."""
    try:
        roof = metrics("kernels", metrics_dir).get("roofline")
    except ParamsError:
        return None
    return roof if isinstance(roof, dict) else None


def gpu_reference(path: Path = PAPER) -> dict:
    """The paper's GPU from its datasheet (paper_claims.json `_gpu_reference`; not measured here), with
    the paper's own top kernel ratio and the N it was measured at."""
    from analysis.claims import paper_gpu

    return paper_gpu(path)


def _ceiling(n: int, stream_gbps: float, gflops: float, bytes_per_param: float) -> float:
    from analysis.roofline import copy_speedup_ceiling  # the one owner of the roofline theorem

    return copy_speedup_ceiling(n, stream_gbps, gflops, bytes_per_param)


def roofline_frame(roof: dict, gpu: dict) -> pl.DataFrame:
    """The two machines side by side: bandwidth, matmul throughput, ridge point and copy-speedup cap."""
    gpu_gflops = gpu["bf16_tflops"] * 1000
    return pl.DataFrame([
        {"machine": f"this machine ({roof['dtype']}, measured)", "stream GB/s": roof["stream_gbps"],
         "matmul GFLOP/s": roof["matmul_gflops_float32" if roof["dtype"] == "float32" else "matmul_gflops_bfloat16"],
         "ridge FLOP/byte": roof["ridge_flops_per_byte"], "ceiling at N=" + str(roof["n_max"]): roof["ceiling"],
         "measured at N=" + str(roof["n_max"]): roof["measured_at_n_max"]},
        {"machine": f"{gpu['device']} (bf16, datasheet)", "stream GB/s": float(gpu["hbm_gbps"]),
         "matmul GFLOP/s": float(gpu_gflops), "ridge FLOP/byte": gpu_gflops / gpu["hbm_gbps"],
         "ceiling at N=" + str(roof["n_max"]): _ceiling(roof["n_max"], gpu["hbm_gbps"], gpu_gflops, 2),
         "measured at N=" + str(roof["n_max"]): gpu["paper_top"] if roof["n_max"] == gpu["paper_top_n"] else None},
    ])


def roofline_ceilings(roof: dict, gpu: dict, ns: Iterable[int]) -> pl.DataFrame:
    """Ceiling curves for the chart: n, ceiling, label (this machine measured; the paper's GPU)."""
    ns = sorted({int(n) for n in ns})
    compute = roof["ridge_flops_per_byte"] * roof["stream_gbps"]
    gpu_gflops = gpu["bf16_tflops"] * 1000
    return pl.DataFrame({
        "n": ns + ns,
        "ceiling": [_ceiling(n, roof["stream_gbps"], compute, roof["bytes_per_param"]) for n in ns]
        + [_ceiling(n, gpu["hbm_gbps"], gpu_gflops, 2) for n in ns],
        "label": [f"roofline ceiling, this machine ({roof['dtype']})"] * len(ns)
        + [f"roofline ceiling, {gpu['device']} (datasheet, bf16)"] * len(ns)})


def roofline_explanation(roof: dict | None, gpu: dict) -> Html:
    """Why CPU and GPU ratios differ, from the measured roofline: the explanation the numbers support,
    with what they do not explain marked as a hypothesis."""
    if roof is None:
        return note("<p><b>Roofline not recorded.</b> This kernel profile was written before the profiler measured "
                    "stream bandwidth and matmul throughput (kernels.profile.roofline), so the report cannot say "
                    "from measurements why CPU and GPU ratios differ. Rerun <code>copydecode kernels profile</code>.</p>")
    gpu_gflops = gpu["bf16_tflops"] * 1000
    gpu_ridge = gpu_gflops / gpu["hbm_gbps"]
    gpu_cap = _ceiling(roof["n_max"], gpu["hbm_gbps"], gpu_gflops, 2)
    measured = roof.get("measured_at_n_max")
    share = measured / roof["ceiling"] if measured and roof["ceiling"] else None
    paper_top = gpu["paper_top"]
    above = roof["n_max"] == gpu["paper_top_n"] and paper_top > gpu_cap
    return note(
        "<p><b>The explanation these measurements support.</b> A decode step reads every weight once and does two "
        "FLOPs per weight, {intensity} FLOP per byte in {dtype}: far below this machine's ridge point of {ridge} "
        "FLOP/byte (matmul {gflops} GFLOP/s over a stream copy of {stream} GB/s), so each step is bound by memory "
        "bandwidth. A prefill of N tokens does N times the FLOPs on the same bytes, so it stays almost as fast as one "
        "step until N reaches the ridge point times bytes per weight / 2, about {cap_n} here; beyond that it is "
        "compute-bound and T_ar/T_prefill stops growing. The roofline caps the ratio at N = {n} near {cap}; "
        "measured: {measured}{share}.</p>"
        "<p>On the paper's {gpu} (datasheet figures, not measured here: {gpu_bw} GB/s, {gpu_tf} TFLOP/s bf16), the "
        "ridge point is {gpu_ridge} FLOP/byte, so the same argument lets the ratio grow to about {gpu_cap} at "
        "N = {n}: the wider gap between compute and bandwidth is why GPU ratios keep rising with N where this "
        "CPU's flatten.</p>" + ("<p><b>Caveat:</b> the ratio measured here is above this run's cap, so these roofline "
                                "numbers understate the machine. <b>Hypothesis:</b> the throughput probe ran while other "
                                "work shared the cores (compare the reference workload above).</p>"
                                if share is not None and share > 1 else "") + ("<p><b>Hypothesis</b> (not tested here): the paper's {paper_top} at N = {n} is above "
                                "that cap, which the roofline alone does not explain; a GPU decode step of a small model "
                                "may be bound by per-step launch and framework overhead rather than weight bandwidth, "
                                "which makes T_ar larger than the roofline's.</p>" if above else ""),
        intensity=fmt_num(2 / roof["bytes_per_param"]), dtype=roof["dtype"], ridge=fmt_num(roof["ridge_flops_per_byte"]),
        gflops=fmt_num(roof["ridge_flops_per_byte"] * roof["stream_gbps"]), stream=fmt_num(roof["stream_gbps"]),
        cap_n=fmt_num(roof["ridge_flops_per_byte"] * roof["bytes_per_param"] / 2), n=roof["n_max"],
        cap=fmt_x(roof["ceiling"]), measured=fmt_x(measured),
        share=f" ({fmt_pct(share, 0)} of the cap)" if share is not None else "",
        gpu=gpu["device"], gpu_bw=fmt_int(gpu["hbm_gbps"]), gpu_tf=fmt_num(gpu["bf16_tflops"]),
        gpu_ridge=fmt_num(gpu_ridge), gpu_cap=fmt_x(gpu_cap), paper_top=fmt_x(paper_top))
