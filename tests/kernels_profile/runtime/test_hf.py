"""The model-runtime glue: the edit prompt every stage renders (e2e, constrained generation, the
decoder and the pilot's training sequences) pinned for one fixture case on both tokenizers, so that
moving its code changes no prompt (the e2e and pilot checkpoints are keyed by these ids); and the
LogitsProcessor over the FSM walker: never an all -inf row, always a whole program within budget."""

import hashlib
import random

import numpy as np
import pytest

from analysis.errors import ProgramError
from analysis.grammar.fsm import ProgramFSM
from analysis.grammar.program import parse
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, ModelTokenizer, ProgramLogitsProcessor, messages, prompt_ids

torch = pytest.importorskip("torch")

# ---------------------------------------------------------------- the prompt (the models' own tokenizers)

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
    from kernels_profile.runtime.models import load_hf_tokenizer

    return request.param, load_hf_tokenizer(request.param)


def _pinned(ids: list[int]) -> tuple[int, str]:
    return len(ids), hashlib.sha256(repr(list(ids)).encode()).hexdigest()


@pytest.mark.model
def test_the_edit_prompt_renders_as_before(hf_tok):
    name, hf = hf_tok
    turns = messages(PROGRAM_TEMPLATE, SOURCE, INSTRUCTION)
    assert hf.apply_chat_template(turns, add_generation_prompt=True, tokenize=False) == RENDERED


@pytest.mark.model
def test_the_prompt_ids_are_the_pinned_ones(hf_tok):
    from kernels_profile.runtime.models import eos_ids

    name, hf = hf_tok
    tok = ModelTokenizer.from_hf(hf, eos_ids(name, hf), name)
    assert _pinned(prompt_ids(tok, PROGRAM_TEMPLATE, SOURCE, INSTRUCTION)) == PINNED_IDS[name]
    text = tok.decode_bytes(prompt_ids(tok, PROGRAM_TEMPLATE, SOURCE, "do it")).decode()
    assert "2:     y = x + 3\n" in text and "5: print(f(1))<|im_end|>" in text and "do it" in text


def test_every_model_running_stage_renders_its_prompt_here():
    from kernels_profile.decode import constrained
    from kernels_profile.decode import decoder
    from kernels_profile.pilot import train as pilot
    from kernels_profile.e2e import job as e2e_job

    assert constrained.prompt_ids is decoder.prompt_ids is pilot.prompt_ids is e2e_job.prompt_ids is prompt_ids


def test_a_case_without_an_instruction_gets_no_none_in_its_prompt():
    """ProbeEdit-S has no instruction (review D16): the user turn is the input alone, never "None"."""
    from kernels_profile.runtime.hf import PLAIN_REWRITE_TEMPLATE, PROGRAM_TEMPLATE, messages

    for instruction in (None, "", "  "):
        user = messages(PROGRAM_TEMPLATE, "a\n", instruction)[1]["content"]
        assert user == "Input:\n1: a\n" and "None" not in user
    assert messages(PROGRAM_TEMPLATE, "a\n", "Fix it.")[1]["content"] == "Fix it.\n\nInput:\n1: a\n"
    # the plain rewrite prompt (AR's and the drafters') shows the source unnumbered
    assert messages(PLAIN_REWRITE_TEMPLATE, "a\nb\n", None)[1]["content"] == "Input:\na\nb\n"


def test_numbered_writes_each_line_with_its_number_and_keeps_a_missing_final_newline_missing():
    from kernels_profile.runtime.hf import numbered

    assert numbered("a\n\nb") == "1: a\n2: \n3: b"
    assert numbered("") == ""


# ---------------------------------------------------------------- the LogitsProcessor

QWEN_EOS = 151643


def parses_within(data: bytes, limits: dict[str, int]) -> bool:
    try:
        program = parse(data.decode("utf-8"))
    except (UnicodeDecodeError, ProgramError):
        return False
    return all(op.unit in limits and 1 <= op.start <= op.end <= limits[op.unit] for op in program.copies)


def generate(processor, fsm, budget: int, rng: random.Random, eos: int, prompt: int = 3) -> list[int]:
    """Drive the processor as `generate` does, picking a random allowed token each step (EOS rarely)."""
    ids = torch.zeros((1, prompt), dtype=torch.long)
    out: list[int] = []
    for _ in range(budget):
        scores = processor(ids, torch.zeros(1, fsm.vocab_size + 5))  # 5 padding rows past the vocabulary
        finite = torch.isfinite(scores[0])
        assert finite.any(), "an all -inf row"
        assert not finite[fsm.vocab_size:].any()
        allowed = torch.nonzero(finite).flatten().tolist()
        others = [t for t in allowed if t != eos]
        token = rng.choice(others) if others and (eos not in allowed or rng.random() < 0.97) else eos
        if token == eos:
            break
        out.append(token)
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out


LIMIT_CONFIGS = [{"lines": 7}, {"tokens": 40}, {"lines": 3, "tokens": 300}, {"lines": 120}]


@pytest.fixture(scope="module")
def qwen_fsms(qwen):
    return [ProgramFSM(qwen, limits, eos_ids=(QWEN_EOS,)) for limits in LIMIT_CONFIGS]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16))
def test_processor_on_qwen_never_blocks_and_ends_in_a_whole_program(qwen_fsms, seed):
    rng = random.Random(seed)
    config = seed % len(LIMIT_CONFIGS)
    fsm, limits = qwen_fsms[config], LIMIT_CONFIGS[config]
    budget = rng.choice([0, 5, 17, 18, 25, 40, 80])
    processor = ProgramLogitsProcessor(fsm, 3, budget)
    out = generate(processor, fsm, budget, rng, QWEN_EOS)
    data = b"".join(fsm.piece(t) for t in out)
    assert len(out) <= budget
    assert parses_within(data, limits), (seed, limits, budget, data)
    if budget > processor.walker.margin:
        assert data, "with room for an op, random choices should write one"


def test_tokens_only_limits_complete_a_started_copy(qwen_fsms):
    # the old completion spelled 'lines="1-1"/>' here, which a tokens-only FSM forbids: every row -inf
    fsm = qwen_fsms[1]
    processor = ProgramLogitsProcessor(fsm, 0, 40)
    opening = fsm.tokenizer.encode("<copy ").ids
    ids = torch.tensor([opening])
    walker = processor.walker
    for token in opening:
        walker.advance(token)
    processor.seen = len(opening)
    walker.generated = 40 - walker.margin
    scores = processor(ids, torch.zeros(1, fsm.vocab_size))
    allowed = [fsm.piece(int(i)) for i in torch.nonzero(torch.isfinite(scores[0])).flatten()]
    assert allowed and all(b'tokens="1-1"/>'.startswith(p) for p in allowed)


def test_tiny_vocabulary_adapter_never_lets_an_invalid_program_out():
    from fixtures import FSM_EOS as EOS
    from fixtures import FSM_VOCAB as VOCAB
    from fixtures import ToyTokenizer
    from fixtures import fsm_reference as reference

    fsm = ProgramFSM(ToyTokenizer.words_then_eos(VOCAB), {"lines": 12}, eos_ids=(EOS,))
    for seed in range(40):
        gen = torch.Generator().manual_seed(seed)
        budget = 6 + seed % 40  # from budgets too small for any op to ones with room for several
        ids = torch.zeros((1, 3), dtype=torch.long)  # a 3-token "prompt"
        processor = ProgramLogitsProcessor(fsm, 3, budget)
        for _ in range(budget):
            scores = processor(ids, torch.randn(1, fsm.vocab_size, generator=gen))
            token = int(scores.argmax())
            assert torch.isfinite(scores[0, token])
            if token == EOS:
                break
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        data = b"".join(VOCAB[i] for i in ids[0, 3:].tolist())
        assert reference(data), (seed, data)


def test_processor_walks_one_sequence_only(qwen_fsms):
    processor = ProgramLogitsProcessor(qwen_fsms[0], 2, 30)
    with pytest.raises(ProgramError, match="batch of 2"):
        processor(torch.zeros((2, 2), dtype=torch.long), torch.zeros(2, qwen_fsms[0].vocab_size))


def test_processor_mask_is_the_walker_mask(qwen_fsms):
    fsm = qwen_fsms[0]
    processor = ProgramLogitsProcessor(fsm, 0, 100)
    scores = processor(torch.zeros((1, 0), dtype=torch.long), torch.zeros(1, fsm.vocab_size))
    assert np.array_equal(torch.isfinite(scores[0]).numpy(), fsm.mask(fsm.initial))
