"""The kernel report's tables: the recorded run environment of the kernel timings, and the fitted
latency models with their formulas."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import polars as pl

from analysis.errors import ParamsError
from analysis.present.numbers import MISSING, fmt_num, fmt_pct


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
    threshold = env.get("noisy_drift")
    reasons = env.get("noisy_reasons") or []
    summary = ((f"NOISY ({'; '.join(reasons) or 'reference drift'}): the reference workload drifted by more than "
                f"{fmt_pct(threshold, 0)} during {len(env.get('noisy_pairs') or [])} of {env.get('pairs', MISSING)} "
                f"measured pairs (largest drift {fmt_pct(env.get('max_pair_drift'))}), or other processes kept more "
                "cores busy than the run left free; treat the ratios as indicative.") if noisy else
               (f"Quiet run: the reference workload moved by at most {fmt_pct(env.get('max_pair_drift'))} within a pair "
                f"(median {fmt_pct(env.get('median_pair_drift'))}), under the {fmt_pct(threshold, 0)} threshold"
                + (f", and other processes kept {fmt_num(max(env['other_busy_cores']))} cores busy at most"
                   if env.get("other_busy_cores") else "") + "."))
    load = env.get("load1") or {}
    if load:
        summary += f" One-minute load average between {fmt_num(load.get('min'))} and {fmt_num(load.get('max'))}."
    return RunEnvironmentView(True, noisy, summary, machine, pl.DataFrame(rows))




def latency_fits(model_doc: dict, model: str = "all") -> pl.DataFrame:
    """One row per fitted latency model (any schema of latency_model.json): key, form, fit quality."""
    from analysis.latency import from_document

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


def latency_formulas(model_doc: dict) -> pl.DataFrame:
    """The formula of each fitted form (the document's own `formulas`, else the library's)."""
    from analysis.latency import FORMULAS, from_document

    forms = sorted({m.form for m in from_document(model_doc)})
    formulas = model_doc.get("formulas") if isinstance(model_doc.get("formulas"), dict) else FORMULAS
    return pl.DataFrame({"form": forms, "formula": [formulas.get(f, FORMULAS.get(f, MISSING)) for f in forms]})



def break_even_n(kernel_table: pl.DataFrame, column: str = "speedup_strongest") -> int | None:
    """The smallest N at which one prefill of N tokens beats N decode steps (`column` > 1), over the
    rows given (one model and context, or all of them); None when prefill never wins."""
    wins = kernel_table.filter(pl.col(column) > 1).sort("n")
    return int(wins["n"][0]) if wins.height else None
