"""The notebooks' one import (`from analysis.present import notebook as present`): the public names the
report templates use, gathered from the modules that own them. Only notebooks import this facade;
code imports the owner, so a stage's dvc.yaml deps stay the views it uses.

Owners: reading stage outputs analysis.results.outputs; number formatting analysis.results.numbers; tables
and page blocks (HTML) analysis.present.pages; provenance analysis.present.provenance; the paper's claims
and their verdicts analysis.claims (engine, verdict and one rule module per claim; torch-free, no HTML); corpus views analysis.present.corpusviews; kernel
run environment, latency fits and the roofline block analysis.present.kernelviews.
"""

from __future__ import annotations

from analysis.claims.bounds import paper_comparison  # noqa: F401
from analysis.claims.engine import claims, claims_frame, rules_frame  # noqa: F401
from analysis.claims.verdict import (  # noqa: F401
    BEYOND,
    DIFFERS,
    NOT_APPLICABLE,
    NOT_AT_SCALE,
    NOT_COMPARABLE,
    NOT_RUN,
    PAPER,
    REPRODUCED,
    VERDICTS,
    Claim,
    Scope,
    counts as claim_counts,
    paper_claims,
)
from analysis.latency.model import paper_points  # noqa: F401
from analysis.pooling import POOLINGS  # noqa: F401
from analysis.results.bounds import generated_share  # noqa: F401
from analysis.present.corpusviews import (  # noqa: F401
    BENCHMARK,
    COMMITS_PREFIX,
    FIELD_BENCHMARK,
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
    data_checks_table,
    data_decisions,
    kernel_label,
    optimal_table,
    real_vs_benchmarks,
    size_distribution,
    size_table,
    tokenization_note,
    tokenization_wide,
)
from analysis.present.kernelviews import (  # noqa: F401
    RunEnvironmentView,
    bounds_fit_caveats,
    break_even_n,
    floor_breaches,
    gpu_reference,
    latency_fits,
    latency_formulas,
    roofline_ceilings,
    roofline_explanation,
    roofline_frame,
    roofline_metrics,
    run_environment_view,
)
from analysis.layout import CASE_COSTS, CASES, METRICS, PROGRAMS, SPANS, context_label
from analysis.pooling import framing_view, pooling_label
from analysis.pooling import PAPER_NAMES as PAPER_CORPORA  # noqa: F401
from analysis.results.numbers import MISSING, fmt_ci, fmt_count, fmt_int, fmt_num, fmt_pct, fmt_x  # noqa: F401
from analysis.results.outputs import (  # noqa: F401
    bounds_frame,
    latency_model,
    metrics,
    pick,
    pick_framing,
    pick_view,
    read_parquet_output,
    table,
)
from analysis.present.pages import (  # noqa: F401
    STAND_IN_NOTE,
    VERDICT_COLOURS,
    Html,
    claim_details,
    esc,
    lead,
    mark_stand_in,
    note,
    pivot_wide,
    pre,
    show,
    summary_table,
)
from analysis.pipeline.params import DEFAULT_PARAMS  # noqa: F401
from analysis.present.provenance import PARAMS_ENV, Provenance, cpu_model, provenance, provenance_html  # noqa: F401
