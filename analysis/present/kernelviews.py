"""The kernel report's tables: the recorded run environment of the kernel timings, the fitted
latency models with their formulas, and the roofline block (this machine's measured roofline beside
the paper's GPU datasheet, and what it explains)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import polars as pl

from analysis.claims.verdict import PAPER, paper_gpu
from analysis.errors import ParamsError
from analysis.layout import METRICS, TABLES
from analysis.results.numbers import MISSING, fmt_int, fmt_num, fmt_pct, fmt_x
from analysis.results.outputs import metrics, optional_table
from analysis.present.pages import Html, esc, note
from analysis.latency.model import FORMULAS, from_document
from analysis.latency.roofline import copy_speedup_ceiling


@dataclass(frozen=True)
class RunEnvironmentView:
    """The recorded environment of the kernel timings, ready to show (`recorded` False: an old raw file)."""

    recorded: bool
    noisy: bool | None
    summary: str
    machine: pl.DataFrame
    runs: pl.DataFrame


def _flag_text(flags: dict, name: str) -> str:
    return "yes" if flags.get(name) else "no"


def run_environment_view(model_doc: dict) -> RunEnvironmentView:
    """From latency_model.json's `run_environment` (the profile's sidecar, copied by `kernels fit`)."""
    env = model_doc.get("run_environment")
    if not env:
        return RunEnvironmentView(
            False, None, "The run environment was not recorded: these timings come from a raw file written before the "
            "profiler recorded load, reference workload and roofline; rerun copydecode kernels profile to record it.",
            pl.DataFrame(), pl.DataFrame())
    m = env.get("machine") or {}
    machine = pl.DataFrame([{
        "CPU": m.get("cpu_model", MISSING), "avx2": _flag_text(m, "cpu_avx2"), "avx512f": _flag_text(m, "cpu_avx512f"),
        "avx512_bf16": _flag_text(m, "cpu_avx512_bf16"),
        "amx": "yes" if m.get("cpu_amx_tile") or m.get("cpu_amx_bf16") else "no",
        "cores (logical / usable)": f"{m.get('logical_cores', MISSING)} / {m.get('usable_cores', MISSING)}",
        "torch threads": str(m.get("torch_threads", MISSING))}])
    rows = []
    for run in env.get("runs", []):
        if "drift" not in run:
            rows.append({"run": run.get("run_id", MISSING), "started": MISSING, "load before": None, "load after": None,
                         "reference start ms": None, "reference end ms": None, "drift": None,
                         "status": f"not recorded ({run.get('missing', 'no session file')})"})
            continue
        d = run["drift"]
        rows.append({
            "run": run["run_id"],
            "started": datetime.fromtimestamp(run["started_at"], timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load before": float(run["load_before"][0]), "load after": float(run["load_after"][0]),
            "reference start ms": 1000 * d["reference_start_s"], "reference end ms": 1000 * d["reference_end_s"],
            "drift": float(d["drift"]), "status": "NOISY" if run.get("noisy") else "quiet"})
    noisy = bool(env.get("noisy"))
    summary = noisy_summary(env) if noisy else quiet_summary(env)
    load = env.get("load1") or {}
    if load:
        summary += f" One-minute load average between {fmt_num(load.get('min'))} and {fmt_num(load.get('max'))}."
    return RunEnvironmentView(True, noisy, summary, machine, pl.DataFrame(rows))




def noisy_summary(env: dict) -> str:
    """What tripped a NOISY run, in the sidecar's own words (a run's start-to-end reference drift, pairs whose
    reference drifted within the pair, other processes' load), then the pair check's result beside it, so the
    banner never reads as a pair count that contradicts the flag."""
    threshold, pairs = env.get("noisy_drift"), env.get("pairs", MISSING)
    reasons = env.get("noisy_reasons") or ["reason not recorded"]
    noisy_pairs = len(env.get("noisy_pairs") or [])
    within = f"{noisy_pairs} of {pairs}" if noisy_pairs else f"none of the {pairs}"
    return (f"NOISY, tripped by: {'; '.join(reasons)}. Within pairs: {within} measured pairs drifted past "
            f"{fmt_pct(threshold, 0)} (largest drift {fmt_pct(env.get('max_pair_drift'))}). A run is NOISY when the reference workload timed at a session's "
            f"start and end, or within one pair, moved by more than {fmt_pct(threshold, 0)}, or when other processes "
            "kept more cores busy than the run left free; treat the ratios as indicative.")


def quiet_summary(env: dict) -> str:
    threshold = env.get("noisy_drift")
    return (f"Quiet run: the reference workload moved by at most {fmt_pct(env.get('max_pair_drift'))} within a pair "
            f"(median {fmt_pct(env.get('median_pair_drift'))}), under the {fmt_pct(threshold, 0)} threshold"
            + (f", and other processes kept {busy_cores(max(env['other_busy_cores']))} cores busy at most"
               if env.get("other_busy_cores") else "") + ".")


def busy_cores(value: float) -> str:
    """Other processes' busy cores, to one decimal as the contention check states them: measured as the machine's
    busy cores minus this run's own, it dips just below 0 on a quiet machine, which reads as 0."""
    return f"{max(float(value), 0.0):.1f}"


def noisy_sources(metrics_doc: dict) -> str | None:
    """The NOISY line of reports/metrics/kernels.json (`run_environment`), for the index and the headline
    figures: None for a quiet or unrecorded run."""
    env = metrics_doc.get("run_environment") if isinstance(metrics_doc, dict) else None
    if not isinstance(env, dict) or not env.get("noisy"):
        return None
    return "; ".join(env.get("noisy_reasons") or []) or "reason not recorded"


def latency_fits(model_doc: dict, model: str = "all") -> pl.DataFrame:
    """One row per fitted latency model (any schema of latency_model.json): key, form, fit quality."""
    rows = []
    for m in from_document(model_doc):
        if model not in ("all", m.key.model):
            continue
        d = m.diagnostics
        rows.append({"model": m.key.model, "dtype": m.key.dtype, "device": m.key.device, "baseline": m.key.baseline,
                     "form": m.form, "ar_r2": (d.get("ar") or {}).get("r2"), "prefill_r2": (d.get("prefill") or {}).get("r2"),
                     "ar_holdout_max_error": (d.get("ar") or {}).get("holdout_max_rel_error"),
                     "prefill_holdout_max_error": (d.get("prefill") or {}).get("holdout_max_rel_error")})
    if not rows:
        raise ParamsError(f"latency model has no fit for model {model!r}")
    return pl.DataFrame(rows).sort("model", "baseline", "form")


def fit_caveats(fits: pl.DataFrame, bounds: pl.DataFrame, form: str | None) -> Html:
    """A comment under the fit-quality table on every fit with a negative r² that a bound is priced with:
    the kernel sources of the bounds table (`bounds`: reports/tables/bounds.csv) at the form the bounds use
    (`form`: reports/metrics/bounds.json latency_form). Empty when none."""
    if not fits.height or not bounds.height or form is None:
        return Html("")
    used = bounds.select("kernel_source", "baseline", "model", "dtype", "device").unique()
    bad = (fits.filter((pl.col("form") == form) & ((pl.col("ar_r2") < 0) | (pl.col("prefill_r2") < 0)))
           .join(used, on=["model", "dtype", "device", "baseline"], how="inner").sort("kernel_source"))
    if not bad.height:
        return Html("")
    items = "".join(
        "<li>{}: {}</li>".format(esc(r["kernel_source"]), esc(", ".join(
            f"{side} r² {fmt_num(r[f'{side}_r2'])} (hold-out error up to {fmt_pct(r[f'{side}_holdout_max_error'], 0)})"
            for side in ("ar", "prefill") if r[f"{side}_r2"] is not None and r[f"{side}_r2"] < 0)))
        for r in bad.iter_rows(named=True))
    return Html(
        f"<div class='cd-note'><p><b>Negative r² in fits the bounds use</b> (form <code>{esc(form)}</code>, "
        "<code>kernel.latency_form</code>): r² below 0 means the fitted curve predicts the repeats worse than their "
        "mean. Where the measured time barely changes with N (an eager GPU prefill is host-bound, 22-35 ms whatever N), "
        "the repeat-to-repeat noise is all there is to explain, so the bounds priced with these sources rest on a "
        f"flat, noisy curve: read them with the hold-out error beside them.</p><ul>{items}</ul></div>")


def bounds_fit_caveats(fits: pl.DataFrame, tables: Path = TABLES, metrics_dir: Path = METRICS) -> Html:
    """`fit_caveats` against this run's bounds (reports/tables/bounds.csv, reports/metrics/bounds.json); empty
    when the bounds stage has not run."""
    bounds = optional_table("bounds", tables)
    path = Path(metrics_dir) / "bounds.json"
    if bounds is None or not path.is_file():
        return Html("")
    import json

    return fit_caveats(fits, bounds, json.loads(path.read_text()).get("latency_form"))


def floor_breaches(roofline: pl.DataFrame) -> Html:
    """A note naming each measured point faster than its physical floor (a share of floor above 1, in
    reports/tables/kernel_roofline.csv). On a datasheet roof that is a measurement error; on this machine's
    measured roof it means the peak was measured low (the throughput probe shared the cores). Empty when none."""
    if not roofline.height or "prefill_share_of_floor" not in roofline.columns:
        return Html("")
    over = roofline.filter((pl.col("prefill_share_of_floor") > 1) | (pl.col("ar_share_of_floor") > 1))
    if not over.height:
        return Html("")
    points = "; ".join(
        f"{r['kernel_source']} c={r['context']} N={r['n']}: "
        + (f"prefill {fmt_num(r['prefill_ms'])} ms against a floor of {fmt_num(r['prefill_floor_ms'])} ms"
           if r["prefill_share_of_floor"] > 1 else
           f"AR step {fmt_num(r['ar_step_ms'])} ms against a floor of {fmt_num(r['step_floor_ms'])} ms")
        for r in over.head(6).iter_rows(named=True))
    more = f" and {over.height - 6} more" if over.height > 6 else ""
    measured = over.filter(pl.col("roof_source").str.starts_with("measured"))
    why = ("The floors of this machine come from the peak bandwidth and matmul throughput its own profile measured; "
           "a point under its floor means that peak was measured low (the probe ran while other work shared the cores), "
           "not that the kernel beat physics: the ceilings below understate this machine."
           if measured.height else
           "These floors come from datasheet figures: a point under them is a measurement or bookkeeping error.")
    return Html(f"<div class='cd-note'><p><b>{over.height} measured point{'s' if over.height != 1 else ''} "
                f"faster than the floor.</b> {esc(points)}{esc(more)}. {esc(why)}</p></div>")


def latency_formulas(model_doc: dict) -> pl.DataFrame:
    """The formula of each fitted form (the document's own `formulas`, else the library's)."""
    forms = sorted({m.form for m in from_document(model_doc)})
    formulas = model_doc.get("formulas") if isinstance(model_doc.get("formulas"), dict) else FORMULAS
    return pl.DataFrame({"form": forms, "formula": [formulas.get(f, FORMULAS.get(f, MISSING)) for f in forms]})



def break_even_n(kernel_table: pl.DataFrame, column: str = "speedup_strongest") -> int | None:
    """The smallest N at which one prefill of N tokens beats N decode steps (`column` > 1), over the
    rows given (one model and context, or all of them); None when prefill never wins."""
    wins = kernel_table.filter(pl.col(column) > 1).sort("n")
    return int(wins["n"][0]) if wins.height else None


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
    return paper_gpu(path)


def _ceiling(n: int, stream_gbps: float, gflops: float, bytes_per_param: float) -> float:
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
