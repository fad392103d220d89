"""The fine-tuning pilot with plain arguments: training sequences, LoRA training, evaluation.

LoRA (peft) rather than full fine-tuning: at 135M parameters full fine-tuning would fit in memory,
but LoRA trains ~1% of the weights, so a step's backward and optimizer cost less on two CPU cores,
the three seeds' adapters are a few MB each, and the base model stays the one the rest of the suite
measures. Two adapters are trained on the same cases: "program" (the Copy-as-Decode layout of
kernels_profile.decode.sequence: loss on directive, gen and EOS tokens) and "rewrite" (the whole edited text).

Training is resumable: `train` saves the adapter, the optimizer and the losses every
`checkpoint_every` steps to one file (written to a temporary file, then renamed), keyed by the
caller's hash of everything that determines the run; a rerun with the same key resumes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import ParamsError
from analysis.grammar.program import Copy, Program, parse
from analysis.grammar.resolver import resolve
from analysis.text.lines import Source
from kernels_profile.decode.decoder import DecodeError, decode, decode_rewrite
from kernels_profile.decode.masks import MaskTables
from kernels_profile.runtime.checkpoints import CheckpointError, read_torch_checkpoint, write_torch_checkpoint
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, REWRITE_TEMPLATE, ModelTokenizer, PromptTemplate, prompt_ids
from kernels_profile.decode.sequence import LOSS_KINDS, TrainingSequence, program_sequence, rewrite_sequence

MODES = ("program", "rewrite")
TEMPLATE_OF = {"program": PROGRAM_TEMPLATE, "rewrite": REWRITE_TEMPLATE}


@dataclass(frozen=True)
class LoraSettings:
    """params pilot.lora (no default in code)."""

    rank: int
    alpha: int
    dropout: float
    targets: tuple[str, ...]


SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class TrainSettings:
    steps: int
    lr: float
    seed: int
    max_tokens: int  # sequences longer than this are left out of training (counted, never clipped)
    checkpoint_every: int
    warmup: int                 # steps of linear warmup from lr / (warmup + 1) to lr
    schedule: str               # after warmup: constant, or linear / cosine decay to 0 at `steps`
    batch: int                  # sequences per step (gradients accumulated, loss averaged per sequence)

    def lr_at(self, step: int) -> float:
        """The learning rate of 0-based `step`."""
        import math

        if step < self.warmup:
            return self.lr * (step + 1) / (self.warmup + 1)
        if self.schedule == "constant":
            return self.lr
        span = max(1, self.steps - self.warmup)
        done = (step - self.warmup) / span
        if self.schedule == "linear":
            return self.lr * (1.0 - done)
        if self.schedule == "cosine":
            return self.lr * 0.5 * (1.0 + math.cos(math.pi * done))
        raise ParamsError(f"pilot schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")


@dataclass(frozen=True)
class ForcedMetrics:
    """Teacher-forced metrics of one adapter on a set of sequences (one forward per sequence): the
    model's argmax at every supervised position, given the gold prefix. A sequence whose every
    supervised token is the argmax is exactly what greedy decoding writes (the FSM only removes
    tokens), so `all_exact` is a lower bound on greedy EM."""

    sequences: int
    supervised_tokens: int
    loss: float              # mean cross-entropy per supervised token (nats)
    directive_accuracy: float  # share of directive tokens that are the argmax
    copy_exact: float        # share of copy directives whose every token (so its line range) is the argmax
    gen_exact: float         # share of gen spans whose every token is the argmax
    eos_accuracy: float      # share of sequences whose EOS is the argmax at the end
    all_exact: float         # share of sequences whose every supervised token is the argmax


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def teacher_forced(model, sequences: Sequence[TrainingSequence]) -> ForcedMetrics:
    """ForcedMetrics of `model` (as it is: adapter enabled or not) on `sequences`."""
    import torch

    loss_sum = 0.0
    tokens = directive_right = directive_total = copies = copies_right = gens = gens_right = 0
    eos_right = all_right = 0
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        for seq in sequences:
            ids = seq.ids
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
            # position t predicts token t+1
            pred = logits[:-1].argmax(-1).tolist()
            logp = torch.log_softmax(logits[:-1], -1)
            at = 0
            every = True
            for piece in seq.pieces:
                positions = range(at, at + len(piece.ids))
                at += len(piece.ids)
                if piece.kind not in LOSS_KINDS:
                    continue
                right = [pred[t - 1] == ids[t] for t in positions]
                loss_sum -= float(sum(logp[t - 1, ids[t]] for t in positions))
                tokens += len(right)
                every = every and all(right)
                if piece.kind == "directive":
                    directive_total += len(right)
                    directive_right += sum(right)
                    copies += 1
                    copies_right += all(right)
                elif piece.kind == "gen":
                    gens += 1
                    gens_right += all(right)
                elif piece.kind == "eos":
                    eos_right += all(right)
            all_right += every
    if was_training:
        model.train()
    n = len(sequences)
    return ForcedMetrics(sequences=n, supervised_tokens=tokens, loss=loss_sum / tokens if tokens else float("nan"),
                         directive_accuracy=_ratio(directive_right, directive_total),
                         copy_exact=_ratio(copies_right, copies), gen_exact=_ratio(gens_right, gens),
                         eos_accuracy=_ratio(eos_right, n), all_exact=_ratio(all_right, n))


def training_sequences(tok: ModelTokenizer, cases, mode: str, max_tokens: int) -> tuple[list[TrainingSequence], int]:
    """One sequence per case in `mode`'s layout; also how many were left out for being too long."""
    if mode not in MODES:
        raise ParamsError(f"pilot mode must be one of {', '.join(MODES)}, got {mode!r}")
    template = TEMPLATE_OF[mode]
    kept, dropped = [], 0
    for case in cases:
        prompt = prompt_ids(tok, template, case.source, case.instruction)
        seq = (program_sequence(tok, prompt, parse(case.program), case.source) if mode == "program"
               else rewrite_sequence(tok, prompt, case.target))
        if len(seq) > max_tokens:
            dropped += 1
        else:
            kept.append(seq)
    if not kept:
        raise ParamsError(f"pilot: every {mode} training sequence is longer than max_tokens={max_tokens}")
    return kept, dropped


def add_lora(lm, settings: LoraSettings, seed: int):
    """A fresh LoRA adapter on `lm.model` (seeded), returned as a peft model in train mode."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=list(settings.targets), task_type="CAUSAL_LM")
    return get_peft_model(lm.model, config)


# The one checkpoint schema: key -> what it holds (`curve`, `seconds` and `eval_seconds` came later).
CHECKPOINT_KEYS = {"weights": dict, "optimizer": dict, "losses": list, "curve": list, "seconds": float,
                   "eval_seconds": float}
CHECKPOINT_REQUIRED = ("weights", "optimizer", "losses")


def load_checkpoint(path: Path, model=None) -> dict:
    """A checkpoint written by `train`, read with torch's weights-only unpickler (tensors, numbers,
    strings and containers: a planted file cannot run code; kernels_profile.runtime.checkpoints), its schema
    checked; with `model`, its weights must be the model's trainable parameters, name by name and
    shape by shape."""
    import torch

    state = read_torch_checkpoint(path, "delete it to train from scratch")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a checkpoint mapping, got {type(state).__name__}")
    missing = [k for k in CHECKPOINT_REQUIRED if k not in state]
    unknown = sorted(str(k) for k in state if k not in CHECKPOINT_KEYS)
    wrong = [k for k, kind in CHECKPOINT_KEYS.items() if k in state
             and not (isinstance(state[k], kind) or kind is float and isinstance(state[k], int))]
    if missing or unknown or wrong:
        raise CheckpointError(f"{path}: not a pilot checkpoint of this schema (missing {missing}, unknown {unknown}, "
                              f"wrong type {wrong}); delete it to train from scratch")
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state["weights"].items()):
        raise CheckpointError(f"{path}: 'weights' must map parameter names to tensors")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in state["losses"]):
        raise CheckpointError(f"{path}: 'losses' must hold numbers")
    if not all(isinstance(point, dict) for point in state.get("curve", [])):
        raise CheckpointError(f"{path}: 'curve' must hold mappings")
    if model is not None:
        expected = {k: tuple(v.shape) for k, v in model.named_parameters() if v.requires_grad}
        found = {k: tuple(v.shape) for k, v in state["weights"].items()}
        if found != expected:
            differ = sorted(set(found) ^ set(expected)) or sorted(k for k in found if found[k] != expected[k])
            raise CheckpointError(f"{path}: its weights are not this adapter's trainable parameters "
                                  f"({len(found)} vs {len(expected)}; first differing: {differ[:3]}); "
                                  "delete it to train from scratch")
    return state


def _trainable_state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}


def train(model, sequences: Sequence[TrainingSequence], s: TrainSettings, checkpoint: Path | None = None,
          on_step: Callable[[int, float], None] | None = None,
          on_checkpoint: Callable[[int], dict] | None = None) -> tuple[list[float], list[dict]]:
    """AdamW on the trainable (LoRA) weights, `batch` sequences per step in a seeded order, learning
    rate per `lr_at`; returns the loss of every step (resumed steps included) and the curve: what
    `on_checkpoint(step)` returned (unless None) after every `checkpoint_every` steps and the last, kept in the
    checkpoint so a resumed run keeps it. The checkpoint also keeps the training seconds spent so far
    (`trained_seconds`), so a resumed run can still say what a run from scratch costs (curve
    evaluations are not training: their seconds are kept apart)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=s.lr)
    losses: list[float] = []
    curve: list[dict] = []
    spent = evaluated = 0.0
    if checkpoint is not None and checkpoint.is_file():
        state = load_checkpoint(checkpoint, model)
        named = dict(model.named_parameters())
        with torch.no_grad():
            for k, v in state["weights"].items():
                named[k].copy_(v)
        optimizer.load_state_dict(state["optimizer"])
        losses = list(state["losses"])
        curve = list(state.get("curve", []))
        spent = state.get("seconds", float("nan"))  # checkpoints written before the field existed: unknown
        evaluated = state.get("eval_seconds", float("nan"))
    order = list(range(len(sequences)))
    rng = random.Random(s.seed)
    schedule = [[rng.choice(order) for _ in range(s.batch)] for _ in range(s.steps)]
    model.train()
    started = time.perf_counter()
    evaluating = 0.0
    for step in range(len(losses), s.steps):
        for group in optimizer.param_groups:
            group["lr"] = s.lr_at(step)
        total = 0.0
        for index in schedule[step]:
            seq = sequences[index]
            loss = model(input_ids=torch.tensor([seq.ids]), labels=torch.tensor([seq.labels])).loss / s.batch
            loss.backward()
            total += float(loss.detach())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
        if on_step is not None:
            on_step(step, losses[-1])
        done = step + 1 == s.steps
        if done or (step + 1) % s.checkpoint_every == 0:
            if on_checkpoint is not None:
                e0 = time.perf_counter()
                point = on_checkpoint(step + 1)
                if point is not None:  # None: no curve point at this step
                    curve.append({"step": step + 1, **point})
                evaluating += time.perf_counter() - e0
                model.train()
            if checkpoint is not None:
                write_torch_checkpoint({"weights": _trainable_state(model), "optimizer": optimizer.state_dict(),
                              "losses": losses, "curve": curve,
                              "seconds": spent + time.perf_counter() - started - evaluating,
                              "eval_seconds": evaluated + evaluating}, checkpoint)
    model.eval()
    return losses, curve


def trained_seconds(checkpoint: Path, with_curve: bool = False) -> float | None:
    """Training seconds a finished checkpoint cost from scratch (None when it did not record them); with
    `with_curve`, plus the seconds its curve's teacher-forced evaluations took (None when not recorded)."""
    import math

    state = load_checkpoint(checkpoint)
    parts = [state.get("seconds")] + ([state.get("eval_seconds")] if with_curve else [])
    if any(v is None or math.isnan(v) for v in parts):
        return None
    return float(sum(parts))


def copy_coverage(program_text: str, source: str | Source, tok: ModelTokenizer) -> float:
    """Share of the output's tokens that copies wrote, as analysis.coverage.spans counts coverage: the output
    tokenized by the model's tokenizer, a token counting for the op in which its first byte lies
    (0 for an empty output)."""
    from bisect import bisect_left
    from itertools import accumulate

    program, source = parse(program_text), Source.of(source)
    output = resolve(program, source)
    if not output:
        return 0.0
    ids = tok.encode(output)
    starts = [0, *accumulate(len(tok.fsm_tokenizer.piece(i)) for i in ids)][:-1]
    pos = copied = 0
    for op in program.ops:
        size = len(resolve(Program((op,)), source).encode("utf-8"))
        if isinstance(op, Copy):
            copied += bisect_left(starts, pos + size) - bisect_left(starts, pos)
        pos += size
    return copied / len(starts)


def adapter_state(model) -> dict:
    """The trained (LoRA) weights of `model`, detached copies: what an adapter checkpoint holds."""
    return _trainable_state(model)


def load_adapter_state(model, state: dict) -> None:
    """Swap a trained adapter into a peft model of the same LoRA settings (a few MB copied)."""
    import torch

    named = dict(model.named_parameters())
    missing = sorted(set(state) - set(named))
    if missing:
        raise ParamsError(f"pilot: adapter weights {missing[:3]} do not fit this model's LoRA layers")
    with torch.no_grad():
        for k, v in state.items():
            named[k].copy_(v)


def reset_adapter(model, seed: int) -> None:
    """Re-initialise every LoRA layer as peft does for a new adapter (A random, B zero), seeded."""
    import torch

    torch.manual_seed(seed)
    for module in model.modules():
        if hasattr(module, "reset_lora_parameters") and "default" in getattr(module, "lora_A", {}):
            module.reset_lora_parameters("default", True)


def program_record(lm, tok: ModelTokenizer, case, budget: int, masks: MaskTables,
                   template: PromptTemplate = PROGRAM_TEMPLATE) -> dict:
    """Greedy Copy-as-Decode on one case. `stopped`: "eos" when the model ended a whole program itself,
    "forced" when the budget's margin forced the end (a cut-off program); `valid` is stopped == "eos".
    A case that cannot run is recorded with its error and no output. `masks` (the model's FSM mask tables,
    one per line count) is shared between cases, as a server would keep it."""
    base = {"case_id": case.case_id, "mode": "program", "budget": budget}
    try:
        result = decode(lm, tok, case.source, case.instruction, template, budget,
                        masks=masks, case=case.case_id)
    except DecodeError as exc:
        return {**base, "error": str(exc), "exact_match": False, "valid": False}
    t, c = result.timings, result.counts
    return {**base, "error": None, "exact_match": result.output == case.target, "valid": result.stopped == "eos",
            "stopped": result.stopped, "copy_coverage": copy_coverage(result.text, case.source, tok),
            "seconds": t.total_s,
            "decode_s": t.decode_s, "copy_s": t.copy_s, "mask_s": t.mask_s, "prompt_s": t.prompt_s,
            "program_tokens": c.program_tokens, "copied_tokens": c.copied_tokens,
            "forwards": 1 + c.decode_forwards + c.copy_forwards, "program": result.text, "output": result.output}


def rewrite_record(lm, tok: ModelTokenizer, case, budget: int) -> dict:
    """Plain greedy decoding of the whole edited text (the rewrite baseline) on one case."""
    base = {"case_id": case.case_id, "mode": "rewrite", "budget": budget}
    try:
        text, seconds, tokens, stopped = decode_rewrite(lm, tok, case.source, case.instruction,
                                                        REWRITE_TEMPLATE, budget, case.case_id)
    except DecodeError as exc:
        return {**base, "error": str(exc), "exact_match": False, "valid": False}
    return {**base, "error": None, "exact_match": text == case.target, "valid": stopped == "eos",
            "stopped": stopped, "seconds": seconds, "decode_s": seconds, "program_tokens": tokens, "forwards": 1 + tokens,
            "program": text, "output": text}
