"""`copydecode e2e`: measured end to end on real models, one model at a time, on a seeded sample
stratified by output length (`e2e.stratify`).

Outputs: data/e2e/measurements.parquet, reports/tables/e2e_speedup (per corpus, measured and
predicted), e2e_pooled (the headline basis: ratio of summed times per corpus and over every case,
with the case count), e2e_cases (per case and method, with PLD's acceptance histogram), the figure and
reports/metrics/e2e.json. `copydecode e2e --preset NAME [--out DIR]` overlays `e2e.presets.NAME` and
writes the same tables, metrics.json and run.json (command, commit, dates, wall-clock, machine) under
DIR (default data/e2e/NAME/) and nothing under reports/; DIR copied to reports/e2e/frozen/NAME/ is the
frozen run the reports show beside the default (analysis.results.e2e).

Each case's measurement is checkpointed under data/e2e/checkpoints/, keyed by a hash of everything
that determines it (model, weights, dtype, tokenizer, the case's texts, programs and prompt, the
methods measured and their settings, the order seed, the prefill curve and the code version), written
atomically with the seconds it took and verified on load (kernels_profile.runtime.checkpoints), so a rerun after any
change re-measures exactly what changed, an interrupted run loses nothing, and the stage's run time
says what a run from scratch would take (`from_scratch_s`).

torch's thread count (`e2e.threads`) is set before anything is measured and is part of every key.
The run environment (machine, threads, load, other processes' CPU use and a reference matmul before
the first case and after every case) is written beside the measurements (`<stem>.environment.json`);
its drift, contention verdict, noisy flag and noisy reasons go into the metrics. Each row carries the
`run_id` of the session that measured it: cases read back from checkpoints were measured under an
earlier session's environment.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from analysis.present import charts
from analysis.corpora import humanevalpack
from analysis.corpora.cases import read_cases
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.confine import OutputRootError, confined
from analysis.errors import CorpusError, ParamsError
from analysis.pipeline.io import save_chart, write_json, write_parquet, write_table
from analysis.latency.model import FORMS
from analysis.layout import (
    CASES,
    E2E_CHECKPOINTS,
    E2E_MEASUREMENTS,
    E2E_PRESETS,
    FIGURES,
    METRICS,
    TABLES,
)
from analysis.pipeline.params import (
    check_slack,
    check_threads,
    check_threshold,
    choice,
    choices,
    did_you_mean,
    get,
    merge_preset,
    number,
    number_list,
    positive_int,
)
from analysis.grammar.program import parse
from analysis.parallel.progress import log_above_bars, progress_bar, timed
from analysis.parallel.tables import joined_programs
from kernels_profile.e2e import methods as e2e
from kernels_profile.e2e import predict as e2e_predict
from kernels_profile.e2e import summary as e2e_summary
from kernels_profile.decode import maskbench
from kernels_profile.decode.constrained import constrained_generation
from kernels_profile.measure.contention import EnvironmentRecorder, RunEnvironment
from kernels_profile.e2e.methods import LEVELS, MethodPlan, PldSettings
from kernels_profile.e2e.executor import MATCH_POLICIES
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, ModelTokenizer, prompt_ids
from kernels_profile.measure.machine import reference_workload
from kernels_profile.runtime.models import known_models
from kernels_profile.measure.session import environment_path
from kernels_profile.runtime.checkpoints import (
    FromScratch,
    checkpoint_key,
    fingerprint,
    read_frame_checkpoint,
    read_json_checkpoint,
    write_frame_checkpoint,
    write_json_checkpoint,
)
from kernels_profile.runtime.loading import ModelAndTokenizer, load_model, set_threads


@dataclass(frozen=True)
class E2EModel:
    name: str
    weights: str
    dtype: str
    sample: tuple[tuple[str, int | None], ...]  # (corpus, count); None = every case


@dataclass(frozen=True)
class E2ESettings:
    tokenizer: str
    framing: str
    seed: int
    stratify: str                     # how a corpus's sample is drawn (e2e.SAMPLE_STRATA)
    repeats: int
    models: tuple[E2EModel, ...]
    pld_ngram_max: int
    pld_policies: tuple[str, ...]
    pld_k: tuple[int, ...]            # every model
    pld_sweep_k: tuple[int, ...]      # and these too on the cases of pld_sweep_models in pld_sweep_corpora
    pld_sweep_models: tuple[str, ...]
    pld_sweep_corpora: tuple[str, ...]
    overhead_levels: tuple[str, ...]
    noisy_drift: float
    reference_budget_s: float
    threads: int | None               # torch threads while measuring; None: torch's default
    contention_slack: float           # busy cores beyond the free ones before the run is contended
    hf_pld_models: tuple[str, ...]
    hf_pld_cases: int
    hf_pld_max_new_tokens: int
    constrained_models: tuple[str, ...]
    constrained_corpus: str
    constrained_cases: int
    constrained_max_new_tokens: int
    prefill_grid: tuple[int, ...]
    ar_grid: tuple[int, ...]          # the AR step counts the latency curve keeps (up to ar_steps, and ar_steps)
    ar_steps: int
    fit: str                          # the latency curve's fit form (analysis.latency.model.FORMS)
    losslessness_tolerance: float
    lossless_cases: int
    mask_model: str                   # the registry model whose vocabulary the mask cost is measured on
    mask_programs: int
    mask_lines_limit: int
    mask_apply_repeats: int
    preset: str | None                # the e2e.presets entry overlaid on e2e, if any
    out: Path | None                  # a preset run's folder (every output goes there, none to reports/)

    def plan(self, model: str, corpus: str) -> MethodPlan:
        """The methods measured on `model`'s cases of `corpus`."""
        swept = model in self.pld_sweep_models and corpus in self.pld_sweep_corpora
        ks = self.pld_k + (tuple(k for k in self.pld_sweep_k if k not in self.pld_k) if swept else ())
        plds = tuple(PldSettings(k, self.pld_ngram_max, policy) for policy in self.pld_policies for k in ks)
        return MethodPlan(plds, self.overhead_levels)

    @property
    def hf_pld_k(self) -> int:
        """transformers' prompt lookup draft length: the first k every model measures."""
        return self.pld_k[0]


def _e2e_model(entry: Any, index: int) -> E2EModel:
    where = f"e2e.models[{index}]"
    if not isinstance(entry, dict) or not {"name", "weights", "dtype", "sample"} <= set(entry):
        raise ParamsError(f"params: {where} needs name, weights, dtype and sample; got {entry!r}")
    if not isinstance(entry["sample"], dict) or not entry["sample"]:
        raise ParamsError(f"params: {where}.sample must map corpus names to case counts, got {entry['sample']!r}")
    sample = []
    for corpus, count in entry["sample"].items():
        if count == "all":
            sample.append((str(corpus), None))
        elif isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            sample.append((str(corpus), count))
        else:
            raise ParamsError(f"params: {where}.sample.{corpus} must be an integer >= 1 or 'all', got {count!r}")
    for key in ("name", "weights", "dtype"):
        if not isinstance(entry[key], str):
            raise ParamsError(f"params: {where}.{key} must be a string, got {entry[key]!r}")
    if entry["name"] not in known_models():  # named here, before the lists that refer to the models by name
        raise ParamsError(f"params: '{where}.name': unknown model {entry['name']!r}; known: {', '.join(known_models())}"
                          + did_you_mean(entry["name"], known_models()))
    return E2EModel(entry["name"], entry["weights"], entry["dtype"], tuple(sample))


def settings(params: dict, preset: str | None = None, out: str | Path | None = None) -> E2ESettings:
    """e2e (and the tokenizer it encodes cases with), validated (the only reader of that group),
    overlaid with the `e2e.presets` entry `preset` when one is named: a preset run writes every output
    under `out` (default data/e2e/<preset>/) and nothing under reports/."""
    if out is not None and preset is None:
        raise ParamsError("copydecode e2e: --out names a preset run's folder; name the preset too (--preset e2e-wide)")
    group = merge_preset(params, "e2e", "e2e.presets", preset)
    group.pop("presets", None)
    p = {**params, "e2e": group}
    models = tuple(_e2e_model(e, i) for i, e in enumerate(get(p, "e2e.models", list)))
    if not models:
        raise ParamsError("params: 'e2e.models' is empty")
    names = [m.name for m in models]
    settings = E2ESettings(
        tokenizer=tokenizer_spec(p),
        framing=choice(p, "e2e.framing", humanevalpack.FRAMINGS),
        seed=get(p, "e2e.seed", int),
        stratify=choice(p, "e2e.stratify", e2e.SAMPLE_STRATA),
        repeats=positive_int(p, "e2e.repeats"),
        models=models,
        pld_ngram_max=positive_int(p, "e2e.pld.ngram_max"),
        pld_policies=choices(p, "e2e.pld.policies", MATCH_POLICIES),
        pld_k=_distinct(number_list(p, "e2e.pld.k", lo=1, integer=True), "e2e.pld.k"),
        pld_sweep_k=_distinct(number_list(p, "e2e.pld.sweep_k", lo=1, integer=True, nonempty=False), "e2e.pld.sweep_k"),
        pld_sweep_models=choices(p, "e2e.pld.sweep_models", names, nonempty=False),
        pld_sweep_corpora=_sampled_corpora(p, models),
        overhead_levels=choices(p, "e2e.overhead", LEVELS, nonempty=False),
        noisy_drift=check_threshold(number(p, "e2e.noisy_drift"), "params: 'e2e.noisy_drift'"),
        reference_budget_s=number(p, "e2e.reference_budget_s"),
        threads=check_threads(get(p, "e2e.threads"), "params: 'e2e.threads'"),
        contention_slack=check_slack(get(p, "e2e.contention_slack"), "params: 'e2e.contention_slack'"),
        hf_pld_models=choices(p, "e2e.hf_pld.models", names, nonempty=False),
        hf_pld_cases=positive_int(p, "e2e.hf_pld.cases", minimum=0),
        hf_pld_max_new_tokens=positive_int(p, "e2e.hf_pld.max_new_tokens"),
        constrained_models=choices(p, "e2e.constrained.models", names, nonempty=False),
        constrained_corpus=_configured_corpus(p, "e2e.constrained.corpus"),
        constrained_cases=positive_int(p, "e2e.constrained.cases", minimum=0),
        constrained_max_new_tokens=positive_int(p, "e2e.constrained.max_new_tokens"),
        prefill_grid=number_list(p, "e2e.prefill_grid", lo=1, integer=True),
        ar_grid=number_list(p, "e2e.ar_grid", lo=1, integer=True),
        ar_steps=positive_int(p, "e2e.ar_steps"),
        fit=choice(p, "e2e.fit", FORMS),
        losslessness_tolerance=number(p, "e2e.losslessness_tolerance"),
        lossless_cases=positive_int(p, "e2e.lossless_cases", minimum=0),
        mask_model=choice(p, "e2e.mask_cost.model", tuple(known_models())),
        mask_programs=positive_int(p, "e2e.mask_cost.programs"),
        mask_lines_limit=positive_int(p, "e2e.mask_cost.lines_limit"),
        mask_apply_repeats=positive_int(p, "e2e.mask_cost.apply_repeats"),
        preset=preset,
        out=None if preset is None else Path(out) if out is not None else E2E_PRESETS / preset,
    )
    if settings.out is not None:  # a preset run's folder stays inside the tree (H4)
        try:
            confined(settings.out / "run.json", "the e2e preset run's folder")
        except OutputRootError as exc:
            raise ParamsError(str(exc)) from None
    if not settings.losslessness_tolerance > 0:
        raise ParamsError(f"params: 'e2e.losslessness_tolerance' must be > 0, got {settings.losslessness_tolerance}")
    if not settings.reference_budget_s > 0:
        raise ParamsError(f"params: 'e2e.reference_budget_s' must be > 0, got {settings.reference_budget_s}")
    return settings


def _sampled_corpora(p: dict, models: tuple[E2EModel, ...]) -> tuple[str, ...]:
    return choices(p, "e2e.pld.sweep_corpora", sorted({c for m in models for c, _ in m.sample}), nonempty=False)


def _configured_corpus(p: dict, dotted: str) -> str:
    """A corpus name that params `corpora` configures (a typo is named before any model loads)."""
    from analysis.corpora.settings import configured_corpora

    value = get(p, dotted, str)
    known = configured_corpora(p)
    if value not in known:
        raise ParamsError(f"params: {dotted!r}: unknown corpus {value!r}; params corpora configures "
                          f"{', '.join(known)}{did_you_mean(value, known)}")
    return value


def _distinct(values: tuple[int, ...], dotted: str) -> tuple[int, ...]:
    if len(set(values)) != len(values):
        raise ParamsError(f"params: {dotted!r} lists a value twice: {list(values)}")
    return values


# Bump when the measurement code changes what a checkpoint holds.
KEYLESS_FIT = "interp"  # the fit form of the checkpoints written before e2e.fit (left out of their key)
CHECKPOINT_VERSION = "e2e-4"  # 4: PLD drafts from the unnumbered source, keeps a logit per verified token, records acceptance
CHECKPOINT_COLUMNS = {"method", "repeat", "order_index", "seconds", "forwards", "tokens", "case_id", "run_id",
                      "predicted_ar_seconds", "predicted_seconds", "predicted", "extrapolated_spans", "directive_tokens",
                      "lossless_ok", "accept_hist"}


def cases_with_instructions() -> pl.DataFrame:
    """Programs joined with their case texts and the case's edit instruction."""
    cases = read_cases(CASES)
    if "instruction" not in cases.columns:
        raise CorpusError(f"{CASES} has no instruction column; rerun `copydecode corpora`")
    table = joined_programs()
    return table.join(cases.select("case_id", "framing", "instruction"), on=["case_id", "framing"], how="left")


CASE_STEM_BYTES = 100  # of a case id in a checkpoint name: a multi-file case id (`<sha>:<long path>`) can pass 255


def checkpoint_stem(case_id: str) -> str:
    """The case id as part of its checkpoint's file name: `/` as `_` (one component), cut to
    CASE_STEM_BYTES (L2); the key beside it, a hash that holds the case id, keeps two cut ids apart."""
    stem = case_id.replace("/", "_").replace("\x00", "_")
    return stem.encode("utf-8")[:CASE_STEM_BYTES].decode("utf-8", "ignore")


def case_key_parts(choice: E2EModel, s: E2ESettings, line: dict, token: dict, prompt: list[int], curve: dict,
                   context: int, run_lossless: bool) -> dict:
    """Everything that determines one case's checkpoint: a change to any of it re-measures the case.
    The plan holds every measured method's settings (PLD policies, k, n-gram, overhead levels); the
    seed fixes the run order. The fit form (params e2e.fit) prices the stored predictions: it enters
    the key when it is not `interp`, the form of every checkpoint written before it was a setting (so
    those keys stay valid)."""
    parts = {
        "model": asdict(choice), "tokenizer": s.tokenizer, "case": line["case_id"], "source": line["source"],
        "target": line["target"], "programs": [line["program"], token["program"]], "prompt": prompt,
        "repeats": s.repeats, "plan": asdict(s.plan(choice.name, line["corpus"])), "order_seed": s.seed, "curve": curve,
        "context": context, "lossless": [run_lossless, s.losslessness_tolerance], "threads": s.threads,
        "fingerprint": fingerprint(choice.name, choice.weights),
    }
    return parts if s.fit == KEYLESS_FIT else {**parts, "fit": s.fit}


CURVE_FIELDS = frozenset({"prefill", "ar", "contexts"})


def cached_curve(loaded: ModelAndTokenizer, choice: E2EModel, s: E2ESettings, contexts: tuple[int, ...],
                 scratch: FromScratch | None = None) -> dict:
    """The model's latency curve, measured once and checkpointed like a case: its timings are part of
    every case's key (the predictions come from it), so a resumed run must reuse the same curve. The
    AR step counts it holds are checked against params e2e.ar_grid on load (not part of its key)."""
    scratch = FromScratch() if scratch is None else scratch
    key = checkpoint_key(CHECKPOINT_VERSION, {"curve_of": asdict(choice), "grid": s.prefill_grid,
                                              "ar_steps": s.ar_steps, "contexts": list(contexts),
                                              "repeats": s.repeats, "threads": s.threads})
    path = E2E_CHECKPOINTS / f"{choice.name}-curve-{key}.json"
    found = read_json_checkpoint(path, key, fields=CURVE_FIELDS, what="e2e", log=log_above_bars)
    points = e2e_predict.ar_points(s.ar_grid, s.ar_steps)
    if found is not None and e2e_predict.curve_ar_points(found.content) == points:
        scratch.read_back(found.seconds)
        return found.content
    if found is not None:
        log_above_bars(f"e2e: {path.name} holds AR steps {e2e_predict.curve_ar_points(found.content)}, "
                   f"params e2e.ar_grid asks for {points}: measured again")
    scratch.mark()
    curve = e2e_predict.latency_curve(loaded.lm, s.prefill_grid, s.ar_grid, s.ar_steps, contexts, s.repeats)
    write_json_checkpoint(curve, path, key, scratch.measured())
    return curve


def case_segments(loaded: ModelAndTokenizer, line: dict, token: dict, qwen) -> dict:
    """The line and token oracle programs as the executor's segments, in the model's tokens."""
    from kernels_profile.e2e.executor import program_segments

    bounds = qwen.encode(line["source"]).char_bounds
    encode = model_encoder(loaded)
    return {"line": program_segments(parse(line["program"]), line["source"], None, encode),
            "token": program_segments(parse(token["program"]), token["source"], bounds, encode)}


def model_encoder(loaded: ModelAndTokenizer):
    return lambda text: loaded.hf_tok(text, add_special_tokens=False)["input_ids"]


PREDICTION_SCHEMA = {"method": pl.String, "predicted_ar_seconds": pl.Float64, "predicted_seconds": pl.Float64,
                     "predicted": pl.Float64, "extrapolated_spans": pl.Int64}


def measure_one(loaded: ModelAndTokenizer, choice: E2EModel, s: E2ESettings, line: dict, token: dict, prompt: list[int],
                model, context: int, run_lossless: bool, qwen, run_id: str) -> pl.DataFrame:
    from kernels_profile.e2e.executor import Executor

    segments = case_segments(loaded, line, token, qwen)
    gold = model_encoder(loaded)(line["target"])
    plan = s.plan(choice.name, line["corpus"])
    executor = Executor(loaded.lm, prompt, e2e.draft_context(model_encoder(loaded), line["source"]))
    records = e2e.measure_case(executor, gold, segments, plan, s.repeats,
                               e2e.order_seed(s.seed, choice.name, line["case_id"]))
    check = (e2e.losslessness(executor, segments["line"], s.losslessness_tolerance) if run_lossless
             else {"logits_rel_diff": None, "ok": None})
    predictions = pl.DataFrame(e2e_predict.method_predictions(segments, model, len(prompt), plan),
                               schema=PREDICTION_SCHEMA)
    directives = pl.DataFrame(
        [{"method": e2e.cad_method(level, overhead), "directive_tokens": sum(seg.directive_tokens for seg in segments[level])}
         for level in LEVELS for overhead in (False, True)], schema={"method": pl.String, "directive_tokens": pl.Int64})
    measured = pl.DataFrame(records, schema_overrides={"accept_hist": pl.List(pl.Int64)})
    return measured.join(predictions, on="method", how="left").join(
        directives, on="method", how="left").with_columns(
        model=pl.lit(choice.name), weights=pl.lit(choice.weights), dtype=pl.lit(choice.dtype),
        case_id=pl.lit(line["case_id"]), corpus=pl.lit(line["corpus"]), gold_tokens=pl.lit(len(gold)),
        prompt_tokens=pl.lit(len(prompt)), run_id=pl.lit(run_id),
        lossless_rel_diff=pl.lit(check["logits_rel_diff"], dtype=pl.Float64),
        lossless_ok=pl.lit(check["ok"], dtype=pl.Boolean),
    ).sort("repeat", "order_index")


def run_model(choice: E2EModel, s: E2ESettings, table: pl.DataFrame, bar, recorder: EnvironmentRecorder,
              scratch: FromScratch) -> dict:
    from analysis.text.tokens import load_tokenizer

    rows = e2e.sample_cases(table, choice.sample, s.framing, s.seed, s.stratify)
    qwen = load_tokenizer(s.tokenizer)
    bar.set_postfix_str(f"loading {choice.name}")
    loaded = load_model(choice.name, choice.weights, choice.dtype, "cpu")
    case_ids = sorted(set(rows["case_id"].to_list()))
    by_case = {c: rows.filter(pl.col("case_id") == c) for c in case_ids}
    tok = ModelTokenizer.from_hf(loaded.hf_tok, loaded.eos_ids, choice.name)
    prompts = {c: prompt_ids(tok, PROGRAM_TEMPLATE, by_case[c]["source"][0], by_case[c]["instruction"][0])
               for c in case_ids}
    gold = {c: len(loaded.hf_tok(by_case[c]["target"][0], add_special_tokens=False)["input_ids"]) for c in case_ids}
    contexts = (min(len(p) for p in prompts.values()), max(len(prompts[c]) + gold[c] for c in case_ids))
    context = contexts[0]  # kept in each case's key and record: the curve's shortest context
    bar.set_postfix_str(f"{choice.name} prefill curve")
    curve = cached_curve(loaded, choice, s, contexts, scratch)
    model = e2e_predict.curve_model(curve, choice.name, s.fit)
    measured = []
    for index, case_id in enumerate(case_ids):
        line, token = (by_case[case_id].filter(pl.col("level") == lv).row(0, named=True) for lv in ("line", "token"))
        run_lossless = index < s.lossless_cases
        key = checkpoint_key(CHECKPOINT_VERSION,
                             case_key_parts(choice, s, line, token, prompts[case_id], curve, context, run_lossless))
        path = E2E_CHECKPOINTS / f"{choice.name}-{checkpoint_stem(case_id)}-{key}.parquet"
        bar.set_postfix_str(f"{choice.name} {case_id}")
        found = read_frame_checkpoint(path, key, rows=len(s.plan(choice.name, line["corpus"]).methods()) * s.repeats,
                                      columns=CHECKPOINT_COLUMNS, what="e2e", log=log_above_bars)
        if found is not None:
            frame = found.content
            scratch.read_back(found.seconds)
        else:
            scratch.mark()  # a unit's seconds are its measurement's (a resumed run loads the model too)
            frame = measure_one(loaded, choice, s, line, token, prompts[case_id], model, context, run_lossless, qwen,
                                recorder.run_id)
            write_frame_checkpoint(frame, path, key, scratch.measured())
        recorder.sample()
        measured.append(frame)
        bar.update(1)
    result = {"measurements": pl.concat(measured, how="diagonal"), "latency_curve": curve, "context": context}
    if s.hf_pld_cases and choice.name in s.hf_pld_models:
        bar.set_postfix_str(f"{choice.name} transformers PLD")
        result["hf_pld"] = [{"case_id": c, **e2e.hf_pld_sanity(loaded.lm, prompts[c], s.hf_pld_max_new_tokens, s.hf_pld_k)}
                            for c in case_ids[:s.hf_pld_cases]]
    if s.constrained_cases and choice.name in s.constrained_models:
        bar.set_postfix_str(f"{choice.name} constrained generation")
        result["constrained"] = constrained_for(loaded, tok, s, table)
    return result


def constrained_for(loaded: ModelAndTokenizer, tok: ModelTokenizer, s: E2ESettings, table: pl.DataFrame) -> list[dict]:
    pool = table.filter((pl.col("corpus") == s.constrained_corpus) & (pl.col("framing") == s.framing)
                        & (pl.col("level") == "line"))
    ids = sorted(pool["case_id"].to_list())
    if not ids:
        raise ParamsError(f"e2e.constrained.corpus {s.constrained_corpus!r} has no case at framing {s.framing!r}")
    chosen = random.Random(f"{s.seed}/constrained").sample(ids, min(s.constrained_cases, len(ids)))
    pool = pool.filter(pl.col("case_id").is_in(chosen))
    return constrained_generation(loaded.lm, tok, pool, s.constrained_max_new_tokens)


def lossless_summary(measurements: pl.DataFrame) -> dict:
    per_case = measurements.group_by("case_id").agg(ok=pl.col("lossless_ok").first(),
                                                    diff=pl.col("lossless_rel_diff").first())
    checked = per_case.filter(pl.col("ok").is_not_null())
    return {"cases": checked.height, "ok": int(checked["ok"].sum()) if checked.height else 0,
            "max_rel_diff": checked["diff"].max() if checked.height else None}


def mask_benchmark(s: E2ESettings) -> dict:
    """This suite's per-step mask cost on the vocabulary of params e2e.mask_cost.model, in the mask
    benchmark's own definition and statistic (kernels_profile.decode.maskbench.suite_costs; the decode stage
    runs the same benchmark beside llguidance), at the run's torch threads (params e2e.threads)."""
    programs = maskbench.line_programs(s.mask_programs, s.mask_lines_limit)
    return maskbench.suite_costs(maskbench.vocabulary(s.mask_model), programs, s.mask_lines_limit,
                                 s.mask_apply_repeats, s.threads)


def environment_metrics(env: RunEnvironment) -> dict:
    """What the report shows of the run environment (the whole record is in the sidecar)."""
    contention = env.contention.to_json() if env.contention is not None else {}
    return {"run_id": env.run_id, "noisy": env.noisy, "noisy_reasons": env.noisy_reasons,
            "contended": env.contended, "other_busy_cores": contention.get("other_busy_cores"),
            "other_busy_cores_samples": contention.get("samples"), "contention_rule": contention.get("rule"),
            "contention_unmeasured": contention.get("unmeasured"), "contention_slack": contention.get("slack"),
            "threads": contention.get("threads", env.machine.get("torch_threads")),
            "reference_drift": env.drift.drift,
            "noisy_drift": env.drift.threshold, "reference_samples": env.drift.samples,
            "reference_start_s": env.drift.reference_start_s, "reference_end_s": env.drift.reference_end_s,
            "load1_before": env.load_before[0], "load1_after": env.load_after[0],
            **{k: env.machine.get(k) for k in ("cpu_model", "cpu_flags", "usable_cores", "torch_threads")}}


def speedup_metrics(summary: pl.DataFrame) -> dict:
    keys = ("label", "speedup_total", "predicted_total", "gap_total", "speedup_median", "predicted_median",
            "gap_median", "pair_ratio_median", "pair_ratio_iqr", "pairs", "predicted", "extrapolated_spans")
    return {f"{r['model']}/{r['corpus']}/{r['method']}": {k: r[k] for k in keys} for r in summary.iter_rows(named=True)}


def pooled_metrics(pooled: pl.DataFrame) -> dict:
    """The headline basis: `<model>/<pool>/<method>` -> cases, summed seconds and their ratio."""
    keys = ("label", "cases", "ar_seconds", "seconds", "speedup_pooled", "tokens_per_forward")
    return {f"{r['model']}/{r['pool']}/{r['method']}": {k: r[k] for k in keys} for r in pooled.iter_rows(named=True)}


def run_info(s: E2ESettings, started: datetime, seconds: float, environment: RunEnvironment) -> dict:
    """What a frozen preset run records of itself (run.json): the command, the commit (and whether the
    tree had uncommitted changes), UTC start and end, wall-clock seconds and the machine."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"preset": s.preset, "command": f"copydecode e2e --preset {s.preset} --out {s.out}",
            "commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
            "started": started.isoformat(timespec="seconds"),
            "ended": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
            "machine": {k: environment.machine.get(k) for k in ("cpu_model", "usable_cores", "torch_threads")},
            "noisy": environment.noisy}


def run(s: E2ESettings) -> dict:
    started_at, started = datetime.now(timezone.utc), time.perf_counter()
    with timed("e2e" if s.preset is None else f"e2e-{s.preset}") as timing:
        scratch = FromScratch()
        threads = set_threads(s.threads)  # before the recorder reads the thread count and before any timing
        table = cases_with_instructions()
        total = sum(len(set(e2e.sample_cases(table, c.sample, s.framing, s.seed, s.stratify)["case_id"]))
                    for c in s.models)
        recorder = EnvironmentRecorder(threshold=s.noisy_drift, contention_slack=s.contention_slack,
                                       reference=lambda: reference_workload(budget_s=s.reference_budget_s))
        recorder.start()
        bar = progress_bar(total=total, desc="e2e" if s.preset is None else f"e2e {s.preset}", unit="case")
        results = {c.name: run_model(c, s, table, bar, recorder, scratch) for c in s.models}
        bar.close()
        environment = recorder.end()
        measurements = pl.concat([r["measurements"] for r in results.values()], how="diagonal")
        summary = e2e_summary.speedup_summary(measurements)
        cases = e2e_summary.case_table(measurements)
        pooled = e2e_summary.pooled_summary(cases)
        constrained = [dict(r, model=m) for m, res in results.items() for r in res.get("constrained", [])]
        mask = mask_benchmark(s) if s.preset is None else None
        tables = TABLES if s.out is None else s.out
        raw = E2E_MEASUREMENTS if s.out is None else s.out / E2E_MEASUREMENTS.name
        write_parquet(measurements, raw)
        write_json({**environment.to_json(), "threads": threads}, environment_path(raw))
        write_table(summary, tables / "e2e_speedup", digits=3)
        write_table(cases, tables / "e2e_cases", digits=4)
        write_table(pooled, tables / "e2e_pooled", digits=3)
        if s.out is None:
            methods = tuple(dict.fromkeys(m for c in s.models for corpus, _ in c.sample
                                          for m in s.plan(c.name, corpus).methods()))
            save_chart(charts.e2e_speedup(summary, methods), FIGURES / "e2e_speedup")
        if constrained:
            write_table(pl.DataFrame(constrained).drop("program"), tables / "e2e_constrained", digits=3)
        timing["from_scratch_s"] = scratch.seconds()
    metrics = {
        "mask_cost_qwen": mask,
        "speedups": speedup_metrics(summary),
        "pooled": pooled_metrics(pooled),
        "environment": environment_metrics(environment),
        "lossless": {m: lossless_summary(r["measurements"]) for m, r in results.items()},
        "hf_pld": {m: r.get("hf_pld", []) for m, r in results.items()},
        "constrained": {"cases": len(constrained), "valid": sum(r["valid"] for r in constrained),
                        "exact_match": sum(r["exact_match"] for r in constrained),
                        "programs": [{k: r[k] for k in ("model", "case_id", "valid", "exact_match", "program")} for r in constrained]},
        "latency_curves": {m: r["latency_curve"] for m, r in results.items()},
    }
    if s.out is not None:  # a preset run: its folder holds everything a frozen copy needs
        if mask is None:
            metrics.pop("mask_cost_qwen")
        write_json(metrics, s.out / "metrics.json")
        write_json(run_info(s, started_at, time.perf_counter() - started, environment), s.out / "run.json")
    else:
        write_json(metrics, METRICS / "e2e.json")
    return {k: metrics[k] for k in ("pooled", "lossless", "environment")}
