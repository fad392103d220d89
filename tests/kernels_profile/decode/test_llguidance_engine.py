"""The decoder's llguidance engine writes what the suite engine writes.

On the tiny random model with the byte-level toy tokenizer, greedy decodes under both engines give the
same program, output, fed sequence and stop reason, and each copy is one prefill of llguidance's
fast-forward tokens. On the Qwen2.5 vocabulary (no model), random walks through the grammar see the
same mask under both at every step, the budget's forced ending included: the engine widens
llguidance's canonical-only mask over forced bytes (the documented difference: llguidance alone lets
only 'opy' follow '<c', the program language also 'o' and 'op'), and drops non-special added tokens.
On a real model (SmolLM2-135M, `model`), the decode stage's case and one more decode alike."""

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fixtures import toy_model_tokenizer  # noqa: E402

from analysis.grammar.fsm import ProgramFSM  # noqa: E402
from analysis.grammar.llg import MaskBuffer, compile_matcher  # noqa: E402
from analysis.grammar.export import export  # noqa: E402
from analysis.grammar.program import Copy, Gen, Program, render_op  # noqa: E402
from analysis.grammar.resolver import resolve  # noqa: E402
from kernels_profile.decode.decoder import DecodeError, MaskTable, decode  # noqa: E402
from kernels_profile.decode.llguidance_engine import LLGuidanceEngine, LLGuidanceVocab  # noqa: E402
from kernels_profile.decode.sequence import program_sequence  # noqa: E402
from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, ModelTokenizer, prompt_ids  # noqa: E402
from kernels_profile.runtime.models import LoadedModel, cache_kwarg  # noqa: E402

SOURCE = "alpha = 1\nbeta = 2\ngamma = 3\ndelta = 4\n"
INSTRUCTIONS = ("on line 2, change 2 to 5", "delete line 4", "rename alpha")
QWEN_EOS = 151643


def same(a, b) -> bool:
    return (a.text, a.output, a.sequence, a.stopped, a.counts.program_tokens) == \
        (b.text, b.output, b.sequence, b.stopped, b.counts.program_tokens)


def test_unscripted_greedy_decodes_are_the_same_under_both_engines(tiny):
    tok = toy_model_tokenizer()
    vocab = LLGuidanceVocab(tok)
    for budget in (40, 90):  # 40: the margin forces the end; 90: the random model writes on
        for instruction in INSTRUCTIONS:
            suite = decode(tiny, tok, SOURCE, instruction, PROGRAM_TEMPLATE, budget=budget)
            llg = decode(tiny, tok, SOURCE, instruction, PROGRAM_TEMPLATE, budget=budget, engine="llguidance",
                         masks=vocab)
            assert same(suite, llg), (budget, instruction, suite.text, llg.text)
            assert suite.engine == "suite" and llg.engine == "llguidance"


class Scripted(torch.nn.Module):
    """The tiny model with a bonus on the next token of an expected sequence (by position)."""

    def __init__(self, inner, expected, bonus=50.0):
        super().__init__()
        self.inner, self.expected, self.bonus, self.calls = inner, list(expected), bonus, []

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, input_ids, cache=None, **kwargs):
        seen = cache.get_seq_length() if cache is not None else 0
        out = self.inner(input_ids=input_ids, **{cache_kwarg(self.inner): cache}, **kwargs)
        nxt = seen + input_ids.shape[1]
        if nxt < len(self.expected):
            out.logits[0, -1, self.expected[nxt]] += self.bonus
        self.calls.append(int(input_ids.shape[1]))
        return out


PROGRAMS = [
    Program((Copy(1, 1), Gen("beta = 5\n"), Copy(3, 4))),
    Program((Gen("# header\n"), Copy(1, 4))),
    Program((Copy(2, 3), Copy(1, 1), Gen("x &amp;lt; <copy\n"))),
]


@pytest.mark.parametrize("program", PROGRAMS)
def test_each_copy_is_one_prefill_of_fast_forward_tokens_and_the_output_is_the_suites(tiny, program):
    tok = toy_model_tokenizer()
    prompt = prompt_ids(tok, PROGRAM_TEMPLATE, SOURCE, INSTRUCTIONS[0])
    expected = program_sequence(tok, prompt, program, SOURCE)
    results = {}
    for engine in ("suite", "llguidance"):
        model = Scripted(tiny.model, expected.ids)
        lm = LoadedModel("tiny-scripted", model, tiny.config, "random", "float32", "cpu")
        results[engine] = (decode(lm, tok, SOURCE, INSTRUCTIONS[0], PROGRAM_TEMPLATE, budget=200, engine=engine),
                           model.calls)
    (suite, suite_calls), (llg, llg_calls) = results["suite"], results["llguidance"]
    assert same(suite, llg) and llg.program == program and suite_calls == llg_calls
    assert list(llg.sequence) == expected.ids[:-1]  # the training layout, EOS never fed
    copies = [len(tok.encode(resolve(Program((op,)), SOURCE))) for op in program.copies]
    assert llg.counts.copy_forwards == len(copies) and llg.counts.copied_tokens == sum(copies)
    assert llg.counts.copy_decoded_tokens == 0 and llg.counts.masks_computed == llg.counts.program_tokens


def test_bad_engine_settings_are_named(tiny):
    tok = toy_model_tokenizer()
    with pytest.raises(DecodeError, match="mask engine must be one of suite, llguidance, got 'xgrammar'"):
        decode(tiny, tok, SOURCE, INSTRUCTIONS[0], PROGRAM_TEMPLATE, budget=100, engine="xgrammar")
    with pytest.raises(DecodeError, match="the llguidance engine copies lines.*unit 'tokens'"):
        decode(tiny, tok, SOURCE, INSTRUCTIONS[0], PROGRAM_TEMPLATE, budget=100, engine="llguidance", unit="tokens")


# ---------------------------------------------------------------- the masks on a real vocabulary

QWEN_SOURCE = "".join(f"item_{k} = load({k!r})  # <tag> & co\n" for k in range(1, 13))


@pytest.fixture(scope="module")
def qwen_tok(qwen):
    return ModelTokenizer("qwen2.5", qwen, lambda text: list(qwen.encode_program(text).ids), None, (QWEN_EOS,))


@pytest.fixture(scope="module")
def qwen_vocab(qwen_tok):
    return LLGuidanceVocab(qwen_tok)


@pytest.fixture(scope="module")
def qwen_table(qwen):
    return MaskTable(ProgramFSM(qwen, {"lines": 12}, eos_ids=(QWEN_EOS,)), 151_936)


def interesting(qwen) -> list[int]:
    pieces = ["<", "<c", "<copy", " lines", '="', "1", "12", "-", "-1", '"/>', '"', "/>", "<gen>", "<g", "gen", ">",
              "</", "</gen>", "&", "&lt;", "&amp;", "lt;", "copy", "x", " ", "\n", "é"]
    return sorted({t for p in pieces for t in qwen.encode_program(p).ids})


def walk(qwen, vocab, table, seed: int, picks: list[int]) -> tuple[int, int]:
    """One random walk through the grammar under both engines, asserting equal masks at each step; EOS is
    chosen only late or when nothing else is allowed. Returns (directives closed, steps under forcing)."""
    rng = random.Random(seed)
    budget = [None, 40, 60, 80][seed % 4]
    engine = LLGuidanceEngine(vocab, QWEN_SOURCE, budget, None, 151_936, "cpu", f"walk {seed}")
    walker = table.fsm.walker(budget=budget)
    closed = forced = 0
    for step in range(120):
        ours, theirs = table.allowed(walker), engine.allowed()
        differ = np.flatnonzero(ours[:theirs.shape[0]] != theirs)
        assert differ.size == 0, (seed, step, bytes(engine.program)[-30:], [qwen.piece(int(i)) for i in differ[:8]])
        allowed = [int(t) for t in np.flatnonzero(ours) if t != QWEN_EOS or step > 90]
        preferred = [t for t in picks if t in set(allowed)]
        token = (QWEN_EOS if not allowed else
                 rng.choice(preferred) if preferred and rng.random() < 0.7 else rng.choice(allowed))
        forced += walker.forcing
        walker.advance(token)
        result = engine.advance(token)
        closed += result.closing
        assert not result.tail  # these sources end in a newline: llguidance fast-forwards whole spans
        if result.eos:
            break
    assert engine.generated == walker.generated
    return closed, forced


@pytest.mark.slow
def test_random_walks_see_the_same_mask_under_both_engines(qwen, qwen_vocab, qwen_table):
    picks = interesting(qwen)
    seen = [walk(qwen, qwen_vocab, qwen_table, seed, picks) for seed in range(8)]
    # the walks closed directives and ran into the budget's forced ending, not only gen text
    assert sum(c for c, _ in seen) >= 5 and sum(f for _, f in seen) >= 10, seen


def test_llguidance_alone_narrows_forced_bytes_to_their_canonical_token(qwen, qwen_vocab, qwen_table):
    """The documented difference the engine undoes: after '<c' llguidance's own mask holds 'opy' only."""
    compiled = compile_matcher(qwen_vocab.ll, export(QWEN_SOURCE, "lark", True).text, "demo")
    ids = list(qwen.encode_program("<c").ids)
    assert compiled.matcher.consume_tokens(ids)
    buffer = MaskBuffer(qwen_vocab.vocab_size)
    buffer.fill(compiled.matcher)
    own = [qwen.piece(int(i)) for i in np.flatnonzero(buffer.allowed())]
    walker = qwen_table.fsm.walker()
    for t in ids:
        walker.advance(t)
    suite = {qwen.piece(int(i)) for i in np.flatnonzero(qwen_table.allowed(walker))}
    assert own == [b"opy"] and {b"o", b"op", b"opy"} <= suite
    engine = LLGuidanceEngine(qwen_vocab, QWEN_SOURCE, None, None, 151_936, "cpu", "demo")
    for t in ids:
        engine.advance(t)
    assert {qwen.piece(int(i)) for i in np.flatnonzero(engine.allowed())} == suite


def test_a_span_llguidance_holds_back_is_finished_token_by_token(qwen, qwen_vocab):
    source = "a = 1\nx = f()"  # no final newline: '()' could start a longer token, so llguidance keeps it back
    engine = LLGuidanceEngine(qwen_vocab, source, None, None, 151_936, "cpu", "tail")
    directive = list(qwen.encode_program(render_op(Copy(2, 2))).ids)
    steps = [engine.advance(t) for t in directive]
    copied = steps[-1].copied
    assert steps[-1].closing and b"".join(qwen.piece(t) for t in copied) + engine.tail == b"x = f()"
    assert engine.tail
    while engine.tail:
        allowed = np.flatnonzero(engine.allowed())
        assert allowed.size and all(engine.tail.startswith(qwen.piece(int(i))) for i in allowed)
        longest = max(allowed, key=lambda i: len(qwen.piece(int(i))))
        assert engine.advance(int(longest)).tail
    assert engine.finish("tail") == render_op(Copy(2, 2)).encode()


# ---------------------------------------------------------------- the decode stage's model

@pytest.mark.model
@pytest.mark.slow
def test_the_decode_stages_cases_decode_alike_on_smollm2(hep_dir):
    from analysis.corpora.humanevalpack import hevalfix_cases, read_jsonl
    from fixtures import params_with
    from kernels_profile.decode.decoder import load_for_decoding
    from kernels_profile.runtime.hf import TEMPLATES
    from kernels_profile.stages.decode import settings

    s = settings(params_with())
    cases = {c.case_id: c for c in hevalfix_cases(read_jsonl(hep_dir / "python.jsonl"), "python", [s.framing])}
    lm, tok = load_for_decoding(s.model, s.weights, s.dtype, "cpu")
    vocab = LLGuidanceVocab(tok)
    # the stage's case at its budget (it stops on EOS); one that writes on, where a short budget forces the end
    for case_id, budget in ((s.case_id, s.budget), ("HEvalFix-Py/1", 48)):
        case = cases[case_id]
        suite = decode(lm, tok, case.source, case.instruction, TEMPLATES[s.template], budget, case=case_id)
        llg = decode(lm, tok, case.source, case.instruction, TEMPLATES[s.template], budget, case=case_id,
                     engine="llguidance", masks=vocab)
        assert same(suite, llg), (case_id, suite.text, llg.text)
        assert llg.counts.copy_forwards == len(llg.program.copies) and llg.counts.copy_decoded_tokens == 0
