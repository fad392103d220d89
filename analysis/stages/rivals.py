"""`copydecode rivals`: Copy-as-Decode head to head with what a user would pick instead, under every kernel.

Per case of the pool (params rivals.framing with the single-framing corpora) the rival simulation
(analysis.rivals.simulate) gives each method's forwards on the gold output's Qwen2.5 tokens: every member
each registered family names from params `rivals.<family group>` (analysis.rivals.methods.stage_methods):
AR, prompt lookup (the policies and draft budgets of rivals.pld), suffix decoding (the budgets of
rivals.suffix), the unified-diff and search/replace edit formats, and Copy-as-Decode at line and token level
with directive tokens decoded, jump-forwarded or free. Each method is priced per case under every kernel source of params rivals.kernel_sources and the
paired estimates of rivals.estimates (analysis.rivals.pricing, with the bounds' pricing rules: params
bounds.context_mode, bounds.step_cost, bounds.steady_max_n, bounds.extrapolate), then pooled
(analysis.rivals.table). Writes:

* data/rivals/forwards.parquet: per case and method its forwards (analysis.serving.forwards, plus `prefill`):
  the serving simulation's input;
* data/rivals/percase.parquet: per kernel source, case and method: seconds, AR's seconds, speedup, forwards;
* reports/tables/rivals.{csv,md}: per kernel source, method and corpus or pool: the pooled speedup with its
  case-bootstrap CI, forwards per case, gold tokens per forward, decode steps per case, extrapolated share;
* reports/tables/rivals_fastest.{csv,md}: per kernel source and corpus or pool, the fastest deployable method,
  its margin, and Copy-as-Decode's best deployable variant over the best rival with a paired interval;
* reports/figures/rivals.{png,svg}: method x corpus under the judged source, with CIs;
* reports/metrics/rivals.json: the claims row's figures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from analysis.bounds import CostSettings, cost_settings
from analysis.corpora import humanevalpack
from analysis.coverage.spans import DirectiveCounter, program_spans, prompt_tokens
from analysis.errors import ParamsError
from analysis.grammar.program import parse
from analysis.latency.model import LINEAR, MARGINAL
from analysis.latency.sources import (
    Estimate,
    Kernel,
    KernelSettings,
    estimates_from_params,
    kernel_settings,
    kernels_for,
    names_from_params,
    paired_kernel,
)
from analysis.layout import FIGURES, METRICS, RIVALS_FORWARDS, RIVALS_PERCASE, TABLES
from analysis.parallel.progress import progress, timed
from analysis.parallel.tables import joined_programs
from analysis.parallel.workers import ParallelSettings, map_cases, parallel_settings
from analysis.pipeline.config import Bootstrap, bootstrap_settings, tokenizer_spec
from analysis.pipeline.io import save_chart, write_json, write_parquet, write_table
from analysis.pipeline.params import choice, get, known_keys, positive_int
from analysis.pooling import pool_rows
from analysis.present import charts
from analysis.present.rivalcharts import crossover_chart
from analysis.rivals.forced import ForcedCounter
from analysis.rivals.methods import Method, families, stage_methods
from analysis.rivals.pricing import PRICE_COLUMNS, price
from analysis.rivals.settings import DraftSettings, draft_settings
from analysis.rivals.simulate import CaseInput, SimulationEnv, forward_row, method_forwards
from analysis.rivals.table import (
    best_pair_intervals,
    chart_methods,
    crossover,
    fastest,
    headline_pairs,
    percase_speedups,
    pooled_rows,
    summary_counts,
    with_band,
)
from analysis.serving.forwards import FORWARDS_SCHEMA, check_forwards
from analysis.text.lines import numbered, split_lines
from analysis.text.tokens import load_tokenizer

HELP = ("Copy-as-Decode against prompt lookup, suffix decoding and edit formats: each method's forwards per case, "
        "priced under every kernel source")
READS_WRITES = ("reads cases, programs and reports/kernels/latency_model.json (params rivals, bounds); writes "
                "data/rivals/forwards.parquet, data/rivals/percase.parquet, reports/tables/rivals*.*, "
                "reports/figures/rivals.{png,svg}, reports/figures/rivals_crossover.{png,svg}, "
                "reports/metrics/rivals.json")

GROUP_KEYS = ("framing", "kernel_sources", "estimates", "judged_source", "deployable_k_max", "bootstrap_resamples",
              "seed", "ci")
# the extrapolation band: the lowest and highest defensible rule past the profiled N (analysis.latency.model)
BAND_RULES = (MARGINAL, LINEAR)
SELECTION = ("the best rival and Copy-as-Decode's best variant are each the fastest deployable setting per corpus or "
             "pool, chosen after pricing among every setting simulated (k up to rivals.deployable_k_max; unbounded "
             "drafts and free directives are bounds): the paired interval is conditional on that choice")
LEVEL_UNITS = {"line": "lines", "token": "tokens"}
FORWARDS_COLUMNS = {**FORWARDS_SCHEMA, "prefill": pl.List(pl.Boolean)}


@dataclass(frozen=True)
class RivalsSettings:
    tokenizer: str
    framing: str
    prompt_overhead_tokens: int     # spans.prompt_overhead_tokens: the prompt every method starts from
    udiff_context: int              # formats.udiff_context
    methods: tuple[Method, ...]     # every family's members from params (rivals.pld, rivals.suffix, ...)
    drafts: DraftSettings
    kernel_sources: tuple[str, ...]
    estimates: tuple[Estimate, ...]
    judged_source: str
    cost: CostSettings
    k_max: int                      # rivals.deployable_k_max: the largest draft budget a deployable row may use
    bootstrap: Bootstrap
    parallel: ParallelSettings
    kernel: KernelSettings          # params `kernel`: the fitted model `fit` stands for


def settings(params: dict) -> RivalsSettings:
    known_keys(params, "rivals", GROUP_KEYS + tuple(f.group for f in families() if f.group))
    base = kernel_settings(params)
    sources = names_from_params(params, "rivals.kernel_sources")
    estimates = estimates_from_params(params, "rivals.estimates", sources)
    judged = get(params, "rivals.judged_source", str)
    if judged not in (*sources, *(e.name for e in estimates)):
        raise ParamsError(f"params: 'rivals.judged_source' {judged!r} is not one of rivals.kernel_sources or "
                          f"rivals.estimates")
    return RivalsSettings(
        tokenizer=tokenizer_spec(params),
        framing=choice(params, "rivals.framing", humanevalpack.FRAMINGS),
        prompt_overhead_tokens=positive_int(params, "spans.prompt_overhead_tokens", minimum=0),
        udiff_context=positive_int(params, "formats.udiff_context", minimum=0),
        methods=stage_methods(params, "rivals"), drafts=draft_settings(params, "rivals"), kernel_sources=sources, estimates=estimates, judged_source=judged,
        cost=cost_settings(params), k_max=positive_int(params, "rivals.deployable_k_max", minimum=1),
        bootstrap=bootstrap_settings(params, "rivals"), parallel=parallel_settings(params),
        kernel=base)


# ---------------------------------------------------------------- simulation (per case, in workers)

def case_input(row: dict, tokenizer, directives: DirectiveCounter, overhead: int) -> CaseInput:
    """One case's tokens, programs (spans and forcing per level) and both prompts' lengths (the rewrite prompt's
    unnumbered source, the program prompt's numbered one, each with the template overhead)."""
    src, tgt = tokenizer.encode(row["source"]), tokenizer.encode(row["target"])
    limits = {"line": len(split_lines(row["source"])), "token": len(src.ids)}
    programs = {}
    for level, unit in LEVEL_UNITS.items():
        program = parse(row[level])
        counter = ForcedCounter(tokenizer, unit, limits[level])
        programs[level] = (tuple(program_spans(program, src, tgt, directives)),
                           tuple(counter.of(op) for op in program.ops))
    return CaseInput(row["case_id"], row["corpus"], row["framing"], row["source"], row["target"], tuple(src.ids),
                     tuple(tgt.ids), prompt_tokens(src, overhead),
                     prompt_tokens(tokenizer.encode(numbered(row["source"])), overhead), programs)


def simulate_chunk(chunk, tokenizer, overhead: int, udiff_context: int, drafts: DraftSettings,
                   methods: tuple[Method, ...]) -> list[dict]:
    """The forwards rows of a chunk of cases (every method that keeps no cross-request state)."""
    directives, env = DirectiveCounter(tokenizer), SimulationEnv(tokenizer, udiff_context)
    rows = []
    for row in progress(chunk, "rivals", len(chunk)):
        case = case_input(row, tokenizer, directives, overhead)
        for method in methods:
            rows.append(forward_row(method, case, method_forwards(method, case, drafts, env)))
    return rows


def cross_request_rows(cases: pl.DataFrame, s: RivalsSettings, tokenizer, method: Method) -> list[dict]:
    """A member with a cross-request state (suffix decoding's response cache): one state per corpus, cases
    in case-id order (serial: each request sees the outputs of the ones before it)."""
    rows, directives = [], DirectiveCounter(tokenizer)
    for _, group in cases.sort("corpus", "case_id").group_by("corpus", maintain_order=True):
        env = SimulationEnv(tokenizer, s.udiff_context, method.spec.response_cache(method, s.drafts))
        for row in progress(group.iter_rows(named=True), f"{method.name}", group.height):
            case = case_input(row, tokenizer, directives, s.prompt_overhead_tokens)
            rows.append(forward_row(method, case, method_forwards(method, case, s.drafts, env)))
    return rows


def pool_cases(framing: str) -> pl.DataFrame:
    """One row per case of the pool with its source, target and line and token programs."""
    joined = pool_rows(joined_programs(), framing)
    if joined.height == 0:
        raise ParamsError(f"rivals.framing {framing!r}: no program of that pool (is the corpora stage's output empty?)")
    wide = joined.pivot(on="level", index=["case_id", "corpus", "framing", "source", "target"], values="program")
    missing = [level for level in LEVEL_UNITS if level not in wide.columns]
    if missing or wide.select(pl.any_horizontal(pl.col(list(LEVEL_UNITS)).is_null())).to_series().any():
        raise ParamsError(f"data/programs/programs.parquet lacks a {' or '.join(LEVEL_UNITS)}-level program for some "
                          "case; rerun `copydecode programs`")
    return wide.sort("corpus", "case_id", "framing")


def simulate(s: RivalsSettings, tokenizer) -> pl.DataFrame:
    cases = pool_cases(s.framing)
    per_case = tuple(m for m in s.methods if not m.cache)
    rows = map_cases(simulate_chunk, list(cases.iter_rows(named=True)), s.parallel, tokenizer,
                     s.prompt_overhead_tokens, s.udiff_context, s.drafts, per_case, desc="rivals")
    for method in (m for m in s.methods if m.cache):
        rows += cross_request_rows(cases, s, tokenizer, method)
    frame = pl.DataFrame(rows, schema=FORWARDS_COLUMNS)
    check_forwards(frame, "the rival simulation's forwards")
    return frame.sort("corpus", "case_id", "method")


# ---------------------------------------------------------------- pricing

def kernels(s: RivalsSettings) -> list[Kernel]:
    """Every kernel source of the settings, then the paired estimates."""
    plain = kernels_for(s.kernel, sources=s.kernel_sources)
    needed = sorted({n for e in s.estimates for n in (e.decode, e.prefill)} - set(s.kernel_sources))
    parts = {k.source: k for k in (plain + (kernels_for(s.kernel, sources=needed) if needed else []))}
    return plain + [paired_kernel(e.name, parts[e.decode], parts[e.prefill]) for e in s.estimates]


def priced(forwards: pl.DataFrame, s: RivalsSettings, cost: CostSettings | None = None) -> pl.DataFrame:
    """Per kernel source, case and method: seconds (under `cost`, the settings' own by default), AR's seconds, the
    speedup, the forward counts and the extrapolated forwards by cause."""
    counts = summary_counts(forwards)
    parts, chosen = [], kernels(s)
    for kernel in progress(chosen, "rivals pricing", len(chosen)):
        costs = price(forwards.select("prompt_tokens", "new_tokens", "emitted", "prefill"), kernel.model, cost or s.cost)
        parts.append(counts.with_columns(kernel_source=pl.lit(kernel.source),
                                         **{c: costs[c] for c in PRICE_COLUMNS}))
    return percase_speedups(pl.concat(parts))


def band_ratios(forwards: pl.DataFrame, s: RivalsSettings, judged: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Copy-as-Decode's best over the best rival, with its paired interval, under each rule past the profiled N of the
    band (BAND_RULES), the judged pricing's from its own per-case prices."""
    out, boot = {}, s.bootstrap
    for rule in BAND_RULES:
        percase = judged if rule == s.cost.prefill_past_n else priced(forwards, s, replace(s.cost, prefill_past_n=rule))
        out[rule] = best_pair_intervals(percase, s.k_max, boot.resamples, boot.seed, boot.ci)
    return out


def kernel_notes(s: RivalsSettings) -> dict[str, str]:
    return {k.source: k.built for k in kernels(s)}


def run(s: RivalsSettings) -> dict:
    with timed("rivals"):
        kernels(s)  # every kernel source resolved first: an unknown measured source is named now, not after the simulation
        tokenizer = load_tokenizer(s.tokenizer)
        forwards = simulate(s, tokenizer)
        write_parquet(forwards, RIVALS_FORWARDS)
        percase = priced(forwards, s)
        write_parquet(percase, RIVALS_PERCASE)
        boot = s.bootstrap
        table = pooled_rows(percase, boot.resamples, boot.seed, boot.ci)
        fast = with_band(fastest(table, percase, boot.resamples, boot.seed, boot.ci, s.k_max),
                         band_ratios(forwards, s, percase))
        flips = crossover(table, s.k_max)
        write_table(table, TABLES / "rivals")
        write_table(fast, TABLES / "rivals_fastest")
        write_table(flips, TABLES / "rivals_crossover")
        save_chart(charts.rivals_chart(table, s.judged_source, chart_methods(table["method"])), FIGURES / "rivals")
        save_chart(crossover_chart(table, flips, s.judged_source, s.k_max), FIGURES / "rivals_crossover")
        write_json({"judged_source": s.judged_source, "kernels": kernel_notes(s),
                    "cases": int(forwards["case_id"].n_unique()), "methods": sorted(set(forwards["method"])),
                    "prefill_past_n": s.cost.prefill_past_n, "band_rules": list(BAND_RULES),
                    "deployable_k_max": s.k_max, "selection": SELECTION,
                    "fastest": headline_pairs(fast)}, METRICS / "rivals.json")
    judged = fast.filter((pl.col("kernel_source") == s.judged_source) & (pl.col("pool") == "all"))
    return {"cases": int(forwards["case_id"].n_unique()), "methods": int(forwards["method"].n_unique()),
            "fastest (all corpora, judged source)": judged["fastest"][0] if judged.height else None}
