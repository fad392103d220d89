"""The README's Results section, generated from the stage outputs (reports/metrics/*.json and
reports/tables/*.csv) between the markers `<!-- results:start -->` and `<!-- results:end -->`.

Nothing in the block is typed by hand: each figure is formatted from a stage output by the same
helpers the reports use (analysis.present.notebook), so the README cannot drift from the metrics.
tests/analysis/present/test_readme.py regenerates the block from the COMMITTED outputs (read from git)
and compares it with the committed README, so a user's own `dvc repro` (with this machine's timings)
followed by `python -m pytest` passes; the maintainers' check of the workspace is `copydecode readme --check`.

README.md and reports/timings.json are tracked source files, so no `dvc repro` stage writes them
(a stage that rewrote them would change tracked files behind dvc's back, and declaring README.md as a
stage output would let dvc delete or re-hash a hand-edited file). They are written by one command, run
after `dvc repro` and outside it: `copydecode readme` (analysis.tools.readme).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from analysis.claims.decision import Band, decide, reach
from analysis.claims.engine import read_claims
from analysis.claims.verdict import BEYOND
from analysis.errors import ParamsError
from analysis.layout import BENCH_DIR
from analysis.layout import BUSY_BENCHMARK as BUSY_BENCHMARK_STEM
from analysis.layout import CLAIMS_JSON, E2E_FROZEN, FROZEN_KERNELS, LATENCY_MODEL, METRICS, TABLES, TIMINGS_REPORT
from analysis.pooling import POOLED, framing_filter
from analysis.present import corpusviews, pages
from analysis.results import numbers
from analysis.results import outputs
from analysis.rivals.methods import parse_method
from analysis.pilot.formats import summary_sentence
from analysis.pilot.report import headline, training_note
from analysis.present.pages import clip_cell, grid_rows, section_href
from analysis.present.provenance import kernel_provenance, kernel_provenance_text
from analysis.results.e2e import HEVALFIX_POOL, leading, pooled_headline, respelled, stale_columns, stale_text
from analysis.rivals.families.ar import AR
from analysis.results.published import published_for

START, END = "<!-- results:start -->", "<!-- results:end -->"
README = Path("README.md")
BUSY_BENCHMARK = BUSY_BENCHMARK_STEM.with_suffix(".json")  # `copydecode bench busy`'s machine-readable output


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


CLAIM_LINKS = "reports/html/{}.html"  # each claim row links the report section that explains it
# An extension row ("beyond the paper") shows its first scopes here (the judged kernel source leads); the rest
# are in reports/claims.json, the index's grid and the linked section, so the README stays a first screen
README_EXTENSION_SCOPES = 1


def _claims_table(root: Path) -> list[str]:
    """The claims as the index's grid, read from reports/claims.json: one row per scope the paper states a
    figure for (analysis.present.pages.grid_rows), claim | scope | paper | ours | verdict | why | section;
    cells of at most ~200 characters, the method and caveats in the linked section."""
    try:
        cov = outputs.table("coverage", root / TABLES)
        line = cov.filter((pl.col("level") == "line") & framing_filter("body"))
        cases = {r["corpus"]: r["n_cases"] for r in line.iter_rows(named=True)}
    except ParamsError:
        cases = {}
    rows = ["| claim | scope | paper | ours | verdict | why | section |", "|---|---|---|---|---|---|---|"]
    shown: dict[str, int] = {}
    for r in grid_rows(read_claims(root / CLAIMS_JSON), cases):
        shown[r.claim] = shown.get(r.claim, 0) + 1
        if r.claim_verdict == BEYOND and shown[r.claim] > README_EXTENSION_SCOPES:
            if shown[r.claim] == README_EXTENSION_SCOPES + 1:
                link = f"[{r.section.partition('#')[0]}]({section_href(r.section, CLAIM_LINKS.format)})"
                rows.append(f"|  | and {r.rows - README_EXTENSION_SCOPES} more scopes in `{CLAIMS_JSON}` and the "
                            f"linked section |  |  |  |  | {link} |")
            continue
        claim = f"{r.claim} (**{r.claim_verdict}**)" if r.first else ""
        scope = f"**{r.scope}**" if r.judged and r.rows > 1 else r.scope
        link = f"[{r.section.partition('#')[0]}]({section_href(r.section, CLAIM_LINKS.format)})"
        rows.append(f"| {_cell(claim)} | {_cell(scope)} | {_cell(r.paper)} | {_cell(r.ours)} | {_cell(r.verdict)} | "
                    f"{_cell(clip_cell(r.reason))} | {link} |")
    return rows


def _claims_or_absent(root: Path) -> list[str]:
    try:
        return _claims_table(root)
    except ParamsError as exc:  # a root whose reports stage has not run (a one-off run stopped earlier)
        return [f"The claims have not been judged in this run ({exc})."]


def _kernel_setup(root: Path) -> str:
    try:
        lm = outputs.latency_model(root / LATENCY_MODEL)
    except ParamsError:
        return ""

    return kernel_provenance_text(kernel_provenance(lm, root / FROZEN_KERNELS))  # each source's own machine


def _threads(runs: dict) -> str:
    """The torch thread counts the benchmark's runs used, as one phrase ("1 thread", "1/2 threads")."""
    counts = set()
    for run in runs.values():
        for part in run.values():
            threads = part.get("threads") if isinstance(part, dict) else None
            counts.update(threads if isinstance(threads, list) else [] if threads is None else [threads])
    if not counts:
        return "threads not recorded"
    return "/".join(str(c) for c in sorted(counts)) + (" thread" if counts == {1} else " threads")


def _spread_sentence(root: Path) -> str:
    """The run-to-run spread a user should expect, from the quiet-vs-busy benchmark when one is recorded."""
    path = root / BUSY_BENCHMARK
    if not path.is_file():
        return ("Run-to-run spread: no quiet-vs-busy benchmark recorded (`copydecode bench busy`, "
                f"`{BUSY_BENCHMARK}`).")
    bench = json.loads(path.read_text())
    kernel, e2e = bench["kernel"], bench["e2e"]

    def verdict(part: dict) -> str:
        return "within" if part["passed"] else "outside"

    return (f"Run-to-run spread [`{BUSY_BENCHMARK}`]: the same kernel profile and e2e run on a quiet machine and "
            f"beside a busy loop pinned to one core ({_threads(bench['runs'])}) gave per-pair kernel ratios "
            f"(N = {', '.join(str(n) for n in kernel['ns'])}) at most {numbers.fmt_pct(kernel['max_abs_change'])} apart "
            f"({verdict(kernel)} the {numbers.fmt_pct(kernel['tolerance'], 0)} tolerance) and e2e line-program ratios "
            f"at most {numbers.fmt_pct(e2e['max_abs_change'])} apart ({verdict(e2e)} "
            f"{numbers.fmt_pct(e2e['tolerance'], 0)}); expect differences of this size between runs on a shared CPU.")


def _e2e_table(root: Path) -> list[str]:
    """One row per model and pool of e2e_pooled.csv (the HEvalFix pool and every case; the HEvalFix pool only
    where it holds fewer cases than every case: each corpus's rows are on the e2e page), one column per method
    in headline order (directives decoded first; prompt lookup at its standard policy and best k): the pooled
    speedup, its case-bootstrap CI, and the prediction from each case's own curve."""
    pooled = respelled(outputs.table("e2e_pooled", root / TABLES))
    if stale_columns(pooled):
        return [stale_text(stale_columns(pooled)) + "."]
    ar = pooled.filter(pl.col("method") == AR).select("model", "pool", "cases")
    everything = ar.filter(pl.col("pool") == POOLED)
    all_cases = dict(zip(everything["model"], everything["cases"]))
    ar = ar.filter((pl.col("pool") == POOLED) | ((pl.col("pool") == HEVALFIX_POOL)
                                                 & (pl.col("cases") < pl.col("model").replace_strict(all_cases, default=0))))
    if everything.height == 0:
        return []
    methods = [name for name, _ in leading(pooled, everything["model"][0], POOLED)]
    rows = ["| model, pool | " + " | ".join(_cell(parse_method(m).short) for m in methods) + " |",
            "|---|" + "---|" * len(methods)]
    for r in ar.iter_rows(named=True):
        one = pooled.filter((pl.col("model") == r["model"]) & (pl.col("pool") == r["pool"]))
        cells = []
        for method in methods:
            m = one.filter(pl.col("method") == method)
            if m.height == 0:
                cells.append(numbers.MISSING)
                continue
            row = m.row(0, named=True)
            ci = f" ({numbers.fmt_x(row['ci_low'])}-{numbers.fmt_x(row['ci_high'])})" if row["ci_low"] is not None else ""
            pred = f" [{numbers.fmt_x(row['predicted_pooled'])}]" if row["predicted_pooled"] is not None else ""
            cells.append(numbers.fmt_x(row["speedup_pooled"]) + ci + pred)
        pool = pages.mark_stand_in(pl.DataFrame({"corpus": [r["pool"]]}))["corpus"][0]
        label = f"{r['model']}, {pool}"
        rows.append(f"| {_cell(label)} ({r['cases']} {'case' if r['cases'] == 1 else 'cases'}) | " + " | ".join(cells) + " |")
    return rows


def _fmt_us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 100 else f"{us:.2f} us"


def _e2e_pooled_sentence(root: Path) -> str:
    """The e2e headline (analysis.results.e2e.pooled_headline): the default run's HEvalFix and all-case pools,
    directives decoded first, and beside it the committed frozen e2e-wide run (or "not yet run")."""
    return ("Pooled (total AR time over total method time, case-bootstrap 95% CI in brackets): "
            + pooled_headline(respelled(outputs.table("e2e_pooled", root / TABLES)), root / E2E_FROZEN) + ".")


def _e2e_sentences(root: Path) -> list[str]:
    m = outputs.metrics("e2e", root / METRICS)
    out = []
    lossless = m.get("lossless") or {}
    if lossless:
        worst = max(v["max_rel_diff"] for v in lossless.values())
        ok = sum(v["ok"] for v in lossless.values())
        total = sum(v["cases"] for v in lossless.values())
        of = sum(v.get("of", v["cases"]) for v in lossless.values())
        levels = sorted({lv for v in lossless.values() for lv in v.get("levels", [])})
        out.append(f"The executor's final logits match one-token steps over the same sequence on {ok}/{total} checked "
                   f"cases of {of}{' (' + ', '.join(levels) + ' programs)' if levels else ''} "
                   f"(max relative difference {worst:.1e}).")
    for model, runs in sorted((m.get("hf_pld") or {}).items()):
        for r in runs:
            prompt = f" on the {r['prompt']} prompt" if r.get("prompt") else ""
            out.append(f"Output identity check (the model writing its own output, not a speed reference): transformers' "
                       f"`generate(prompt_lookup_num_tokens=k)` gave {'the same' if r['identical_output'] else 'a different'} "
                       f"output as plain greedy `generate` for {model} on {r['case_id']}{prompt}, at "
                       f"{numbers.fmt_x(r['speedup'], 2)} its speed.")
    c = m.get("constrained")
    if c:
        out.append(f"Grammar-constrained generation with a model untrained for the format: {c['valid']}/{c['cases']} "
                   "programs are valid, which the FSM guarantees by construction (a property of the mask, not a model "
                   f"result); the model's result is {c['exact_match']}/{c['cases']} exact match.")
    mask = _mask_sentence(root)
    if mask:
        out.append(mask)
    return out


def _mask_sentence(root: Path) -> str:
    """The decoder's per-step mask cost beside llguidance, from the decode stage's benchmark table."""
    try:
        table = outputs.table("mask_benchmark", root / TABLES)
    except ParamsError:
        return ""
    parts = []
    for vocab in table["vocabulary"].unique(maintain_order=True).to_list():
        rows = {r["side"]: r for r in table.filter(pl.col("vocabulary") == vocab).iter_rows(named=True)}
        ours, theirs = rows.get("ours"), rows.get("llguidance (full)")
        if ours is None or theirs is None:
            continue
        parts.append(f"{vocab} vocabulary: ours {_fmt_us(ours['cold_p50_us'])} (p99 {_fmt_us(ours['cold_p99_us'])}) "
                     f"vs llguidance {_fmt_us(theirs['cold_p50_us'])} (p99 {_fmt_us(theirs['cold_p99_us'])}) per step, "
                     f"applying a cached mask to a logits row {_fmt_us(ours['apply_p50_us'])}")
    if not parts:
        return ""
    return ("FSM mask per decoding step [decode], first visit of each state, p50, beside llguidance on the same grammar: "
            + "; ".join(parts) + " (`reports/tables/mask_benchmark.md`).")


def _pilot_sentence(root: Path) -> str:
    """Claim 7's pilot in one sentence, from reports/metrics/pilot.json (analysis.pilot.report.headline)."""
    try:
        m = outputs.metrics("pilot", root / METRICS)
    except ParamsError:
        return "The fine-tuning pilot [pilot] has not been run."
    figures = "; ".join(f"{what} {value}" for what, value in headline(m))
    scale = m.get("scale") or f"{m['model']}, {m.get('steps')} LoRA steps"
    frozen = "".join(f" Frozen run of the `{name}` preset (`{f['run'].get('command', '?')}`, commit "
                     f"{f['run'].get('commit', '?')}, {f['run'].get('date', '?')}, {f['run'].get('minutes', '?')} "
                     f"minutes on {f['run'].get('machine', '?')}), {f['metrics'].get('method', '?')}: "
                     + "; ".join(f"{what} {value}" for what, value in headline(f["metrics"])) + "."
                     for name, f in sorted((m.get("frozen") or {}).items()))
    formats = summary_sentence(m.get("formats"))
    return (f"Fine-tuning pilot [pilot], {m['model']} with {m['method']}: {figures}.{frozen} Scale: {scale}; the paper "
            f"fine-tunes Qwen2.5-Coder-1.5B, so this is a pilot of the pipeline, not a replication. "
            f"{training_note(m)} (see the pilot report).{' ' + formats if formats else ''}")


def _formats_sentences(root: Path) -> list[str]:
    out = []
    try:
        ef = outputs.table("edit_formats", root / TABLES).filter(framing_filter("body")).sort("corpus")
        out.append("Copy programs (line level) cost " + ", ".join(
            f"{numbers.fmt_x(r['copy_line_vs_rewrite'], 2)} ({pages.mark_stand_in(pl.DataFrame({'corpus': [r['corpus']]}))['corpus'][0]})"
            for r in ef.iter_rows(named=True)) + " of a whole rewrite's tokens; a unified diff costs "
            + ", ".join(f"{numbers.fmt_x(r['unified_diff_vs_rewrite'], 2)}" for r in ef.iter_rows(named=True))
            + " in the same order (`reports/tables/edit_formats.md`).")
    except ParamsError:
        pass
    try:
        tb = outputs.table("token_boundaries", root / TABLES).filter(
            (pl.col("level") == "line") & framing_filter("body") & (pl.col("corpus") != POOLED)).sort("corpus")
        out.append("Line copies whose own tokens differ from the gold output's tokenization: " + ", ".join(
            f"{numbers.fmt_pct(r['mismatch_share'])} ({pages.mark_stand_in(pl.DataFrame({'corpus': [r['corpus']]}))['corpus'][0]})"
            for r in tb.iter_rows(named=True)) + " of copy spans.")
    except ParamsError:
        pass
    return out


def _throughput_sentence(root: Path) -> str | None:
    """The throughput benchmark's figures (`copydecode bench throughput`, reports/bench/throughput.json),
    or None when it has not been run here."""
    path = root / BENCH_DIR / "throughput.json"
    if not path.is_file():
        return None
    b = json.loads(path.read_text())
    runs = {r["n_jobs"]: r for r in b["runs"]}
    rates = ", ".join(f"{numbers.fmt_num(r['cases_per_second']['all_three'], 2)} cases/s with {n} worker{'' if n == 1 else 's'}"
                      for n, r in sorted(runs.items()))
    peaks = [r["peak_rss_mb_tree_sampled"] for r in runs.values() if "peak_rss_mb_tree_sampled" in r]
    peak = (f"; peak memory {numbers.fmt_num(max(peaks), 0)} MB (resident, this process and its workers, sampled)"
            if peaks else "")
    speedup = (f" (2 workers against 1 on the same {b['cases']:,} cases: {numbers.fmt_x(b['speedup_2_vs_1'], 2)})"
               if b.get("speedup_2_vs_1") is not None else "")
    estimate = {r["cores"]: r["hours_linear_estimate"] for r in b["extrapolation_estimate"]}
    hours = ", ".join(f"{numbers.fmt_num(h, 1)} h on {c} core{'' if c == 1 else 's'}" for c, h in sorted(estimate.items()))
    return (f"Throughput [bench throughput]: programs + spans + optimal on {b['cases']:,} synthetic CommitEdits cases "
            f"({b['cpu_count']} CPUs, load average {b['load_average_before'][0]} at the start): {rates}{speedup}{peak}. "
            f"ESTIMATE for 1,000,000 cases from the measured per-case time, linear scaling: {hours} "
            "(`reports/bench/throughput.md`).")


def _rivals_sentence(root: Path) -> str | None:
    """Under the judged kernel source, pooled then per corpus: Copy-as-Decode's best deployable variant against the
    fastest deployable rival, as the share of the rival's speedup it reaches with its paired interval and its band over
    the prefill rules past the profiled N, and the verdict (analysis.claims.decision.decide), from
    reports/tables/rivals_fastest.csv; None when the rivals stage has not run here."""
    try:
        fast = outputs.table("rivals_fastest", root / TABLES)
        facts = outputs.metrics("rivals", root / METRICS)
    except ParamsError:
        return None
    judged = facts["judged_source"]
    rows = fast.filter((pl.col("kernel_source") == judged) & (pl.col("corpus") != POOLED)).sort("corpus")
    pooled = fast.filter((pl.col("kernel_source") == judged) & (pl.col("pool") == "all"))
    if rows.height == 0 or pooled.height == 0 or "copy_over_rival_band_low" not in fast.columns:
        return None
    label = lambda name: parse_method(name).label  # noqa: E731

    def verdict(r: dict) -> str:
        band = Band.of(r, "copy_over_rival")
        word = decide((r["copy_over_rival_ci_low"], r["copy_over_rival_ci_high"]),
                      *((band.pair, band.intervals) if band else ()))
        return {"faster": "Copy-as-Decode faster", "slower": "the rival faster"}.get(word, word)

    def pair(r: dict) -> str:
        return (f"{label(r['best_copy'])} {numbers.fmt_x(r['best_copy_speedup'])} against {label(r['best_rival'])} "
                f"{numbers.fmt_x(r['best_rival_speedup'])}: {r['copy_over_rival']:.0%} "
                f"[{r['copy_over_rival_ci_low']:.0%}, {r['copy_over_rival_ci_high']:.0%}], band "
                f"{r['copy_over_rival_band_low']:.0%}-{r['copy_over_rival_band_high']:.0%} ({verdict(r)})"
                + "".join(f" (beside {figure.beside()})" for figure in published_for(r["corpus"])))

    p = pooled.row(0, named=True)
    parts = [f"{pages.mark_stand_in(pl.DataFrame({'corpus': [r['corpus']]}))['corpus'][0]}: {pair(r)}"
             for r in rows.iter_rows(named=True)]
    return (f"Against the alternatives [rivals], every method on the gold tokens (oracle programs, gold acceptance, "
            f"drafts from the context only, each method its own prompt), priced per case with the bounds' rules under "
            f"{judged} (prefills past the profiled N: {facts.get('prefill_past_n', 'marginal')}, never under the "
            f"compute floor). Over every corpus ({p['n_cases']:,} cases), Copy-as-Decode's best deployable variant "
            f"({label(p['best_copy'])}, {numbers.fmt_x(p['best_copy_speedup'])} over AR) "
            f"{reach(p['copy_over_rival'], p['copy_over_rival_ci_low'], p['copy_over_rival_ci_high'])} "
            f"({label(p['best_rival'])}, {numbers.fmt_x(p['best_rival_speedup'])}; draft budgets up to "
            f"{p['deployable_k_max']}, each chosen per corpus after pricing); over the prefill rules past the profiled N "
            f"{p['copy_over_rival_band_low']:.0%}-{p['copy_over_rival_band_high']:.0%}: {verdict(p)}. Per corpus, "
            f"Copy-as-Decode's best against the fastest deployable rival (speedup over AR; share reached [paired 95% CI], "
            f"band): {'; '.join(parts)}. Unbounded drafts are bounds; where prompt lookup's k overtakes Copy-as-Decode: "
            "`reports/tables/rivals_crossover.md`; every source and method: `reports/tables/rivals.md`.")


def _serving_sentence(root: Path) -> str | None:
    """Per kernel source at its headline budget: the headline Copy-as-Decode method (the gains table's mark) over AR
    and over the best rival at the headline concurrencies, compute-bound points said as such, and the replay check's
    error per step mix; None when serving has not run."""
    try:
        claim = outputs.table("serving_claim", root / TABLES)
        replay = outputs.metrics("serving_replay", root / METRICS)
    except ParamsError:
        return None
    if "headline" not in claim.columns:
        return None
    rows = claim.filter(pl.col("headline"))
    loads = sorted(int(c[len("vs_ar_c"):]) for c in claim.columns if c.startswith("vs_ar_c") and c[len("vs_ar_c"):].isdigit())

    def at(r: dict, c: int) -> str:
        over_rival = f"{numbers.fmt_x(r.get(f'vs_best_rival_c{c}'), 2)} over the best rival"
        if r.get(f"compute_bound_c{c}") and r.get(f"rival_tokens_per_output_c{c}") is not None:
            over_rival += (f" (compute-bound: set by tokens forwarded per output token, {r[f'tokens_per_output_c{c}']:.2f} "
                           f"against the rival's {r[f'rival_tokens_per_output_c{c}']:.2f})")
        return f"C={c} {numbers.fmt_x(r[f'vs_ar_c{c}'])} over AR, {over_rival}"

    parts = [f"{r['kernel_source']} (budget {r['max_num_batched_tokens']:,}): " + ", ".join(at(r, c) for c in loads)
             for r in rows.iter_rows(named=True)]
    method = parse_method(rows["method"][0]).label if rows.height else "Copy-as-Decode"
    mixes = replay.get("per_mix") or {}
    per_mix = ", ".join(f"{mix} {numbers.fmt_pct(v['mdape'])}" for mix, v in mixes.items())
    target = " (every step mix under 15%)" if replay.get("target_met") else ""
    noisy = (" The replay ran on a loaded machine (NOISY: reference drift or contention), so its error is not a finding."
             if replay.get("noisy") else "")
    return (f"Batched serving [serving], a vLLM-V1-style continuous-batching simulation of the corpora's edits "
            f"(each source at vLLM's default budget on its device; the H200 sources extrapolated from batch 1; each "
            f"method served its own prompt), the output tokens/s of {method}: {'; '.join(parts)}. Replayed as real "
            f"batched forwards on this CPU, the step-cost model's median absolute error is "
            f"{numbers.fmt_pct(replay.get('mdape'))}{target}{' (per step mix: ' + per_mix + ')' if per_mix else ''}; "
            f"`reports/tables/serving_replay_summary.md`.{noisy}")


GENERATED_NOTE = "<!-- generated by "  # the block's second line names the command; not a figure


def results_block(root: Path = Path(".")) -> str:
    """The Results section, markers included, from the stage outputs under `root`."""
    root = Path(root)
    lines = [
        START,
        GENERATED_NOTE + "`copydecode readme` from reports/metrics and reports/tables: do not edit by hand -->",
        "## Results (this repository's last `dvc repro`; full tables and charts in `reports/index.html`)",
        "",
        "Paper figures come from arXiv 2604.18170's abstract. Each verdict is computed from the stage outputs under "
        "the rule and thresholds stated in `analysis/data/paper_claims.json`, per scope (a corpus, a pool, a kernel "
        "family): a judged scope (bold) is reproduced or differs; *not comparable* means the device or corpus differs "
        "from the paper's, and only judged scopes decide a claim's verdict. Every claim and scope, machine-readable: "
        f"`{CLAIMS_JSON}`; how each verdict is reached: [docs/claims.md](docs/claims.md); the method and the figures "
        "beside the judged ones are in the linked section.",
        "",
        *_claims_or_absent(root),
        "",
        "\\" + pages.STAND_IN_NOTE,
    ]
    setup = _kernel_setup(root)
    if setup:
        lines += ["", setup]
    lines += ["", _spread_sentence(root)]
    try:
        e2e = _e2e_table(root)
        lines += ["", "Beyond the paper, measured end to end [e2e] on a real KV cache: the decode phase of teacher-forced "
                      "oracle programs and gold-acceptance drafters from a cached prompt, a seeded case sample; pooled "
                      "total AR time over total method time, its case-bootstrap 95% CI in parentheses, the prediction "
                      "from each case's own latency curve in brackets:", "", *e2e]
        lines += ["", _e2e_pooled_sentence(root), "", " ".join(_e2e_sentences(root))]
    except ParamsError:
        lines += ["", "The end-to-end stage [e2e] has not been run."]
    beyond = [s for s in (_rivals_sentence(root), _serving_sentence(root)) if s]
    if beyond:
        lines += ["", " ".join(beyond)]
    lines += ["", _pilot_sentence(root)]
    corpora = []  # the corpora, the edit formats and the throughput benchmark: one paragraph
    try:
        corpora.append("Corpora [corpora report]: " + corpusviews.real_vs_benchmarks(
            outputs.table("coverage", root / TABLES), outputs.bounds_frame(root / TABLES)))
    except ParamsError:
        pass
    corpora += _formats_sentences(root)
    throughput = _throughput_sentence(root)
    if throughput:
        corpora.append(throughput)
    if corpora:
        lines += ["", " ".join(corpora)]
    lines += _stage_times(root)
    lines.append(END)
    return "\n".join(lines) + "\n"


def _stage_times(root: Path) -> list[str]:
    """Each stage's run time in the last `dvc repro` (reports/timings.json, gathered by the reports stage)."""
    path = root / TIMINGS_REPORT
    if not path.is_file():
        return []
    import json

    times = json.loads(path.read_text())
    cells = [f"{name} {numbers.fmt_num(record['seconds'], 1)} s" + (
        f" ({numbers.fmt_num(record['from_scratch_s'], 1)} s from scratch)" if "from_scratch_s" in record else "")
        for name, record in sorted(times.items())]
    # a resumed stage counts what a run from scratch took, so the total is the from-scratch cost
    total = sum(record.get("from_scratch_s", record["seconds"]) for record in times.values())
    return ["", f"Each stage's last run time ({numbers.fmt_num(total / 60, 1)} minutes in all from scratch; a stage resumed from its "
                "checkpoints counts only what was left to measure, and says what a run from scratch took where its "
                "checkpoints recorded it; times vary between machines and with load): " + "; ".join(cells) + "."]


def readme_block(text: str) -> str:
    """The README's current results block, markers included."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ParamsError(f"README has no {START} ... {END} block")
    return text[start:end + len(END)] + "\n"


def _figures(block: str) -> list[str]:
    """The block's lines without its generated-by note (renaming the command stales no figure)."""
    return [line for line in block.splitlines() if not line.startswith(GENERATED_NOTE)]


def stale_lines(text: str, root: Path = Path(".")) -> list[str]:
    """Lines of the README's block that differ from what the stage outputs give (empty: up to date)."""
    import difflib

    current, fresh = (_figures(block) for block in (readme_block(text), results_block(root)))
    return [line for line in difflib.unified_diff(current, fresh, "README.md", "stage outputs", lineterm="", n=0)
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
