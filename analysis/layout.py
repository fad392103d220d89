"""Every artifact path of the pipeline, and the one pooling rule.

Paths are relative to the repository root (where `dvc repro` runs) and are declared identically in
dvc.yaml; nothing else in the code spells a path. The schema of each parquet file is documented in
the module that writes it (named beside each path).

Pooling. A corpus with one framing only (ProbeEdit-S's "unit", CommitEdits' "file", a user's pairs)
joins every framing's pool: "pooled / body" is HEvalFix body cases plus every single-framing corpus,
the set the paper pools. `pool_rows` is the only implementation of that rule; `framing_filter` and
`framing_view` are the rows a report shows for a framing, `paper_view` the paper's corpora, and the
labels (pooling rules, corpus groups, stand-in stars) are named here too.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

# ---------------------------------------------------------------- data (dvc-tracked, git-ignored)
DATA = Path("data")
CASES = DATA / "corpora/cases.parquet"                  # analysis.corpora.cases_frame
PROBEEDIT_EDITS = DATA / "corpora/probeedit_edits.parquet"  # analysis.probeedit.EDITS_SCHEMA
COMMIT_CASES = DATA / "corpora/commits"                 # <corpus>.parquet per mined repository (cases schema)
PROGRAMS = DATA / "programs/programs.parquet"           # analysis.stages.programs
SPANS = DATA / "spans/spans.parquet"                    # analysis.coverage.spans.SPANS_SCHEMA
PER_CASE = DATA / "spans/coverage_per_case.parquet"     # analysis.coverage.spans.per_case_coverage
CASE_COSTS = DATA / "bounds/case_costs.parquet"         # analysis.bounds.case_costs
PERTURB_RESULTS = DATA / "perturb/results.parquet"      # analysis.perturb.run_perturbation
KERNELS_RAW = DATA / "kernels/raw.parquet"              # kernels_profile.measure.profiler.profile
KERNEL_CHECKPOINTS = DATA / "kernels/checkpoints"
E2E_MEASUREMENTS = DATA / "e2e/measurements.parquet"    # kernels_profile.stages.e2e
E2E_CHECKPOINTS = DATA / "e2e/checkpoints"
E2E_PRESETS = DATA / "e2e"                               # a preset run's folder: data/e2e/<preset>/ (copydecode e2e --preset)
PILOT_DIR = DATA / "pilot"
PILOT_RECORDS = PILOT_DIR / "records.parquet"           # kernels_profile.stages.pilot.RECORD_SCHEMA
PILOT_LOSSES = PILOT_DIR / "losses.parquet"             # mode, seed, step, loss
PILOT_CURVE = PILOT_DIR / "curve.parquet"               # kernels_profile.stages.pilot.CURVE_SCHEMA (teacher-forced, held-out)
PILOT_CHECKPOINTS = PILOT_DIR / "checkpoints"           # adapters and finished evaluation jobs (untracked)
FORCING_SPANS = DATA / "grammar/forcing_spans.parquet"  # analysis.stages.forcing.SPAN_SCHEMA
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
PILOT_FROZEN = REPORTS / "pilot/frozen"                 # committed preset runs: <preset>/{metrics.json,run.json,...}
PILOT_DIAGNOSIS = REPORTS / "pilot/range_errors"          # analysis.pilot.diagnosis: the default run's .csv and .md
E2E_FROZEN = REPORTS / "e2e/frozen"                     # committed e2e preset runs: <preset>/{run.json,metrics.json,e2e_*.csv}
E2E_WIDE = "e2e-wide"                                   # the wide e2e preset the reports show beside the default
BUSY_BENCHMARK = REPORTS / "kernels/benchmark_busy"    # `copydecode bench busy`: .md and .json, quiet vs busy
BENCH_DIR = REPORTS / "bench"                           # `copydecode bench throughput`: throughput.json, .md
NOTEBOOKS = Path("notebooks")
EXECUTED = REPORTS / "notebooks"
HTML = REPORTS / "html"
INDEX = REPORTS / "index.html"
HEADLINE_METRICS = Path("metrics")                      # analysis.present.headline: the dvc metrics, one short path per row

# ---------------------------------------------------------------- pooling
POOLED = "pooled"
LEVELS = ("line", "token")
# The corpora the paper pools (its 482 cases); a second pooled row over them alone keeps the paper's
# pooled figures comparable when this suite pools more corpora (CommitEdits, a user's pairs).
PAPER_CORPORA = ("HEvalFix-Py", "HEvalFix-JS", "ProbeEdit-S")
# The paper's corpus names (as paper_claims.json spells them) -> this suite's corpus.
PAPER_NAMES = {"ProbeEdit": "ProbeEdit-S", "HEvalFix-Py": "HEvalFix-Py", "HEvalFix-JS": "HEvalFix-JS"}
STAND_IN = {"ProbeEdit-S": "ProbeEdit-S*"}  # this suite's stand-ins, starred where shown
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


def framing_view(framing: str) -> pl.Expr:
    """Rows a report shows for `framing`: its per-corpus rows, the single-framing corpora, and only
    that framing's pooled rows (a single-framing corpus's own framing has no pool of its own here)."""
    return framing_filter(framing) & ((pl.col("corpus") != POOLED) | (pl.col("framing") == framing))


def context_label(context_mode: str, context: int | None) -> str:
    """The KV-cache context a bound was costed at: `c=256` (fixed) or `c = prompt + output so far` (running)."""
    return f"c={context}" if context_mode == "fixed" else "c = prompt + output so far"


# Pooling rules of a pooled row (a table's `pooling` column; per-corpus rows have PER_CORPUS): the
# ratio of the summed costs over the pooled cases, or the mean of the per-corpus ratios.
PER_CORPUS, RATIO_OF_SUMS, MEAN_OF_CORPORA = "corpus", "ratio_of_sums", "mean_of_corpora"
POOLINGS = (RATIO_OF_SUMS, MEAN_OF_CORPORA)
POOLING_LABELS = {RATIO_OF_SUMS: "pooled (ratio of sums)", MEAN_OF_CORPORA: "pooled (mean of corpora)"}
# Which corpora a pooled row pools (a table's `pool` column): the paper's three (PAPER_CORPORA, its 482
# cases; the judged pool) or every corpus of this run.
PAPER_POOL, ALL_POOL = "paper", "all"
POOLS = (PAPER_POOL, ALL_POOL)
POOL_LABELS = {PAPER_POOL: "the paper's corpora (" + ", ".join(PAPER_CORPORA) + ")", ALL_POOL: "all corpora"}


def pooling_label(frame: pl.DataFrame) -> pl.DataFrame:
    """Name pooled rows by their pooling rule, so both rules can sit side by side on one axis."""
    if "pooling" not in frame.columns:
        return frame
    return frame.with_columns(
        corpus=pl.when(pl.col("corpus") == POOLED)
        .then(pl.col("pooling").replace_strict(POOLING_LABELS, default=pl.lit(POOLED)))
        .otherwise(pl.col("corpus")))


def paper_corpora() -> pl.Expr:
    """Rows of the corpora the paper reports on (ProbeEdit-S standing in for ProbeEdit)."""
    return pl.col("corpus").is_in(PAPER_CORPORA)


def paper_view(frame: pl.DataFrame, framing: str = "body") -> pl.DataFrame:
    """The per-corpus rows a paper claim compares: `framing` plus the single-framing corpora, the
    paper's corpora only, no pooled rows."""
    return frame.filter(framing_filter(framing) & paper_corpora() & (pl.col("corpus") != POOLED))


def pooled_share(rows: pl.DataFrame, column: str, weight: str = "n_cases") -> float | None:
    """A share (EM, coverage of cases) pooled over corpora: the case-weighted mean of the per-corpus
    shares, which equals the share over the pooled cases. None for no rows."""
    total = rows[weight].sum()
    return None if rows.height == 0 or not total else float((rows[column] * rows[weight]).sum() / total)


def star(corpus: str) -> str:
    """A corpus name as shown: a stand-in gets its star (ProbeEdit-S*)."""
    return STAND_IN.get(corpus, corpus)


# ---------------------------------------------------------------- corpus groups
BENCHMARK, GIT_HISTORY, USER_PAIRS = "benchmark", "git history", "your pairs"
COMMITS_PREFIX = "CommitEdits-"


def corpus_group(corpus: str, framing: str) -> str:
    """benchmark (the paper's corpora and their stand-in), git history (CommitEdits) or your pairs."""
    if corpus.startswith(COMMITS_PREFIX):
        return GIT_HISTORY
    return USER_PAIRS if framing == "pair" else BENCHMARK


def group_expr() -> pl.Expr:
    """`corpus_group` as a polars expression over the corpus and framing columns."""
    return (pl.when(pl.col("corpus").str.starts_with(COMMITS_PREFIX)).then(pl.lit(GIT_HISTORY))
            .when(pl.col("framing") == "pair").then(pl.lit(USER_PAIRS)).otherwise(pl.lit(BENCHMARK)))
