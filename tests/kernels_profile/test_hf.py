"""The model-runtime glue: the edit prompt every stage renders (e2e, constrained generation, the
decoder and the pilot's training sequences) pinned for one fixture case on both tokenizers, so that
moving its code changes no prompt (the e2e and pilot checkpoints are keyed by these ids)."""

import hashlib

import pytest

from kernels_profile import e2e
from kernels_profile.sequence import PROGRAM_TEMPLATE, ModelTokenizer, messages, prompt_ids

pytestmark = pytest.mark.model  # the models' own tokenizers (SmolLM2's from its GGUF)

SOURCE = "def f(x):\n    y = x + 3\n    return y  # <gen> & &lt; done\n\nprint(f(1))"
INSTRUCTION = "On line 2, change 3 to 4."
RENDERED = (
    '<|im_start|>system\nRewrite the input as an edit program. Use <copy lines="i-j"/> to copy input lines i to j '
    "(numbered below) and <gen>text</gen> to write new text. Output only the program.<|im_end|>\n"
    "<|im_start|>user\nOn line 2, change 3 to 4.\n\nInput:\n1: def f(x):\n2:     y = x + 3\n"
    "3:     return y  # <gen> & &lt; done\n4: \n5: print(f(1))<|im_end|>\n<|im_start|>assistant\n"
)
# (token count, sha256 of repr(ids)) of the prompt as rendered before the glue moved into one module
PINNED_IDS = {
    "qwen2.5-0.5b": (116, "8fa3998f3199078e4ea2c05ba2d0c2c9707019ffb8ff143dd7a7fdde89e63ccb"),
    "smollm2-135m": (125, "2dd61df7fb0e43b8d538609333f5536ade3dd23c4cb2ce4e80f0d5e77c2ae7c4"),
}


@pytest.fixture(scope="module", params=sorted(PINNED_IDS))
def hf_tok(request):
    from kernels_profile.models import load_hf_tokenizer

    return request.param, load_hf_tokenizer(request.param)


def _pinned(ids: list[int]) -> tuple[int, str]:
    return len(ids), hashlib.sha256(repr(list(ids)).encode()).hexdigest()


def test_the_edit_prompt_renders_as_before(hf_tok):
    name, hf = hf_tok
    turns = messages(PROGRAM_TEMPLATE, SOURCE, INSTRUCTION)
    assert hf.apply_chat_template(turns, add_generation_prompt=True, tokenize=False) == RENDERED


def test_every_caller_gets_the_pinned_prompt_ids(hf_tok):
    from kernels_profile.models import eos_ids

    name, hf = hf_tok
    tok = ModelTokenizer.from_hf(hf, eos_ids(name, hf), name)
    assert _pinned(prompt_ids(tok, PROGRAM_TEMPLATE, SOURCE, INSTRUCTION)) == PINNED_IDS[name]  # decoder, pilot
    assert _pinned(e2e.prompt_ids(hf, SOURCE, INSTRUCTION)) == PINNED_IDS[name]  # e2e, constrained generation
