"""params.yaml, read once and validated into typed settings, one dataclass per stage.

A stage module calls the one function for its own group before it reads or writes anything, so a bad
value stops the stage with a `ParamsError` naming the key and the value, and nothing is half-written.
Below the stage modules, code takes these dataclasses or plain values, never the params dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import corpora, probeedit
from analysis.errors import ParamsError
from analysis.layout import LEVELS
from analysis.params import (
    choice, choices, get, get_or, interval_level, load_params, number, number_list, positive_int,
)


@dataclass(frozen=True)
class Config:
    """The params file, parsed once; `path` is kept for the params hash in report provenance."""

    params: dict[str, Any]
    path: Path

    @classmethod
    def load(cls, path: str | Path) -> "Config":
        return cls(load_params(path), Path(path))


# ---------------------------------------------------------------- shared

@dataclass(frozen=True)
class Bootstrap:
    resamples: int
    seed: int
    ci: float


def _bootstrap(params: dict, group: str) -> Bootstrap:
    return Bootstrap(
        resamples=positive_int(params, f"{group}.bootstrap_resamples", minimum=0),
        seed=get(params, f"{group}.seed", int),
        ci=interval_level(params, f"{group}.ci"),
    )


def tokenizer_spec(cfg: Config) -> str:
    spec = get(cfg.params, "tokenizer.spec", str)
    if not spec.strip():
        raise ParamsError("params: 'tokenizer.spec' is empty; use qwen2.5, a folder or a hub id")
    return spec


# ---------------------------------------------------------------- corpora

@dataclass(frozen=True)
class HumanEvalPackSettings:
    languages: tuple[str, ...]
    framings: tuple[str, ...]
    local_dir: str
    source: str
    verify_sha256: bool


@dataclass(frozen=True)
class CorporaSettings:
    humanevalpack: HumanEvalPackSettings | None  # None: no HumanEvalPack language asked for
    probeedit: probeedit.ProbeEditParams | None  # None: disabled


HEP_SOURCES = ("auto", "local", "hub")


def corpora_settings(cfg: Config) -> CorporaSettings:
    p, hep = cfg.params, "corpora.humanevalpack"
    languages = choices(p, f"{hep}.languages", tuple(corpora.HUMANEVALPACK_LANGUAGES), nonempty=False)
    framings = choices(p, f"{hep}.framings", corpora.FRAMINGS)
    humanevalpack = HumanEvalPackSettings(
        languages=languages, framings=framings,
        local_dir=get(p, f"{hep}.local_dir", str),
        source=choice(p, f"{hep}.source", HEP_SOURCES),
        verify_sha256=get(p, f"{hep}.verify_sha256", bool),
    ) if languages else None
    pe = None
    if get(p, "corpora.probeedit.enabled", bool):
        pe = probeedit_settings(p)
    if humanevalpack is None and pe is None:
        raise ParamsError("params: no corpus selected (corpora.humanevalpack.languages is empty and "
                          "corpora.probeedit.enabled is false); an empty corpus has nothing to analyse")
    return CorporaSettings(humanevalpack, pe)


def probeedit_settings(p: dict) -> probeedit.ProbeEditParams:
    group = "corpora.probeedit"
    mix = get(p, f"{group}.mix", dict)
    weights = []
    for kind, weight in mix.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ParamsError(f"params: '{group}.mix.{kind}' must be a number, got {weight!r}")
        weights.append((str(kind), float(weight)))
    min_lines = positive_int(p, f"{group}.min_lines")
    max_lines = positive_int(p, f"{group}.max_lines")
    if max_lines < min_lines:
        raise ParamsError(f"params: '{group}.max_lines' ({max_lines}) is below min_lines ({min_lines})")
    return probeedit.ProbeEditParams(
        n_cases=positive_int(p, f"{group}.n_cases"),
        seed=get(p, f"{group}.seed", int),
        min_lines=min_lines, max_lines=max_lines,
        mix=tuple(weights),
        stdlib_dir=str(get(p, f"{group}.stdlib_dir", str)),
    )


# ---------------------------------------------------------------- programs, spans

@dataclass(frozen=True)
class ProgramsSettings:
    tokenizer: str
    token_min_copy: int


def programs_settings(cfg: Config) -> ProgramsSettings:
    return ProgramsSettings(tokenizer_spec(cfg), positive_int(cfg.params, "programs.token_min_copy"))


@dataclass(frozen=True)
class SpansSettings:
    tokenizer: str
    bootstrap: Bootstrap
    chart_framing: str


def spans_settings(cfg: Config) -> SpansSettings:
    return SpansSettings(
        tokenizer=tokenizer_spec(cfg),
        bootstrap=_bootstrap(cfg.params, "spans"),
        chart_framing=choice(cfg.params, "spans.chart_framing", corpora.FRAMINGS),
    )


# ---------------------------------------------------------------- bounds

@dataclass(frozen=True)
class BoundsSettings:
    model: str
    dtype: str
    device: str
    baselines: tuple[str, ...]
    context: int
    bootstrap: Bootstrap


BASELINES = ("eager", "static", "static_compiled")


def bounds_settings(cfg: Config) -> BoundsSettings:
    p = cfg.params
    return BoundsSettings(
        model=get(p, "bounds.model", str), dtype=get(p, "bounds.dtype", str), device=get(p, "bounds.device", str),
        baselines=choices(p, "bounds.baselines", BASELINES),
        context=positive_int(p, "bounds.context", minimum=0),
        bootstrap=_bootstrap(p, "bounds"),
    )


# ---------------------------------------------------------------- perturbation, formats

@dataclass(frozen=True)
class PerturbSettings:
    tokenizer: str
    levels: tuple[str, ...]
    framings: tuple[str, ...]
    kinds: tuple[str, ...]
    rates: tuple[float, ...]
    seeds: tuple[int, ...]


def perturb_settings(cfg: Config) -> PerturbSettings:
    from analysis.perturb import KINDS

    p = cfg.params
    first, count = get(p, "perturb.seed", int), positive_int(p, "perturb.seeds")
    return PerturbSettings(
        tokenizer=tokenizer_spec(cfg),
        levels=choices(p, "perturb.levels", LEVELS),
        framings=choices(p, "perturb.framings", corpora.FRAMINGS),
        kinds=choices(p, "perturb.kinds", KINDS),
        rates=number_list(p, "perturb.rates", lo=0.0, hi=1.0),
        seeds=tuple(range(first, first + count)),
    )


@dataclass(frozen=True)
class FormatsSettings:
    tokenizer: str
    udiff_context: int


def formats_settings(cfg: Config) -> FormatsSettings:
    return FormatsSettings(tokenizer_spec(cfg), positive_int(cfg.params, "formats.udiff_context", minimum=0))


# ---------------------------------------------------------------- reports

REPORTS = ("summary", "kernel", "coverage", "bounds", "perturbation", "losslessness", "e2e", "explore")


@dataclass(frozen=True)
class ReportsSettings:
    parameters: dict[str, dict[str, Any]]  # report name -> papermill parameters


def reports_settings(cfg: Config) -> ReportsSettings:
    per_report = get(cfg.params, "reports.parameters", dict)
    unknown = sorted(set(per_report) - set(REPORTS))
    if unknown:
        raise ParamsError(f"params: reports.parameters names unknown reports {unknown}; known: {', '.join(REPORTS)}")
    for name, values in per_report.items():
        if values is not None and not isinstance(values, dict):
            raise ParamsError(f"params: reports.parameters.{name} must be a mapping, got {values!r}")
    return ReportsSettings({name: dict(per_report.get(name) or {}) for name in REPORTS})


# ---------------------------------------------------------------- kernels fit

@dataclass(frozen=True)
class FitSettings:
    raw: Path
    holdout_ns: tuple[int, ...]


def fit_settings(cfg: Config) -> FitSettings:
    return FitSettings(Path(get(cfg.params, "kernels.fit.raw", str)),
                       number_list(cfg.params, "kernels.fit.holdout_ns", lo=1, integer=True, nonempty=False))


# ---------------------------------------------------------------- e2e

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
    repeats: int
    models: tuple[E2EModel, ...]
    pld_k: int
    pld_ngram_max: int
    hf_pld_models: tuple[str, ...]
    hf_pld_cases: int
    hf_pld_max_new_tokens: int
    constrained_models: tuple[str, ...]
    constrained_corpus: str
    constrained_cases: int
    constrained_max_new_tokens: int
    prefill_grid: tuple[int, ...]
    losslessness_tolerance: float
    lossless_cases: int
    mask_programs: int
    mask_lines_limit: int
    mask_repeats: int


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
    return E2EModel(entry["name"], entry["weights"], entry["dtype"], tuple(sample))


def e2e_settings(cfg: Config) -> E2ESettings:
    p = cfg.params
    models = tuple(_e2e_model(e, i) for i, e in enumerate(get(p, "e2e.models", list)))
    if not models:
        raise ParamsError("params: 'e2e.models' is empty")
    names = [m.name for m in models]
    settings = E2ESettings(
        tokenizer=tokenizer_spec(cfg),
        framing=choice(p, "e2e.framing", corpora.FRAMINGS),
        seed=get(p, "e2e.seed", int),
        repeats=positive_int(p, "e2e.repeats"),
        models=models,
        pld_k=positive_int(p, "e2e.pld.k"),
        pld_ngram_max=positive_int(p, "e2e.pld.ngram_max"),
        hf_pld_models=choices(p, "e2e.hf_pld.models", names, nonempty=False),
        hf_pld_cases=positive_int(p, "e2e.hf_pld.cases", minimum=0),
        hf_pld_max_new_tokens=positive_int(p, "e2e.hf_pld.max_new_tokens"),
        constrained_models=choices(p, "e2e.constrained.models", names, nonempty=False),
        constrained_corpus=get(p, "e2e.constrained.corpus", str),
        constrained_cases=positive_int(p, "e2e.constrained.cases", minimum=0),
        constrained_max_new_tokens=positive_int(p, "e2e.constrained.max_new_tokens"),
        prefill_grid=number_list(p, "e2e.prefill_grid", lo=1, integer=True),
        losslessness_tolerance=number(p, "e2e.losslessness_tolerance"),
        lossless_cases=positive_int(p, "e2e.lossless_cases", minimum=0),
        mask_programs=positive_int(p, "e2e.mask_cost.programs"),
        mask_lines_limit=positive_int(p, "e2e.mask_cost.lines_limit"),
        mask_repeats=positive_int(p, "e2e.mask_cost.repeats"),
    )
    if not settings.losslessness_tolerance > 0:
        raise ParamsError(f"params: 'e2e.losslessness_tolerance' must be > 0, got {settings.losslessness_tolerance}")
    return settings


def optional(cfg: Config, dotted: str, default: Any, kind=None) -> Any:
    return get_or(cfg.params, dotted, default, kind)
