"""Section 4 of issue 41: a `dvc repro` log was mostly noise, among it transformers' GGUF dequantize bar and
weight-loading bar on every model load and its attention-mask warnings. A model load drops only those known
lines (every other line, errors included, is kept); generate gets its attention mask, so there is nothing to
warn of."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import pytest

from analysis.parallel.progress import stderr_filtered
from kernels_profile.runtime import models
from kernels_profile.runtime.models import LOAD_NOISE, ModelError

BAR = ("Converting and de-quantizing GGUF tensors...:   0%|          | 0/272 [00:00<?, ?it/s]\r"
       "Converting and de-quantizing GGUF tensors...: 100%|##########| 272/272 [00:01<00:00, 198.56it/s]\n"
       "Loading weights: 100%|##########| 272/272 [00:00<00:00, 23657.81it/s]\n")


def test_the_filter_drops_the_known_bars_and_keeps_every_other_line_also_on_an_error(capfd):
    with stderr_filtered(LOAD_NOISE):
        os.write(2, BAR.encode())
        sys.stderr.write("a warning about the weights\n")
    err = capfd.readouterr().err
    assert err == "a warning about the weights\n"
    with pytest.raises(RuntimeError), stderr_filtered(LOAD_NOISE):
        sys.stderr.write(BAR + "Traceback: the weights are damaged\n")
        raise RuntimeError("damaged")
    assert capfd.readouterr().err == "Traceback: the weights are damaged\n"


class _Model:
    config = SimpleNamespace(to_json_string=lambda use_diff: "{}")

    def to(self, device):
        return self

    def eval(self):
        return self


def test_a_model_load_prints_no_bar(monkeypatch, capfd):
    transformers = pytest.importorskip("transformers")

    def from_pretrained(location, **kwargs):
        sys.stderr.write(BAR + "Some weights were not used\n")
        if location == "missing":
            raise OSError("no such folder")
        return _Model()

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    models.build_pretrained("my-model", "some/folder", "float32", "cpu")
    assert capfd.readouterr().err == "Some weights were not used\n"
    with pytest.raises(ModelError, match="not found"):
        models.build_pretrained("my-model", "missing", "float32", "cpu")
    assert capfd.readouterr().err == "Some weights were not used\n"


def test_generate_is_given_its_attention_mask():
    torch = pytest.importorskip("torch")
    from kernels_profile.e2e.checks import hf_pld_sanity

    seen = []

    def generate(x, **kwargs):
        seen.append(kwargs)
        return torch.cat([x, torch.tensor([[7, 8]])], dim=1)

    lm = SimpleNamespace(model=SimpleNamespace(generate=generate))
    out = hf_pld_sanity(lm, [1, 2, 3], max_new=2, k=4)
    assert out["identical_output"] and len(seen) == 2
    assert all(torch.equal(kw["attention_mask"], torch.ones(1, 3, dtype=torch.long)) for kw in seen)
