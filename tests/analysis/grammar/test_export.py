"""The exported grammars say what the suite FSM says, on small sources with the Qwen2.5 tokenizer.

Symbolic form: every token sequence of a valid program is accepted by llguidance's matcher over the
exported grammar and by the FSM; mutated programs (text and token level) are rejected by both or
accepted by both. The Lark text is read by llguidance itself, the GBNF text through llguidance's GBNF
reader, the one vLLM's guidance backend uses (`llguidance.grammar_from("grammar", ...)`), and the regex
both by llguidance (Rust regex syntax) and by Python's re. Forced-span form: the decoder's layout
(each op's tokens, the copied text's after its directive) is accepted, a wrong copied text is not, and
the fast-forward after each directive is the copied text. The one documented difference between
llguidance and the FSM is tested in tests/kernels_profile/decode/test_llguidance_engine.py (its masks
narrow forced bytes to their canonical token; acceptance, tested here, is the same).
"""

import re

import llguidance
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.errors import GrammarError, ProgramError
from analysis.grammar.export import (
    FORCED_EBNF_MAX_LINES,
    FORCED_LARK_MAX_LINES,
    PARAMETER_MAX_LINES,
    export,
    program_of_forced,
    symbolic_lark,
)
from analysis.grammar.fsm import ProgramFSM
from analysis.grammar.llg import ll_tokenizer
from analysis.grammar.program import Copy, Gen, Program, render, render_op
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines

EOS = 151643
N = 12
SOURCE = "".join(f"value_{k} = compute({k}, '{chr(96 + k)}')\n" for k in range(1, N + 1))
TAGGY = st.text(alphabet=st.sampled_from(list("<>/&;ltampgencopy \n\"=-0129xé中😀")), min_size=1, max_size=12)
OPS = st.one_of(
    st.builds(lambda a, b: Copy(min(a, b), max(a, b)), st.integers(1, N), st.integers(1, N)),
    st.builds(Gen, TAGGY),
)
PROGRAMS = st.lists(OPS, max_size=5).map(lambda ops: Program(tuple(ops)))
CHARS = list('<>/&;"=-0123456789 \nxé') + ["<copy", "<gen>", "</gen>", '<copy lines="', '"/>', "&lt;", "&amp;"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def ll(qwen):
    return ll_tokenizer(qwen, (EOS,))


@pytest.fixture(scope="module")
def fsm(qwen):
    return ProgramFSM(qwen, {"lines": N}, eos_ids=(EOS,))


@pytest.fixture(scope="module")
def grammars():
    """The symbolic grammar of SOURCE in llguidance's serialized form, per format."""
    return {
        "lark": llguidance.LLMatcher.grammar_from_lark(export(SOURCE, "lark", False).text),
        "ebnf": llguidance.grammar_from("grammar", export(SOURCE, "ebnf", False).text),
        "regex": llguidance.grammar_from("regex", export(SOURCE, "regex", False).text),
    }


def fsm_accepts(fsm, ids) -> bool:
    state = fsm.initial
    for token in ids:
        if not fsm.mask(state)[token]:
            return False
        state = fsm.advance(state, token)
    return fsm.is_accepting(state)


def llg_accepts(ll, grammar, ids) -> bool:
    matcher = llguidance.LLMatcher(ll, grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return matcher.consume_tokens(list(ids)) and matcher.is_accepting()


def mutate(text: str, data) -> str:
    """One to three character-level edits: insert, delete or replace, with grammar-ish pieces."""
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        kind = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(st.sampled_from(CHARS))
        if kind == "insert":
            text = text[:pos] + piece + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + data.draw(st.integers(1, 3)):]
        else:
            text = text[:pos] + piece + text[pos + 1:]
    return text


# ---------------------------------------------------------------- symbolic: accept and reject alike

@pytest.mark.slow
@SETTINGS
@given(program=PROGRAMS, fmt=st.sampled_from(["lark", "ebnf", "regex"]))
def test_every_valid_program_is_accepted_by_the_export_and_the_fsm(qwen, ll, fsm, grammars, program, fmt):
    ids = list(qwen.encode_program(render(program)).ids)
    assert fsm_accepts(fsm, ids)
    assert llg_accepts(ll, grammars[fmt], ids), (fmt, render(program))


@pytest.mark.slow
@SETTINGS
@given(program=PROGRAMS, fmt=st.sampled_from(["lark", "ebnf", "regex"]), data=st.data())
def test_mutated_programs_are_rejected_or_accepted_by_both(qwen, ll, fsm, grammars, program, fmt, data):
    text = mutate(render(program), data)
    ids = list(qwen.encode_program(text).ids)
    want = fsm_accepts(fsm, ids)
    assert want == fsm.accepts(text)  # the FSM's token walk and its byte walk agree
    assert llg_accepts(ll, grammars[fmt], ids) == want, (fmt, text)
    if fmt == "regex":
        assert bool(re.fullmatch(export(SOURCE, "regex", False).text, text)) == want, text


@pytest.mark.slow
@SETTINGS
@given(program=PROGRAMS, data=st.data())
def test_token_level_mutations_are_rejected_or_accepted_by_both(qwen, ll, fsm, grammars, program, data):
    ids = list(qwen.encode_program(render(program)).ids)
    pool = sorted({t for piece in CHARS for t in qwen.encode_program(piece).ids} | {EOS, 16, 220, 1315})
    for _ in range(data.draw(st.integers(1, 2))):
        pos = data.draw(st.integers(0, len(ids)))
        token = data.draw(st.sampled_from(pool))
        ids = ids[:pos] + [token] + ids[pos + data.draw(st.integers(0, 1)):]
    want = fsm_accepts(fsm, ids) if EOS not in ids else ids.index(EOS) == len(ids) - 1 and fsm_accepts(fsm, ids[:-1])
    assert llg_accepts(ll, grammars["lark"], ids) == want, qwen.decode_bytes(ids)


def test_the_fixed_cases_agree(qwen, ll, fsm, grammars):
    cases = {
        '<copy lines="1-2"/><gen>a < b && c &amp;lt; &lt;gen x</gen><copy lines="3-12"/>': True,
        '<copy lines="2-1"/>': False,   # inverted
        '<copy lines="1-13"/>': False,  # past the source
        '<copy lines="05-6"/>': False,  # a leading zero
        '<gen>&lt;x</gen>': False,      # a non-canonical escape
        '<gen><gen</gen>': False,       # a raw tag start
        '<gen></gen>': False,           # an empty body
        '<gen>é &lt;/gen</gen>': True,
        '': True,
    }
    for text, ok in cases.items():
        ids = list(qwen.encode_program(text).ids)
        assert fsm_accepts(fsm, ids) == ok, text
        for fmt, grammar in grammars.items():
            assert llg_accepts(ll, grammar, ids) == ok, (fmt, text)


def test_a_source_without_lines_allows_only_gens(qwen, ll):
    for fmt in ("lark", "ebnf", "regex"):
        text = export("", fmt, False).text
        grammar = {"lark": llguidance.LLMatcher.grammar_from_lark, "ebnf": lambda t: llguidance.grammar_from("grammar", t),
                   "regex": lambda t: llguidance.grammar_from("regex", t)}[fmt](text)
        assert llg_accepts(ll, grammar, qwen.encode_program("<gen>x</gen>").ids), fmt
        assert not llg_accepts(ll, grammar, qwen.encode_program('<copy lines="1-1"/>').ids), fmt


def test_headers_say_what_is_enforced_and_left_out():
    lark = export(SOURCE, "lark", False, name="demo.py")
    assert lark.text.startswith("%llguidance {}\n// copydecode program grammar, symbolic form")
    assert f"1 <= i <= j <= {N}" in lark.text and "not enforced: copies in source order" in lark.text
    ebnf = export(SOURCE, "ebnf", True, name="demo.py")
    assert ebnf.text.startswith("# copydecode program grammar, forced-span form") and "demo.py, 12 lines" in ebnf.text
    regex = export(SOURCE, "regex", False)
    assert not regex.text.startswith("#") and any("not enforced" in n for n in regex.notes)


def test_the_mask_benchmark_variants_are_looser_never_stricter(qwen, ll, fsm):
    loose = {mode: llguidance.LLMatcher.grammar_from_lark(symbolic_lark(N, mode)) for mode in ("bounded", "none")}
    for text in ['<copy lines="2-1"/>', '<copy lines="1-13"/>', '<copy lines="3-4"/><gen>x</gen>']:
        ids = list(qwen.encode_program(text).ids)
        for mode, grammar in loose.items():
            if fsm_accepts(fsm, ids):
                assert llg_accepts(ll, grammar, ids), (mode, text)
    assert llg_accepts(ll, loose["bounded"], qwen.encode_program('<copy lines="2-1"/>').ids)
    assert llg_accepts(ll, loose["none"], qwen.encode_program('<copy lines="1-13"/>').ids)


# ---------------------------------------------------------------- forced spans

def layout(qwen, program: Program, source: str) -> tuple[list[int], list[tuple[int, list[int]]]]:
    """The decoder's layout and, per copy, (position after its directive, the copied text's tokens)."""
    ids, copies = [], []
    for op in program.ops:
        ids += qwen.encode_program(render_op(op)).ids
        if isinstance(op, Copy):
            copied = list(qwen.encode_program(resolve(Program((op,)), source)).ids)
            copies.append((len(ids), copied))
            ids += copied
    return ids, copies


@pytest.mark.slow
@SETTINGS
@given(program=PROGRAMS)
def test_the_forced_grammar_accepts_the_layout_and_fast_forwards_each_copy(qwen, ll, program):
    ids, copies = layout(qwen, program, SOURCE)
    for fmt, grammar in (("lark", llguidance.LLMatcher.grammar_from_lark(export(SOURCE, "lark", True).text)),
                         ("ebnf", llguidance.grammar_from("grammar", export(SOURCE, "ebnf", True).text))):
        matcher = llguidance.LLMatcher(ll, grammar, log_level=0)
        done = 0
        for position, copied in copies:
            assert matcher.consume_tokens(ids[done:position]), (fmt, matcher.get_error())
            assert matcher.compute_ff_tokens() == copied, fmt
            done = position
        assert matcher.consume_tokens(ids[done:]) and matcher.is_accepting(), fmt
    assert program_of_forced(qwen.decode_bytes(ids).decode("utf-8"), SOURCE) == program


def test_an_engines_forced_output_reads_back_as_its_program():
    lines = split_lines(SOURCE)
    text = '<copy lines="2-3"/>' + lines[1] + lines[2] + "<gen>x &lt;gen</gen>"
    assert program_of_forced(text, SOURCE) == Program((Copy(2, 3), Gen("x <gen")))
    with pytest.raises(ProgramError, match=r"the text after '<copy lines=\"2-3\"/>' \(position 19\) is not lines 2-3"):
        program_of_forced('<copy lines="2-3"/>' + lines[1], SOURCE)
    with pytest.raises(ProgramError, match="expected '<copy lines=\"' or '<gen>' at position 0"):
        program_of_forced("hello", SOURCE)
    with pytest.raises(ProgramError, match="never closed"):
        program_of_forced("<gen>x", SOURCE)


def test_the_forced_grammar_refuses_other_text_after_a_directive(qwen, ll):
    grammar = llguidance.LLMatcher.grammar_from_lark(export(SOURCE, "lark", True).text)
    lines = split_lines(SOURCE)
    good = qwen.encode_program('<copy lines="3-4"/>' + lines[2] + lines[3]).ids
    shifted = qwen.encode_program('<copy lines="3-4"/>' + lines[3] + lines[4]).ids
    short = qwen.encode_program('<copy lines="3-4"/>' + lines[2]).ids
    assert llg_accepts(ll, grammar, good) and not llg_accepts(ll, grammar, shifted)
    assert not llg_accepts(ll, grammar, short)  # the span is not finished: not accepting
    assert not llg_accepts(ll, grammar, qwen.encode_program('<copy lines="3-4"/>').ids)


AWKWARD = ('say "hi" \\ there\t<copy lines="1-2"/> and </gen>\n', "\x0c\x01 control\n", "é中😀 text\n",
           "   \n", "\n", "last line without newline")


def test_awkward_line_text_is_forced_byte_for_byte(qwen, ll):
    source = "".join(AWKWARD)
    n = len(split_lines(source))
    for fmt, grammar in (("lark", llguidance.LLMatcher.grammar_from_lark(export(source, "lark", True).text)),
                         ("ebnf", llguidance.grammar_from("grammar", export(source, "ebnf", True).text))):
        for i in range(1, n + 1):
            for j in range(i, n + 1):
                matcher = llguidance.LLMatcher(ll, grammar, log_level=0)
                assert not matcher.is_error(), (fmt, matcher.get_error())
                assert matcher.consume_tokens(qwen.encode_program(f'<copy lines="{i}-{j}"/>').ids), fmt
                assert matcher.compute_ff_bytes() == "".join(split_lines(source)[i - 1:j]).encode(), (fmt, i, j)


@pytest.mark.slow
def test_the_forced_lark_form_handles_sources_past_the_expanded_forms_limit(qwen, ll):
    # the O(N^2) expanded form fails near 400 lines (llguidance's symbol table) and a flat alternation over
    # the line numbers past 2,000 (its Earley row limit); the parametric tries take both
    n = 2_500
    source = "".join(f"row_{k} = [{k}, {k * 3}]\n" for k in range(1, n + 1))
    matcher = llguidance.LLMatcher(ll, llguidance.LLMatcher.grammar_from_lark(export(source, "lark", True).text),
                                   log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    lines = split_lines(source)
    for i, j in ((1, 1), (999, 1010), (2_480, 2_500)):
        m = matcher.deep_copy()
        assert m.consume_tokens(qwen.encode_program(f'<copy lines="{i}-{j}"/>').ids), m.get_error()
        assert m.compute_ff_tokens() == list(qwen.encode_program("".join(lines[i - 1:j])).ids)
    m = matcher.deep_copy()
    assert not m.consume_tokens(qwen.encode_program('<copy lines="2501-2501"/>').ids)


def test_each_limit_is_a_named_error_stating_it():
    with pytest.raises(GrammarError, match=f"up to {FORCED_LARK_MAX_LINES} lines.*has {FORCED_LARK_MAX_LINES + 1}"):
        export("x\n" * (FORCED_LARK_MAX_LINES + 1), "lark", True)
    with pytest.raises(GrammarError, match=f"up to {FORCED_EBNF_MAX_LINES} lines.*has {FORCED_EBNF_MAX_LINES + 1}"):
        export("x\n" * (FORCED_EBNF_MAX_LINES + 1), "ebnf", True)
    with pytest.raises(GrammarError, match="no compact regex"):
        export(SOURCE, "regex", True)
    with pytest.raises(GrammarError, match=f"up to {PARAMETER_MAX_LINES} lines"):
        export("x\n" * (PARAMETER_MAX_LINES + 1), "lark", False)
    with pytest.raises(GrammarError, match="format 'json' unknown; known: lark, ebnf, regex"):
        export(SOURCE, "json", False)
    with pytest.raises(GrammarError, match="range_mode must be one of"):
        symbolic_lark(4, "partial")


def test_an_engine_refusal_is_a_named_error(ll):
    from analysis.grammar.llg import compile_matcher

    with pytest.raises(GrammarError, match="llguidance refused the grammar of demo"):
        compile_matcher(ll, "start: missing_rule\n", "demo")


def test_the_mutations_exercise_both_verdicts(qwen, fsm):
    import random

    rng = random.Random(0)
    verdicts = []
    for _ in range(300):
        ops = [Copy(*sorted((rng.randint(1, N), rng.randint(1, N)))) if rng.random() < 0.5 else Gen("x < y &amp;")
               for _ in range(rng.randint(1, 4))]
        text = render(Program(tuple(ops)))
        pos = rng.randrange(len(text) + 1)
        text = text[:pos] + rng.choice(CHARS) + text[pos + rng.randint(0, 2):]
        verdicts.append(fsm.accepts(text))
    assert 30 < sum(verdicts) < 270, sum(verdicts)  # the property above is not just 'both reject'
