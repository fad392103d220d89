"""The e2e stage's settings: params `e2e` overlaid with a preset, each value checked by name
(`settings`), grouped by what reads them, and the per-(model, corpus) plan of methods it measures
(`MethodPlan`: typed `analysis.rivals.methods.Method` values, never names parsed back, with the drafters'
`analysis.rivals.settings.DraftSettings`, the rivals stage's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.bounds import CostSettings, log_cost_settings
from analysis.corpora.entries import FRAMINGS
from analysis.errors import ParamsError
from analysis.latency.model import FORMS
from analysis.layout import E2E_PRESETS, LEVELS
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.confine import OutputRootError, confined
from analysis.pipeline.params import (
    check_threads,
    choice,
    choices,
    did_you_mean,
    get,
    merge_preset,
    number,
    number_list,
    positive_int,
)
from analysis.rivals.families.ar import AR
from analysis.rivals.families.copy import DECODED, IDEAL
from analysis.rivals.families.pld import POLICIES
from analysis.rivals.methods import Method, draft_budgets
from analysis.rivals.settings import DraftSettings, draft_settings
from kernels_profile.measure.timing import NoiseRules
from kernels_profile.runtime.models import known_models
from analysis.corpora.settings import configured_corpora

SAMPLE_STRATA = ("target_length", "none")


@dataclass(frozen=True)
class E2EModel:
    name: str
    weights: str
    dtype: str
    sample: tuple[tuple[str, int | None], ...]  # (corpus, count); None = every case


@dataclass(frozen=True)
class DraftBudgets:
    """Which speculative members are measured (params e2e.pld, e2e.suffix): the draft budgets and where the
    prompt lookup k sweep runs."""

    policies: tuple[str, ...]
    k: tuple[int, ...]                # every model
    sweep_k: tuple[int, ...]          # and these too on the cases of sweep_models in sweep_corpora
    sweep_models: tuple[str, ...]
    sweep_corpora: tuple[str, ...]
    suffix_k: tuple[int, ...]         # suffix decoding's draft budgets (empty: not measured)


@dataclass(frozen=True)
class CurveSettings:
    """The latency curve each case measures beside its methods (the prediction's curve)."""

    prefill_grid: tuple[int, ...]
    ar_grid: tuple[int, ...]          # the AR step counts the curve keeps (up to ar_steps, and ar_steps)
    ar_steps: int
    fit: str                          # analysis.latency.model.FORMS


@dataclass(frozen=True)
class CheckSettings:
    """What a run checks beside its timings: losslessness, transformers' prompt lookup, constrained generation."""

    lossless_levels: tuple[str, ...]  # the program levels whose executor logits are checked, on every case
    losslessness_tolerance: float
    hf_pld_models: tuple[str, ...]
    hf_pld_cases: int
    hf_pld_max_new_tokens: int
    constrained_models: tuple[str, ...]
    constrained_corpus: str
    constrained_cases: int
    constrained_max_new_tokens: int


@dataclass(frozen=True)
class EnvironmentSettings:
    rules: NoiseRules                 # kernels_profile.measure.timing: noisy drift, reference budget, contention slack
    threads: int | None               # torch threads while measuring; None: torch's default


@dataclass(frozen=True)
class MaskSettings:
    model: str                        # the registry model whose vocabulary the mask cost is measured on
    programs: int
    lines_limit: int
    apply_repeats: int


@dataclass(frozen=True)
class MethodPlan:
    """What one case measures, in table order, and the drafters' settings."""

    methods: tuple[Method, ...]
    drafts: DraftSettings

    def __post_init__(self):
        names = [m.name for m in self.methods]
        if len(set(names)) != len(names):
            raise ParamsError(f"e2e: the plan repeats a method: {names}")
        if not names or names[0] != AR:
            raise ParamsError(f"e2e: the plan must start with AR, the baseline; got {names}")

    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.methods)

    def key(self) -> dict:
        """What of the plan determines a measurement (a checkpoint key part)."""
        return {"methods": list(self.names()), **self.drafts.key()}


@dataclass(frozen=True)
class E2ESettings:
    tokenizer: str
    framing: str
    seed: int
    stratify: str                     # how a corpus's sample is drawn (SAMPLE_STRATA)
    repeats: int
    models: tuple[E2EModel, ...]
    drafts: DraftSettings             # the drafters' settings (the rivals stage's type and rule)
    budgets: DraftBudgets
    overhead_levels: tuple[str, ...]  # levels also run with every directive token decoded
    curve: CurveSettings
    checks: CheckSettings
    environment: EnvironmentSettings
    mask: MaskSettings
    ci_resamples: int
    ci_level: float
    price: CostSettings               # how a forward log is priced: the bounds' (analysis.bounds.log_cost_settings)
    preset: str | None                # the e2e.presets entry overlaid on e2e, if any
    out: Path | None                  # a preset run's folder (every output goes there, none to reports/)

    def plan(self, model: str, corpus: str) -> MethodPlan:
        """The methods measured on `model`'s cases of `corpus`: AR, Copy-as-Decode with directives decoded,
        PLD at every policy and k (and the sweep where asked), suffix decoding, the ideal programs."""
        d = self.budgets
        swept = model in d.sweep_models and corpus in d.sweep_corpora
        ks = d.k + (tuple(k for k in d.sweep_k if k not in d.k) if swept else ())
        methods = (Method(AR),
                   *(Method("copy", level=level, directives=DECODED) for level in LEVELS if level in self.overhead_levels),
                   *(Method("pld", policy=policy, k=k) for policy in d.policies for k in ks),
                   *(Method("suffix", k=k) for k in d.suffix_k),
                   *(Method("copy", level=level, directives=IDEAL) for level in LEVELS))
        return MethodPlan(methods, self.drafts)

    def all_methods(self) -> tuple[str, ...]:
        """Every method name some case measures, in plan order."""
        return tuple(dict.fromkeys(n for m in self.models for corpus, _ in m.sample for n in self.plan(m.name, corpus).names()))

    @property
    def hf_pld_k(self) -> int:
        """transformers' prompt lookup draft length: the first k every model measures."""
        return self.budgets.k[0]


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


def _configured_corpus(p: dict, dotted: str) -> str:
    """A corpus name that params `corpora` configures (a typo is named before any model loads)."""
    value = get(p, dotted, str)
    known = configured_corpora(p)
    if value not in known:
        raise ParamsError(f"params: {dotted!r}: unknown corpus {value!r}; params corpora configures "
                          f"{', '.join(known)}{did_you_mean(value, known)}")
    return value


def _budgets(p: dict, models: tuple[E2EModel, ...]) -> DraftBudgets:
    names = [m.name for m in models]
    return DraftBudgets(
        policies=choices(p, "e2e.pld.policies", POLICIES, nonempty=False),
        k=draft_budgets(p, "e2e.pld.k"),
        sweep_k=draft_budgets(p, "e2e.pld.sweep_k", nonempty=False),
        sweep_models=choices(p, "e2e.pld.sweep_models", names, nonempty=False),
        sweep_corpora=choices(p, "e2e.pld.sweep_corpora", sorted({c for m in models for c, _ in m.sample}),
                              nonempty=False),
        suffix_k=draft_budgets(p, "e2e.suffix.k", nonempty=False),
    )


def _checks(p: dict, names: list[str]) -> CheckSettings:
    checks = CheckSettings(
        lossless_levels=choices(p, "e2e.lossless_levels", LEVELS, nonempty=False),
        losslessness_tolerance=number(p, "e2e.losslessness_tolerance"),
        hf_pld_models=choices(p, "e2e.hf_pld.models", names, nonempty=False),
        hf_pld_cases=positive_int(p, "e2e.hf_pld.cases", minimum=0),
        hf_pld_max_new_tokens=positive_int(p, "e2e.hf_pld.max_new_tokens"),
        constrained_models=choices(p, "e2e.constrained.models", names, nonempty=False),
        constrained_corpus=_configured_corpus(p, "e2e.constrained.corpus"),
        constrained_cases=positive_int(p, "e2e.constrained.cases", minimum=0),
        constrained_max_new_tokens=positive_int(p, "e2e.constrained.max_new_tokens"),
    )
    if not checks.losslessness_tolerance > 0:
        raise ParamsError(f"params: 'e2e.losslessness_tolerance' must be > 0, got {checks.losslessness_tolerance}")
    return checks


def _environment(p: dict) -> EnvironmentSettings:
    return EnvironmentSettings(NoiseRules.from_params(p, "e2e"),
                               check_threads(get(p, "e2e.threads"), "params: 'e2e.threads'"))


def settings(params: dict, preset: str | None = None, out: str | Path | None = None) -> E2ESettings:
    """e2e (and the tokenizer it encodes cases with), validated (the only reader of that group),
    overlaid with the `e2e.presets` entry `preset` when one is named: a preset run writes every output
    under `out` (default data/e2e/<preset>/) and nothing under reports/."""
    if out is not None and preset is None:
        raise ParamsError("copydecode e2e: --out names a preset run's folder; name the preset too (--preset e2e-wide)")
    if out is not None:  # a preset run's folder stays inside the tree
        try:
            confined(Path(out) / "run.json", "the e2e preset run's folder")
        except OutputRootError as exc:
            raise ParamsError(str(exc)) from None
    group = merge_preset(params, "e2e", "e2e.presets", preset)
    group.pop("presets", None)
    p = {**params, "e2e": group}
    models = tuple(_e2e_model(e, i) for i, e in enumerate(get(p, "e2e.models", list)))
    if not models:
        raise ParamsError("params: 'e2e.models' is empty")
    level = number(p, "e2e.ci.level")
    if not 0 < level < 1:
        raise ParamsError(f"params: 'e2e.ci.level' must lie in (0, 1), got {level}")
    return E2ESettings(
        tokenizer=tokenizer_spec(p),
        framing=choice(p, "e2e.framing", FRAMINGS),
        seed=get(p, "e2e.seed", int),
        stratify=choice(p, "e2e.stratify", SAMPLE_STRATA),
        repeats=positive_int(p, "e2e.repeats"),
        models=models,
        drafts=draft_settings(p, "e2e"),
        budgets=_budgets(p, models),
        overhead_levels=choices(p, "e2e.overhead", LEVELS, nonempty=False),
        curve=CurveSettings(prefill_grid=number_list(p, "e2e.prefill_grid", lo=1, integer=True),
                            ar_grid=number_list(p, "e2e.ar_grid", lo=1, integer=True),
                            ar_steps=positive_int(p, "e2e.ar_steps"), fit=choice(p, "e2e.fit", FORMS)),
        checks=_checks(p, [m.name for m in models]),
        environment=_environment(p),
        mask=MaskSettings(model=choice(p, "e2e.mask_cost.model", tuple(known_models())),
                          programs=positive_int(p, "e2e.mask_cost.programs"),
                          lines_limit=positive_int(p, "e2e.mask_cost.lines_limit"),
                          apply_repeats=positive_int(p, "e2e.mask_cost.apply_repeats")),
        ci_resamples=positive_int(p, "e2e.ci.resamples", minimum=0),
        ci_level=level,
        price=log_cost_settings(params),
        preset=preset,
        out=None if preset is None else Path(out) if out is not None else E2E_PRESETS / preset,
    )
