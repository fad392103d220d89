"""The mask benchmark: the numeric-range regex, the Lark grammar llguidance gets, and one small run."""

import re

import pytest

from analysis.grammar.fsm import ProgramFSM
from kernels_profile.decode.maskbench import (
    LLGUIDANCE_MISSING,
    Vocabulary,
    benchmark,
    fits,
    lark_grammar,
    range_regex,
    summary_rows,
)

QWEN_EOS = 151643


@pytest.mark.parametrize("lo,hi", [(1, 1), (1, 9), (3, 12), (7, 100), (1, 400), (95, 1203), (10, 10), (99, 100)])
def test_range_regex_matches_exactly_the_numbers_in_range(lo, hi):
    pattern = re.compile(f"^({range_regex(lo, hi)})$")
    for n in range(1400):
        assert bool(pattern.match(str(n))) == (lo <= n <= hi), (lo, hi, n)
    assert not pattern.match("07") and not pattern.match("")


PROGRAMS = [
    '<copy lines="1-2"/><gen>a < b && c &amp;lt; &lt;gen x</gen><copy lines="3-12"/>',
    '<gen>x</gen>',
    '<copy lines="2-1"/>',          # inverted
    '<copy lines="1-13"/>',         # past the source
    '<gen>&lt;x</gen>',             # a non-canonical escape
    '<gen><gen</gen>',              # a raw tag start in a body
    '<gen></gen>',                  # an empty body
    '<copy lines="05-6"/>',         # a leading zero
    '<gen>&amp;x</gen>',
    '<gen>é &lt;/gen</gen>',
]


@pytest.mark.slow
def test_llguidance_grammar_agrees_with_the_fsm(qwen):
    llguidance = pytest.importorskip("llguidance")
    fsm = ProgramFSM(qwen, {"lines": 12}, eos_ids=(QWEN_EOS,))
    tokenizer = llguidance.LLTokenizer(qwen.backend.to_str(), eos_token=QWEN_EOS)
    for mode, strict in (("full", True), ("bounded", False), ("none", False)):
        grammar = llguidance.LLMatcher.grammar_from_lark(lark_grammar(12, mode))
        for program in PROGRAMS:
            matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
            ok = matcher.consume_tokens(list(qwen.encode_program(program).ids)) and matcher.is_accepting()
            if strict or fsm.accepts(program):  # the looser grammars may accept more, never less
                assert ok == fsm.accepts(program), (mode, program)


@pytest.mark.slow
def test_a_small_benchmark_reports_both_sides(qwen):
    vocab = Vocabulary("qwen2.5", qwen, qwen.backend.to_str(), (QWEN_EOS,), qwen.vocab_size)
    programs = [p for p in PROGRAMS if fits(p, 12)]
    assert len(programs) == 3  # inverted, out of range, bad escapes, raw tag, empty body, leading zero: out
    result = benchmark(vocab, programs[:2], 12, range_modes=("full",), apply_repeats=20, threads=1)
    assert result["ours"]["warm"]["n"] == result["ours"]["cold"]["n"] == result["steps_per_pass"]
    assert result["ours"]["first_visit"]["n"] == result["ours"]["states"] > 0
    assert result["apply"]["ours"]["n"] == 20
    if "llguidance_note" in result:
        assert result["llguidance_note"] == LLGUIDANCE_MISSING
    else:
        assert result["llguidance"]["full"]["rejected_sequences"] == 0
        assert result["llguidance"]["full"]["warm"]["n"] == result["steps_per_pass"]
    rows = summary_rows([result])
    assert rows[0]["side"] == "ours" and rows[0]["warm_p50_us"] > 0


@pytest.mark.slow
def test_the_e2e_mask_cost_is_this_suites_side_of_the_benchmark_in_its_statistic(qwen):
    from analysis.errors import ParamsError
    from kernels_profile.decode.maskbench import STATISTIC, suite_costs

    vocab = Vocabulary("qwen2.5", qwen, qwen.backend.to_str(), (QWEN_EOS,), qwen.vocab_size)
    programs = [p for p in PROGRAMS if fits(p, 12)][:2]
    costs = suite_costs(vocab, programs, 12, apply_repeats=20, threads=None)
    assert costs["statistic"] == STATISTIC and costs["programs"] == 2 and costs["vocab_size"] == qwen.vocab_size
    for phase in ("cold", "first_visit", "warm", "advance", "apply"):
        assert set(costs[phase]) == {"p50_us", "p99_us", "n"} and costs[phase]["p50_us"] > 0
    steps = sum(len(qwen.encode_program(p).ids) + 1 for p in programs)
    assert costs["cold"]["n"] == costs["warm"]["n"] == steps
    assert costs["first_visit"]["n"] == costs["states"] > 0 and costs["apply"]["n"] == 20
    with pytest.raises(ParamsError, match="copy past line 12"):
        suite_costs(vocab, ['<copy lines="1-13"/>'], 12, apply_repeats=20, threads=None)


@pytest.mark.slow
def test_the_forced_span_side_reports_mask_and_span_costs(qwen):
    pytest.importorskip("llguidance")
    from kernels_profile.decode.maskbench import FORCED_SIDE

    vocab = Vocabulary("qwen2.5", qwen, qwen.backend.to_str(), (QWEN_EOS,), qwen.vocab_size)
    source = "".join(f"line_{k} = {k}\n" for k in range(1, 13))
    cases = [('<copy lines="1-2"/><gen>a < b\n</gen><copy lines="4-12"/>', source), ('<copy lines="3-3"/>', source)]
    result = benchmark(vocab, [c[0] for c in cases], 12, range_modes=("full",), apply_repeats=5, threads=1,
                       cases=cases)
    forced = result["llguidance_forced"]
    from analysis.grammar.program import parse, render_op

    written = sum(len(qwen.encode_program(render_op(op)).ids) for p, _ in cases for op in parse(p).ops) + len(cases)
    assert forced["cold"]["n"] == forced["warm"]["n"] == written  # every token the model writes, EOS included
    assert forced["ff"]["n"] == 3 and forced["ff_unequal_spans"] == 0
    assert result["ours"]["span"]["n"] == 3
    rows = {r["side"]: r for r in summary_rows([result])}
    assert rows[FORCED_SIDE]["span_p50_us"] > 0 and rows["ours"]["span_p50_us"] > 0
    assert rows["llguidance (full)"]["span_p50_us"] is None
