"""`copydecode e2e`: measured end to end on real models, one model at a time, on a seeded sample
stratified by output length (`e2e.stratify`). The settings are kernels_profile.e2e.settings', the
sample and the per-case jobs kernels_profile.e2e.job's, the measurement kernels_profile.e2e.methods', the
side checks on each model kernels_profile.e2e.checks', the report rows kernels_profile.e2e.summary's; this
module reads, calls and writes.

Outputs: data/e2e/measurements.parquet (one row per case, method and repeat, with each run's forward
log), reports/tables/e2e_speedup (per corpus, measured and predicted), e2e_pooled (the headline basis:
ratio of summed times per corpus, over the HEvalFix corpora and over every case, with case-bootstrap
CIs and the figure including the prompt's prefill), e2e_cases (per case and method, with the speculative
methods' acceptance histograms), the figure and reports/metrics/e2e.json. `copydecode e2e --preset NAME
[--out DIR]` overlays `e2e.presets.NAME` and writes the same tables, metrics.json and run.json
(command, commit, dates, wall-clock, machine) under DIR (default data/e2e/NAME/) and nothing under
reports/; DIR copied to reports/e2e/frozen/NAME/ is the frozen run the reports show beside the default
(analysis.results.e2e).

Each case's measurement, its own latency curve included, is checkpointed under data/e2e/checkpoints/,
keyed by a hash of everything that determines it (`CaseJob.key_parts`: model, weights, tokenizer, the
case's texts, programs and both prompts, the plan, the order seed, the curve's settings and the code
version), written atomically with the seconds it took and verified on load
(kernels_profile.runtime.checkpoints), so a rerun re-measures exactly what changed, an interrupted run
loses nothing, and the stage's run time says what a run from scratch would take (`from_scratch_s`).

torch's thread count (`e2e.threads`) is set before anything is measured and is part of every key.
The run environment (machine, threads, load, other processes' CPU use and a reference matmul before
the first case and after every case) is written beside the measurements (`<stem>.environment.json`);
its drift, contention verdict, noisy flag and noisy reasons go into the metrics. Each row carries the
`run_id` of the session that measured it.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone

import polars as pl

from analysis.corpora.cases import read_cases
from analysis.errors import CorpusError
from analysis.layout import CASES, E2E_CHECKPOINTS, E2E_MEASUREMENTS, FIGURES, METRICS, TABLES
from analysis.parallel.progress import log_above_bars, progress_bar, timed
from analysis.parallel.tables import joined_programs
from analysis.pipeline.console import RUN_NAME_KEY
from analysis.pipeline.io import save_chart, write_json, write_parquet, write_table
from analysis.pipeline.runrecord import RUN_JSON, run_record
from analysis.present import charts
from analysis.results.e2e import chart_methods
from kernels_profile.decode import maskbench
from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e import summary as e2e_summary
from kernels_profile.e2e.checks import model_checks
from kernels_profile.e2e.job import CHECKPOINT_VERSION, CaseJob, build_jobs, sample_cases
from kernels_profile.e2e.predict import LatencyCurve
from kernels_profile.e2e.settings import E2EModel, E2ESettings, settings  # noqa: F401 (the CLI's settings(params))
from kernels_profile.measure.contention import EnvironmentRecorder, RunEnvironment, environment_metrics
from kernels_profile.measure.machine import reference_workload
from kernels_profile.measure.sidecar import environment_path
from kernels_profile.runtime.checkpoints import (
    FromScratch,
    checkpoint_key,
    fingerprint,
    read_frame_checkpoint,
    read_json_checkpoint,
    write_frame_checkpoint,
    write_json_checkpoint,
)
from kernels_profile.runtime.hf import ModelTokenizer
from kernels_profile.runtime.loading import ModelAndTokenizer, load_model, set_threads
from analysis.text.tokens import load_tokenizer

# `copydecode e2e`: its help line and what it reads and writes (the CLI's --help)
HELP = "measured end to end: AR vs PLD vs Copy-as-Decode, constrained decoding"
READS_WRITES = ("reads cases, programs and the models' weights (params e2e); writes data/e2e/measurements.parquet, "
                "data/e2e/measurements.environment.json, reports/tables/e2e_*.*, "
                "reports/figures/e2e_speedup.{png,svg}, reports/metrics/e2e.json")
OWN_OUT = "names a preset run's folder"  # its --out (a one-off output root is refused)


def add_arguments(parser) -> None:
    """`e2e`'s own options (settings(params, preset, out)); `out` is `--out`, read by the CLI as raw_out."""
    parser.add_argument("--preset", default=None, help="a preset from params e2e.presets (e.g. e2e-wide)")
    parser.add_argument("--out", default=argparse.SUPPRESS, dest="raw_out", metavar="DIR",
                        help="with --preset: the run's folder (default data/e2e/<preset>); a one-off "
                             "output root is not supported here")


CHECKPOINT_COLUMNS = {"method", "repeat", "order_index", "seconds", "forwards", "tokens", "case_id", "run_id",
                      "predicted_ar_seconds", "predicted_seconds", "predicted", "extrapolated_spans", "directive_tokens",
                      "lossless_ok", "accept_hist", "prompt_tokens", "prompt_seconds", "draft_seconds", "new_tokens",
                      "emitted"}
CURVE_FIELDS = frozenset({"prefill", "ar", "contexts"})


def cases_with_instructions() -> pl.DataFrame:
    """Programs joined with their case texts and the case's edit instruction (null where a corpus has none)."""
    cases = read_cases(CASES)
    if "instruction" not in cases.columns:
        raise CorpusError(f"{CASES} has no instruction column; rerun `copydecode corpora`")
    table = joined_programs()
    return table.join(cases.select("case_id", "framing", "instruction"), on=["case_id", "framing"], how="left")


def measured_case(lm, job: CaseJob, s: E2ESettings, key: str, run_id: str,
                  scratch: FromScratch) -> tuple[pl.DataFrame, LatencyCurve]:
    """The job's rows and curve: read back from its checkpoint pair, or measured and written (the curve
    first: the frame is the unit's commit point)."""
    stem = f"{job.file_stem()}-{key}"  # model names hold dots (qwen2.5-0.5b): no with_suffix
    frame_path, curve_path = E2E_CHECKPOINTS / f"{stem}.parquet", E2E_CHECKPOINTS / f"{stem}.curve.json"
    found = read_frame_checkpoint(frame_path, key, rows=len(job.plan.methods) * job.repeats,
                                  columns=CHECKPOINT_COLUMNS, what="e2e", log=log_above_bars)
    curve = read_json_checkpoint(curve_path, key, fields=CURVE_FIELDS, what="e2e", log=log_above_bars)
    if found is not None and curve is not None:
        scratch.read_back(found.seconds)
        return found.content, LatencyCurve.from_json(curve.content)
    scratch.mark()  # a unit's seconds are its measurement's (a resumed run loads the model too)
    frame, measured = e2e.measure_job(lm, job, s, run_id)
    seconds = scratch.measured()
    write_json_checkpoint(measured.to_json(), curve_path, key, seconds)
    write_frame_checkpoint(frame, frame_path, key, seconds)
    return frame, measured


def run_model(choice: E2EModel, loaded: ModelAndTokenizer, tok: ModelTokenizer, s: E2ESettings, table: pl.DataFrame,
              bar, recorder: EnvironmentRecorder, scratch: FromScratch) -> tuple[dict, list[CaseJob]]:
    """The model's measurements and latency curves over its sample, and the jobs they measured."""
    qwen = load_tokenizer(s.tokenizer)
    encode = lambda text: loaded.hf_tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    jobs = build_jobs(choice, s, table, tok, encode, qwen)
    prints = fingerprint(choice.name, choice.weights)
    frames, curves = [], {}
    for job in jobs:
        bar.set_postfix_str(f"{choice.name} {job.case_id}")
        frame, curve = measured_case(loaded.lm, job, s, checkpoint_key(CHECKPOINT_VERSION, job.key_parts(s, prints)),
                                     recorder.run_id, scratch)
        recorder.sample()
        frames.append(frame)
        curves[job.case_id] = curve.to_json()
        bar.update(1)
    return {"measurements": pl.concat(frames, how="diagonal"), "latency_curves": curves}, jobs


def run_models(s: E2ESettings, table: pl.DataFrame, bar, recorder: EnvironmentRecorder, scratch: FromScratch) -> dict:
    """Per model, loaded once: its measurement, then its side checks (kernels_profile.e2e.checks)."""
    results = {}
    for choice in s.models:
        bar.set_postfix_str(f"loading {choice.name}")
        loaded = load_model(choice.name, choice.weights, choice.dtype, "cpu")
        tok = ModelTokenizer.from_hf(loaded.hf_tok, loaded.eos_ids, choice.name)
        measured, jobs = run_model(choice, loaded, tok, s, table, bar, recorder, scratch)
        results[choice.name] = {**measured, **model_checks(choice, loaded.lm, tok, jobs, s, table, bar)}
    return results


def lossless_summary(measurements: pl.DataFrame) -> dict:
    """Cases checked, cases whose every checked level passed, the worst relative logits difference."""
    per_case = measurements.group_by("case_id").agg(ok=pl.col("lossless_ok").first(),
                                                    diff=pl.col("lossless_rel_diff").first(),
                                                    levels=pl.col("lossless_levels").first())
    checked = per_case.filter(pl.col("ok").is_not_null())
    return {"cases": checked.height, "of": per_case.height, "ok": int(checked["ok"].sum()) if checked.height else 0,
            "levels": sorted({lv for v in checked["levels"].to_list() for lv in v.split(",") if lv}),
            "max_rel_diff": checked["diff"].max() if checked.height else None}


def mask_benchmark(s: E2ESettings) -> dict:
    """This suite's per-step mask cost on the vocabulary of params e2e.mask_cost.model, in the mask
    benchmark's own definition and statistic (kernels_profile.decode.maskbench.suite_costs; the decode stage
    runs the same benchmark beside llguidance), at the run's torch threads (params e2e.threads)."""
    m = s.mask
    programs = maskbench.line_programs(m.programs, m.lines_limit)
    return maskbench.suite_costs(maskbench.vocabulary(m.model), programs, m.lines_limit, m.apply_repeats,
                                 s.environment.threads)


def keyed(frame: pl.DataFrame, keys: tuple[str, ...], fields: tuple[str, ...]) -> dict:
    return {"/".join(str(r[k]) for k in keys): {f: r[f] for f in fields} for r in frame.iter_rows(named=True)}


def run_info(s: E2ESettings, started: datetime, seconds: float, environment: RunEnvironment) -> dict:
    """What a frozen preset run records of itself (run.json, analysis.pipeline.runrecord): the command, the
    commit (and whether the tree had uncommitted changes), UTC start and end, wall-clock seconds, the
    machine, and whether the run was noisy."""
    return run_record(f"copydecode e2e --preset {s.preset} --out {s.out}", started, seconds,
                      {k: environment.machine.get(k) for k in ("cpu_model", "usable_cores", "torch_threads")},
                      preset=s.preset, noisy=environment.noisy)


def write_outputs(s: E2ESettings, measurements: pl.DataFrame, environment: RunEnvironment, threads) -> dict:
    """The run's tables, raw rows and figure; returns the tables."""
    tables = {"e2e_speedup": e2e_summary.speedup_summary(measurements), "e2e_cases": e2e_summary.case_table(measurements),
              "e2e_pooled": e2e_summary.pooled_summary(measurements, s.ci_resamples, s.seed, s.ci_level)}
    folder = TABLES if s.out is None else s.out
    raw = E2E_MEASUREMENTS if s.out is None else s.out / E2E_MEASUREMENTS.name
    write_parquet(measurements, raw)
    write_json({**environment.to_json(), "threads": threads}, environment_path(raw))
    for name, frame in tables.items():
        write_table(frame, folder / name, digits=4 if name == "e2e_cases" else 3)
    if s.out is None:
        save_chart(charts.e2e_speedup(tables["e2e_pooled"], chart_methods(s.all_methods())), FIGURES / "e2e_speedup")
    return tables


def run(s: E2ESettings) -> dict:
    started_at, started = datetime.now(timezone.utc), time.perf_counter()
    run_name = "e2e" if s.preset is None else f"e2e-{s.preset}"  # a preset's time and summary are not the stage's
    with timed(run_name) as timing:
        scratch = FromScratch()
        threads = set_threads(s.environment.threads)  # before the recorder reads the thread count and any timing
        table = cases_with_instructions()
        total = sum(len(set(sample_cases(table, c.sample, s.framing, s.seed, s.stratify)["case_id"])) for c in s.models)
        rules = s.environment.rules
        recorder = EnvironmentRecorder(threshold=rules.noisy_drift, contention_slack=rules.contention_slack,
                                       reference=lambda: reference_workload(budget_s=rules.reference_budget_s))
        recorder.start()
        bar = progress_bar(total=total, desc="e2e" if s.preset is None else f"e2e {s.preset}", unit="case")
        results = run_models(s, table, bar, recorder, scratch)
        bar.close()
        environment = recorder.end()
        measurements = pl.concat([r["measurements"] for r in results.values()], how="diagonal")
        tables = write_outputs(s, measurements, environment, threads)
        constrained = [dict(r, model=m) for m, res in results.items() for r in res.get("constrained", [])]
        if constrained:
            write_table(pl.DataFrame(constrained).drop("program"), (TABLES if s.out is None else s.out) / "e2e_constrained",
                        digits=3)
        mask = mask_benchmark(s) if s.preset is None else None
        timing["from_scratch_s"] = scratch.seconds()
    metrics = {
        "speedups": keyed(tables["e2e_speedup"], ("model", "corpus", "method"),
                          ("label", "speedup_total", "predicted_total", "gap_total", "abs_error_total",
                           "ar_abs_error_total", "speedup_with_prompt", "speedup_median", "pair_ratio_median",
                           "pair_ratio_iqr", "pairs", "extrapolated_spans")),
        "pooled": keyed(tables["e2e_pooled"], ("model", "pool", "method"),
                        ("label", "cases", "ar_seconds", "seconds", "speedup_pooled", "ci_low", "ci_high",
                         "speedup_with_prompt", "abs_error", "tokens_per_forward")),
        "per_case_statistic": "lower median over repeats",
        "environment": environment_metrics(environment),
        "lossless": {m: lossless_summary(r["measurements"]) for m, r in results.items()},
        "hf_pld": {m: r.get("hf_pld", []) for m, r in results.items()},
        "constrained": {"cases": len(constrained), "valid": sum(r["valid"] for r in constrained),
                        "exact_match": sum(r["exact_match"] for r in constrained),
                        "programs": [{k: r[k] for k in ("model", "case_id", "valid", "exact_match", "program")}
                                     for r in constrained]},
        "latency_curves": {m: r["latency_curves"] for m, r in results.items()},
    }
    if mask is not None:
        metrics["mask_cost_qwen"] = mask
    if s.out is not None:  # a preset run: its folder holds everything a frozen copy needs
        write_json(metrics, s.out / "metrics.json")
        write_json(run_info(s, started_at, time.perf_counter() - started, environment), s.out / RUN_JSON)
    else:
        write_json(metrics, METRICS / "e2e.json")
    return {**{k: metrics[k] for k in ("pooled", "lossless", "environment")},
            **({RUN_NAME_KEY: run_name} if s.preset is not None else {})}
