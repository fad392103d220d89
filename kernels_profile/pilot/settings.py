"""The pilot's settings and its model: params `pilot` overlaid with a preset, checked by name
(`settings`), and the base model with its LoRA adapter loaded (`load_models`). Shared by the pilot stage
(kernels_profile.stages.pilot) and `copydecode pilot-sweep` (kernels_profile.tools.pilot_sweep)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.corpora.entries import FRAMINGS, ProbeEditParams, probeedit_recipe
from analysis.errors import ParamsError
from analysis.pipeline.params import check_threads, choice, get, merge_preset, number, number_list, positive_int
from analysis.pilot.data import TASKS, PilotDataParams, task_kinds
from kernels_profile.runtime.models import DTYPES, known_models
from kernels_profile.decode.decoder import load_for_decoding
from kernels_profile.pilot.train import SCHEDULES, LoraSettings, TrainSettings, add_lora
from kernels_profile.runtime.loading import set_threads

GROUP = "pilot"
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class FormatSettings:
    """params `pilot.formats`: the edit-format check (analysis.pilot.formats)."""

    cases: int          # held-out cases, evenly spaced (0: no check)
    diff_context: int   # context lines of the unified diff the prompt's example and the budget use


@dataclass(frozen=True)
class PilotSettings:
    """params `pilot` with a preset overlaid, each value checked by `settings` (no default in code)."""

    model: str
    weights: str
    dtype: str
    device: str
    threads: int | None
    data: PilotDataParams
    probeedit: ProbeEditParams
    lora_rank: int
    lora_alpha: int
    lora_dropout: float
    lora_targets: tuple[str, ...]
    steps: int
    lr: float
    warmup: int                     # linear warmup steps
    schedule: str                   # constant | linear | cosine decay after warmup
    batch: int                      # sequences per step
    max_tokens: int
    checkpoint_every: int           # also the teacher-forced curve's interval
    seeds: tuple[int, ...]          # program adapters (all get teacher-forced metrics)
    decode_seeds: tuple[int, ...]   # program adapters that also decode the held-out cases (greedy EM)
    rewrite_seeds: tuple[int, ...]  # rewrite adapters (seeds also in `seeds` get the paired timing)
    humaneval_seeds: tuple[int, ...]
    humaneval_cases: int
    humaneval_seed: int
    humaneval_framing: str          # HEvalFix framing of the bug-fix prompt (the instruction names the function)
    budget_margin: int
    order_seed: int
    formats: FormatSettings
    formats_only: bool              # `--formats-only`: the edit-format check alone, with the base model
    preset: str | None

    def check(self) -> PilotSettings:
        for key in ("humaneval_seeds", "decode_seeds"):
            stray = sorted(set(getattr(self, key)) - set(self.seeds))
            if stray:
                raise ParamsError(f"params: '{GROUP}.{key}' {stray} are not program seeds ({list(self.seeds)})")
        if not self.lr > 0:
            raise ParamsError(f"params: '{GROUP}.lr' must be a number > 0, got {self.lr!r}")
        if self.warmup >= self.steps:
            raise ParamsError(f"params: '{GROUP}.warmup' ({self.warmup}) must be below steps ({self.steps})")
        return self

    def lora(self):
        return LoraSettings(rank=self.lora_rank, alpha=self.lora_alpha, dropout=self.lora_dropout,
                            targets=self.lora_targets)

    def training(self, seed: int):
        return TrainSettings(steps=self.steps, lr=self.lr, seed=seed, max_tokens=self.max_tokens,
                             checkpoint_every=self.checkpoint_every, warmup=self.warmup, schedule=self.schedule,
                             batch=self.batch)


# ---------------------------------------------------------------- settings

def _data(p: dict) -> PilotDataParams:
    group = f"{GROUP}.data"
    task = choice(p, f"{GROUP}.task", TASKS)
    allowed = task_kinds(task)
    kinds = get(p, f"{group}.kinds", (str, list))
    kinds = list(allowed) if kinds == "all" else kinds
    if not isinstance(kinds, list) or not kinds or any(k not in allowed for k in kinds):
        raise ParamsError(f"params: '{group}.kinds' must be 'all' or a list of {', '.join(allowed)} "
                          f"(the kinds of task {task}), got {kinds!r}")
    lo, hi = positive_int(p, f"{group}.min_lines"), positive_int(p, f"{group}.max_lines")
    if hi < lo:
        raise ParamsError(f"params: '{group}.max_lines' ({hi}) is below min_lines ({lo})")
    return PilotDataParams(task=task, seed=get(p, f"{group}.seed", int), min_lines=lo, max_lines=hi,
                           n_train=positive_int(p, f"{group}.n_train"), n_heldout=positive_int(p, f"{group}.n_heldout"),
                           heldout_files=positive_int(p, f"{group}.heldout_files"), kinds=tuple(kinds))


def _seeds(p: dict, key: str, nonempty: bool = True) -> tuple[int, ...]:
    return number_list(p, f"{GROUP}.{key}", integer=True, nonempty=nonempty, distinct=True)


def settings(params: dict, preset: str | None = None, formats_only: bool = False) -> PilotSettings:
    """The pilot's settings: params `pilot` overlaid with the preset `preset` of `pilot.presets`
    (params.merge_preset), every value checked by name."""
    group = merge_preset(params, GROUP, f"{GROUP}.presets", preset)
    group.pop("presets", None)
    p = {GROUP: group}
    model = get(p, f"{GROUP}.model", str)
    if model not in known_models():
        raise ParamsError(f"params: '{GROUP}.model': unknown model {model!r}; known: {', '.join(known_models())}")
    weights = get(p, f"{GROUP}.weights", str)
    if weights == "random":
        raise ParamsError(f"params: '{GROUP}.weights' is 'random': fine-tuning random weights measures nothing; "
                          "name real weights (gguf for smollm2-135m, or a local folder / hub id)")
    targets = get(p, f"{GROUP}.lora.targets", list)
    if not targets or not all(isinstance(t, str) for t in targets):
        raise ParamsError(f"params: '{GROUP}.lora.targets' must be a non-empty list of module names, got {targets!r}")
    choice(p, f"{GROUP}.level", ("line",))  # token-level targets are not built (see the README's pilot section)
    return PilotSettings(
        model=model, weights=weights, dtype=choice(p, f"{GROUP}.dtype", DTYPES),
        device=choice(p, f"{GROUP}.device", DEVICES),
        threads=check_threads(get(p, f"{GROUP}.threads", (int, type(None))), f"params: '{GROUP}.threads'"),
        data=_data(p), probeedit=probeedit_recipe(params),
        lora_rank=positive_int(p, f"{GROUP}.lora.rank"), lora_alpha=positive_int(p, f"{GROUP}.lora.alpha"),
        lora_dropout=number(p, f"{GROUP}.lora.dropout", lo=0.0, hi=1.0), lora_targets=tuple(targets),
        steps=positive_int(p, f"{GROUP}.steps"), lr=number(p, f"{GROUP}.lr"),
        warmup=positive_int(p, f"{GROUP}.warmup", minimum=0),
        schedule=choice(p, f"{GROUP}.schedule", SCHEDULES), batch=positive_int(p, f"{GROUP}.batch"),
        max_tokens=positive_int(p, f"{GROUP}.max_tokens"),
        checkpoint_every=positive_int(p, f"{GROUP}.checkpoint_every"),
        seeds=_seeds(p, "seeds"), decode_seeds=_seeds(p, "decode_seeds"),
        rewrite_seeds=_seeds(p, "rewrite_seeds", nonempty=False),
        humaneval_seeds=_seeds(p, "humaneval_seeds", nonempty=False),
        humaneval_cases=positive_int(p, f"{GROUP}.humaneval_cases", minimum=0),
        humaneval_seed=get(p, f"{GROUP}.humaneval_seed", int),
        humaneval_framing=choice(p, f"{GROUP}.humaneval_framing", FRAMINGS),
        budget_margin=positive_int(p, f"{GROUP}.budget_margin"),
        order_seed=get(p, f"{GROUP}.order_seed", int),
        formats=FormatSettings(cases=positive_int(p, f"{GROUP}.formats.cases", minimum=0),
                               diff_context=positive_int(p, f"{GROUP}.formats.diff_context", minimum=0)),
        formats_only=bool(formats_only), preset=preset,
    ).check()


# ---------------------------------------------------------------- the model

@dataclass
class Loaded:
    lm: Any
    tok: Any
    peft: Any = None


def load_models(s: PilotSettings) -> Loaded:
    set_threads(s.threads or None)
    lm, tok = load_for_decoding(s.model, s.weights, s.dtype, s.device)
    loaded = Loaded(lm, tok)
    loaded.peft = add_lora(lm, s.lora(), seed=s.seeds[0])
    lm.model = loaded.peft  # the decoder runs whatever adapter is loaded (disable_adapter for "before")
    return loaded
