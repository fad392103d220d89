"""Every artifact path of the pipeline.

Paths are relative to the repository root (where `dvc repro` runs) and are declared identically in
dvc.yaml; nothing else in the code spells a path. The schema of each parquet file is documented in
the module that writes it (named beside each path). Which rows a pooled figure pools (the framing rule,
the paper's corpora, pools, pooling rules, corpus groups) is analysis.pooling's.
"""

from __future__ import annotations

from pathlib import Path


# ---------------------------------------------------------------- data (dvc-tracked, git-ignored)
DATA = Path("data")
CASES = DATA / "corpora/cases.parquet"                  # analysis.corpora.cases.cases_frame
PROBEEDIT_EDITS = DATA / "corpora/probeedit_edits.parquet"  # analysis.corpora.probeedit.EDITS_SCHEMA
COMMIT_CASES = DATA / "corpora/commits"                 # <corpus>.parquet per mined repository (cases schema)
PROGRAMS = DATA / "programs/programs.parquet"           # analysis.stages.programs
SPANS = DATA / "spans/spans.parquet"                    # analysis.coverage.spans.SPANS_SCHEMA
PER_CASE = DATA / "spans/coverage_per_case.parquet"     # analysis.coverage.spans.per_case_coverage
CASE_COSTS = DATA / "bounds/case_costs.parquet"         # analysis.bounds.case_costs
PERTURB_RESULTS = DATA / "perturb/results.parquet"      # analysis.perturb.run_perturbation
KERNELS_RAW = DATA / "kernels/raw.parquet"              # kernels_profile.measure.session.profile_run
KERNEL_CHECKPOINTS = DATA / "kernels/checkpoints"
E2E_MEASUREMENTS = DATA / "e2e/measurements.parquet"    # kernels_profile.stages.e2e
E2E_CHECKPOINTS = DATA / "e2e/checkpoints"
E2E_PRESETS = DATA / "e2e"                               # a preset run's folder: data/e2e/<preset>/ (copydecode e2e --preset)
PILOT_DIR = DATA / "pilot"
PILOT_RECORDS = PILOT_DIR / "records.parquet"           # kernels_profile.pilot.jobs.RECORD_SCHEMA
PILOT_LOSSES = PILOT_DIR / "losses.parquet"             # mode, seed, step, loss
PILOT_CURVE = PILOT_DIR / "curve.parquet"               # kernels_profile.pilot.jobs.CURVE_SCHEMA (teacher-forced, held-out)
PILOT_FORMATS = PILOT_DIR / "formats.parquet"           # analysis.pilot.formats.RECORD_SCHEMA (the edit-format check)
PILOT_CHECKPOINTS = PILOT_DIR / "checkpoints"           # adapters and finished evaluation jobs (untracked)
RIVALS_FORWARDS = DATA / "rivals/forwards.parquet"    # analysis.serving.forwards (+ prefill): per case and method
BATCHED_RAW = DATA / "kernels/batched.parquet"          # kernels_profile.measure.batched_session.STEP_SCHEMA
BATCHED_CHECKPOINTS = DATA / "kernels/batched_checkpoints"
REPLAY_STEPS = DATA / "serving/steps.parquet"           # analysis.stages.serving.STEP_COLUMNS: the sampled steps
REPLAY_RAW = DATA / "serving/replay.parquet"            # kernels_profile.stages.replay: every replayed timing
REPLAY_CHECKPOINTS = DATA / "serving/replay_checkpoints"
CORPUS_RECORDS = DATA / ".corpus"                       # analysis.pipeline.digest: <stage>.json per stage run (untracked)
RIVALS_PERCASE = DATA / "rivals/percase.parquet"      # analysis.rivals.table.percase_speedups, every kernel source
FORCING_SPANS = DATA / "grammar/forcing_spans.parquet"  # analysis.stages.forcing.SPAN_SCHEMA
TIMINGS = DATA / "timings"                              # run times of each stage (untracked)
SUMMARIES = DATA / "summaries"                          # each stage's full run summary (untracked; stdout gets one line)
MODELS_CACHE = Path("models")                           # tokenizers extracted from GGUF files

# ---------------------------------------------------------------- reports (committed)
REPORTS = Path("reports")
METRICS = REPORTS / "metrics"
TABLES = REPORTS / "tables"
FIGURES = REPORTS / "figures"
LATENCY_MODEL = REPORTS / "kernels/latency_model.json"  # kernels_profile.stages.fit
STEP_COST = REPORTS / "kernels/step_cost.json"          # analysis.latency.stepcost.to_document: every source's model
PILOT_SWEEP = REPORTS / "pilot/sweep"                   # kernels_profile.tools.pilot_sweep: one folder per tried config
TIMINGS_REPORT = REPORTS / "timings.json"               # every stage's last run time, gathered by the reports stage
FROZEN_KERNELS = REPORTS / "kernels/frozen"
PILOT_FROZEN = REPORTS / "pilot/frozen"                 # committed preset runs: <preset>/{metrics.json,run.json,...}
PILOT_DIAGNOSIS = REPORTS / "pilot/range_errors"          # analysis.pilot.diagnosis: the default run's .csv and .md
E2E_FROZEN = REPORTS / "e2e/frozen"                     # committed e2e preset runs: <preset>/{run.json,metrics.json,e2e_*.csv}
E2E_WIDE = "e2e-wide"                                   # the wide e2e preset the reports show beside the default
BUSY_BENCHMARK = REPORTS / "kernels/benchmark_busy"    # `copydecode bench busy`: .md and .json, quiet vs busy
BENCH_DIR = REPORTS / "bench"                           # `copydecode bench throughput`: throughput.json, .md
EXECUTED = REPORTS / "notebooks"
HTML = REPORTS / "html"
INDEX = REPORTS / "index.html"
CLAIMS_JSON = REPORTS / "claims.json"                 # analysis.claims.engine.claims_document: every claim and scope
PERCASE = REPORTS / "percase"                          # analysis.results.percase: the committed per-case tables of the run
SAMPLES = PERCASE / "samples.jsonl"                     # analysis.results.percase.sample_lines: one line per case and method
PERCASE_MANIFEST = PERCASE / "manifest.json"            # what each committed table was copied from, rows and bytes
HEADLINE_METRICS = Path("metrics")                      # analysis.present.headline: the dvc metrics, one short path per row

# ---------------------------------------------------------------- levels and labels
LEVELS = ("line", "token")


def context_label(context_mode: str, context: int | None) -> str:
    """The KV-cache context a bound was costed at: `c=256` (fixed) or `c = prompt + output so far` (running)."""
    return f"c={context}" if context_mode == "fixed" else "c = prompt + output so far"
