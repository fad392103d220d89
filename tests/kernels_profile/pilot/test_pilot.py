"""The pilot's training and evaluation on the tiny model (kernels_profile.pilot.train). (Its data:
tests/analysis/pilot/test_pilotdata.py.)"""

import dataclasses
import time

import pytest

from analysis.errors import ParamsError
from analysis.grammar.program import render
from kernels_profile.decode.sequence import IGNORE


def supervised(sequence) -> list[bool]:
    """Where the training loss applies: the positions whose label is not IGNORE."""
    return [label != IGNORE for label in sequence.labels]


pytestmark = pytest.mark.slow  # one LoRA run on the tiny model


# ---------------------------------------------------------------- training and evaluation (tiny model)

def _tiny_cases():
    from types import SimpleNamespace

    from analysis.grammar.program import Copy, Gen, Program

    source = "a = 1\nb = 2\nc = 3\n"
    target = "a = 1\nb = 5\nc = 3\n"
    program = render(Program((Copy(1, 1), Gen("b = 5\n"), Copy(3, 3))))
    return [SimpleNamespace(case_id="t/0", source=source, target=target, instruction="on line 2, change 2 to 5",
                            program=program)]


def test_lora_training_lowers_the_loss_and_resumes_from_its_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from kernels_profile.decode.masks import MaskTables
    from kernels_profile.runtime.models import build_model
    from kernels_profile.pilot.train import (
        LoraSettings,
        TrainSettings,
        add_lora,
        program_record,
        train,
        trained_seconds,
        training_sequences,
    )
    from fixtures import toy_model_tokenizer as toy

    tok = toy()
    cases = _tiny_cases()
    seqs, dropped = training_sequences(tok, cases, "program", max_tokens=2000)
    assert dropped == 0 and sum(supervised(seqs[0])) == len(cases[0].program.encode()) + 1
    rewrite, _ = training_sequences(tok, cases, "rewrite", max_tokens=2000)
    assert sum(supervised(rewrite[0])) == len(cases[0].target.encode()) + 1
    with pytest.raises(ParamsError, match="longer than max_tokens=10"):
        training_sequences(tok, cases, "program", max_tokens=10)
    lora = LoraSettings(rank=4, alpha=8, dropout=0.0, targets=("q_proj", "v_proj"))
    settings = TrainSettings(steps=8, lr=5e-3, seed=0, max_tokens=2000, checkpoint_every=4, warmup=0,
                             schedule="constant", batch=1)

    def run(steps, checkpoint):
        lm = build_model("tiny-qwen2", "random", "float32", "cpu")
        model = add_lora(lm, lora, seed=0)
        return lm, model, train(model, seqs, dataclasses.replace(settings, steps=steps), checkpoint)[0]

    lm, model, full = run(8, tmp_path / "a.pt")
    assert full[-1] < full[0]
    _, _, first = run(4, tmp_path / "b.pt")
    _, _, resumed = run(8, tmp_path / "b.pt")  # picks up at step 4 from the checkpoint
    assert resumed[:4] == first and resumed == pytest.approx(full, rel=1e-4)
    records = [program_record(lm, tok, case, 80, MaskTables.for_model(lm, tok)) for case in cases]
    assert records[0]["error"] is None and 0.0 <= records[0]["copy_coverage"] <= 1.0
    # a checkpoint keeps its training seconds and, apart, its curve evaluations' seconds (the stage's
    # from-scratch time counts both)
    model2 = add_lora(build_model("tiny-qwen2", "random", "float32", "cpu"), lora, seed=0)
    train(model2, seqs, settings, tmp_path / "c.pt", on_checkpoint=lambda step: time.sleep(0.2) or {"x": step})
    trained, with_curve = trained_seconds(tmp_path / "c.pt"), trained_seconds(tmp_path / "c.pt", with_curve=True)
    assert trained > 0 and with_curve - trained >= 0.4  # two curve points (steps 4 and 8), 0.2 s each
    assert isinstance(records[0]["exact_match"], bool) and torch.is_tensor(next(model.parameters()))


def test_learning_rate_warms_up_then_decays_to_zero():
    from kernels_profile.pilot.train import TrainSettings

    s = TrainSettings(steps=10, lr=1.0, seed=0, max_tokens=1, checkpoint_every=10, warmup=4, schedule="cosine",
                      batch=1)
    rates = [s.lr_at(i) for i in range(10)]
    assert rates[:4] == pytest.approx([0.2, 0.4, 0.6, 0.8]) and rates[4] == 1.0
    assert all(a > b for a, b in zip(rates[4:], rates[5:])) and rates[-1] < 0.1
    linear = dataclasses.replace(s, schedule="linear")
    assert linear.lr_at(7) == pytest.approx(1.0 - 3 / 6)
    assert dataclasses.replace(s, schedule="constant", warmup=0).lr_at(9) == 1.0
    with pytest.raises(ParamsError, match="schedule must be one of"):
        dataclasses.replace(s, schedule="step").lr_at(6)


def test_teacher_forced_metrics_agree_with_the_training_loss_and_see_a_perfect_model():
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from kernels_profile.runtime.models import build_model
    from kernels_profile.pilot.train import teacher_forced, training_sequences
    from fixtures import toy_model_tokenizer as toy

    tok = toy()
    seqs, _ = training_sequences(tok, _tiny_cases(), "program", max_tokens=2000)
    lm = build_model("tiny-qwen2", "random", "float32", "cpu")
    m = teacher_forced(lm.model, seqs)
    with torch.no_grad():
        expected = float(lm.model(input_ids=torch.tensor([seqs[0].ids]), labels=torch.tensor([seqs[0].labels])).loss)
    assert m.loss == pytest.approx(expected, rel=1e-4) and m.supervised_tokens == sum(supervised(seqs[0]))
    assert m.sequences == 1 and 0.0 <= m.directive_accuracy <= 1.0

    class Oracle(torch.nn.Module):
        """The tiny model with a large bonus on the gold next token at every position."""

        def __init__(self, inner, ids):
            super().__init__()
            self.inner, self.ids = inner, ids

        def forward(self, input_ids):
            logits = self.inner(input_ids=input_ids).logits.clone()
            for t in range(input_ids.shape[1] - 1):
                logits[0, t, self.ids[t + 1]] += 100.0
            return SimpleNamespace(logits=logits)

    perfect = teacher_forced(Oracle(lm.model, seqs[0].ids), seqs)
    assert (perfect.directive_accuracy, perfect.copy_exact, perfect.gen_exact, perfect.eos_accuracy,
            perfect.all_exact) == (1.0, 1.0, 1.0, 1.0, 1.0) and perfect.loss < 1e-3


def test_copy_coverage_is_a_share_of_output_tokens():
    from analysis.grammar.program import Copy, Gen, Program
    from kernels_profile.pilot.train import copy_coverage
    from fixtures import toy_model_tokenizer as toy

    tok = toy()  # one token per byte
    source = "aaaa\nbb\n"
    assert copy_coverage(render(Program((Copy(1, 1), Gen("cc\n")))), source, tok) == pytest.approx(5 / 8)
    assert copy_coverage(render(Program((Gen("x"),))), source, tok) == 0.0
    assert copy_coverage("", source, tok) == 0.0
