"""Every artifact path of the pipeline, and the one pooling rule.

Paths are relative to the repository root (where `dvc repro` runs) and are declared identically in
dvc.yaml; nothing else in the code spells a path. The schema of each parquet file is documented in
the module that writes it (named beside each path).

Pooling. A corpus with one framing only (ProbeEdit-S's "unit", CommitEdits' "file", a user's pairs)
joins every framing's pool: "pooled / body" is HEvalFix body cases plus every single-framing corpus,
the set the paper pools. `pool_rows` is the only implementation of that rule.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

# ---------------------------------------------------------------- data (dvc-tracked, git-ignored)
DATA = Path("data")
CASES = DATA / "corpora/cases.parquet"                  # analysis.corpora.cases_frame
PROBEEDIT_EDITS = DATA / "corpora/probeedit_edits.parquet"  # analysis.probeedit.EDITS_SCHEMA
PROGRAMS = DATA / "programs/programs.parquet"           # analysis.stages.programs
SPANS = DATA / "spans/spans.parquet"                    # analysis.spans.SPANS_SCHEMA
PER_CASE = DATA / "spans/coverage_per_case.parquet"     # analysis.spans.per_case_coverage
CASE_COSTS = DATA / "bounds/case_costs.parquet"         # analysis.bounds.case_costs
PERTURB_RESULTS = DATA / "perturb/results.parquet"      # analysis.perturb.run_perturbation
KERNELS_RAW = DATA / "kernels/raw.parquet"              # kernels_profile.profiler.profile
KERNEL_CHECKPOINTS = DATA / "kernels/checkpoints"
E2E_MEASUREMENTS = DATA / "e2e/measurements.parquet"    # kernels_profile.stages.e2e
E2E_CHECKPOINTS = DATA / "e2e/checkpoints"
PILOT_DIR = DATA / "pilot"
PILOT_RECORDS = PILOT_DIR / "records.parquet"           # kernels_profile.stages.pilot.RECORD_SCHEMA
PILOT_LOSSES = PILOT_DIR / "losses.parquet"             # mode, seed, step, loss
PILOT_CURVE = PILOT_DIR / "curve.parquet"               # kernels_profile.stages.pilot.CURVE_SCHEMA (teacher-forced, held-out)
PILOT_CHECKPOINTS = PILOT_DIR / "checkpoints"           # adapters and finished evaluation jobs (untracked)
TIMINGS = DATA / "timings"                              # run times of each stage (untracked)
MODELS_CACHE = Path("models")                           # tokenizers extracted from GGUF files

# ---------------------------------------------------------------- reports (committed)
REPORTS = Path("reports")
METRICS = REPORTS / "metrics"
TABLES = REPORTS / "tables"
FIGURES = REPORTS / "figures"
LATENCY_MODEL = REPORTS / "kernels/latency_model.json"  # kernels_profile.stages.fit
TIMINGS_REPORT = REPORTS / "timings.json"               # every stage's last run time, gathered by the reports stage
FROZEN_KERNELS = REPORTS / "kernels/frozen"
BUSY_BENCHMARK = REPORTS / "kernels/benchmark_busy"    # kernels_profile.busybench: .md and .json, quiet vs busy
NOTEBOOKS = Path("notebooks")
EXECUTED = REPORTS / "notebooks"
HTML = REPORTS / "html"
INDEX = REPORTS / "index.html"

# ---------------------------------------------------------------- pooling
POOLED = "pooled"
LEVELS = ("line", "token")
# The corpora the paper pools (its 482 cases); a second pooled row over them alone keeps the paper's
# pooled figures comparable when this suite pools more corpora (CommitEdits, a user's pairs).
PAPER_CORPORA = ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")
# Framings of corpora that have one framing only; each joins every multi-framing pool.
SINGLE_FRAMINGS = ("unit", "file", "pair")


def is_single_framing(framing: str) -> bool:
    return framing in SINGLE_FRAMINGS


def pool_framings(framings) -> list[str]:
    """The framings that get a pooled row: every multi-framing one, or the single ones if alone."""
    framings = set(framings)
    multi = sorted(f for f in framings if not is_single_framing(f))
    return multi or sorted(framings)


def pool_rows(frame: pl.DataFrame, framing: str) -> pl.DataFrame:
    """The rows of `frame` that make up the pool at `framing` (the framing's own rows and every
    single-framing corpus's rows)."""
    return frame.filter((pl.col("framing") == framing) | pl.col("framing").is_in(SINGLE_FRAMINGS))


def framing_filter(framing: str) -> pl.Expr:
    """Rows shown for `framing` in a per-corpus view: that framing and the single-framing corpora."""
    return pl.col("framing").is_in([framing, *SINGLE_FRAMINGS])
