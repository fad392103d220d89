import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import ParamsError, ProgramError
from analysis.oracle.optimal import (
    CostModel,
    OpDirectives,
    TokenizerDirectives,
    optimal_line_program,
    optimal_program,
    optimal_token_program,
    program_span_rows,
)
from analysis.oracle.covmax import line_oracle, token_oracle
from analysis.grammar.program import Copy, Gen, Program, escape, parse, render, render_op
from analysis.grammar.resolver import resolve
from analysis.coverage.spans import DirectiveCounter
from analysis.text.lines import split_lines
from analysis.text.tokens import TokenizedText


def program_seconds(program, source, target, cost, directives) -> float:
    """Predicted time of any program under the cost model, op by op from its span rows (the spans'
    token accounting, as the bound's `case_costs` prices it): the DP's objective, priced without the DP."""
    rows = program_span_rows(program, source, target, directives)
    n_src = np.array([r.n_tokens_src for r in rows if r.kind == "copy"], dtype=int)
    table = cost.prefill_table(int(n_src.max(initial=0)))
    seconds = float(table[n_src].sum())
    seconds += sum(r.n_tokens for r in rows if r.kind == "gen") * cost.t_step
    seconds += sum(r.directive_tokens for r in rows) * cost.t_dir
    # a decode run opens at every op that follows a copy (or the prompt): the first-step overhead
    kinds = [r.kind for r in rows]
    seconds += sum(1 for k, _ in enumerate(kinds) if k == 0 or kinds[k - 1] == "copy") * cost.t_overhead
    return seconds


def fake(ids) -> TokenizedText:
    """Token ids are single ASCII letters, so every boundary is a character boundary."""
    text = "".join(chr(97 + i) for i in ids)
    bounds = tuple(range(len(ids) + 1))
    return TokenizedText(text, tuple(ids), tuple(c.encode() for c in text), bounds, bounds)


def synthetic_of(op) -> int:
    """A directive count that grows with the digits of the bounds (so it is monotone) and charges
    one token per escape (additive over lines, as the DP assumes)."""
    if isinstance(op, Copy):
        return len(render_op(op)) // 3
    return 2 + escape(op.text).count("&") - op.text.count("&")


SYNTH = OpDirectives(synthetic_of, is_monotone=True)


def random_cost(rng: random.Random) -> CostModel:
    # an arbitrary (not monotone, not concave) prefill table: the DP must be exact for any shape
    table = np.array([rng.choice([0.0, 0.5, 1.0, 3.0, 7.0]) * rng.random() for _ in range(400)])
    return CostModel(t_step=rng.choice([0.1, 1.0, 2.5]), prefill=lambda n: table[n],
                     t_directive=rng.choice([None, 0.0, 0.3]), t_overhead=rng.choice([0.0, 0.0, 0.4, 3.0]))


def merged(steps, unit, piece_of) -> Program:
    """Adjacent generated units form one body (pieces are bytes, joined before decoding)."""
    ops, body = [], []
    for step in steps + [("end",)]:
        if step[0] == "gen":
            body.append(piece_of(step[1]))
            continue
        if body:
            ops.append(Gen(b"".join(body).decode("utf-8")))
            body = []
        if step[0] == "copy":
            _, s, length = step
            ops.append(Copy(s + 1, s + length, unit))
    return Program(tuple(ops))


def all_step_sequences(src_units, tgt_units, ok_src, ok_tgt):
    """Every aligned program: each target unit generated, or runs copied from any matching source
    position (every occurrence, every length)."""
    n = len(tgt_units)

    def rec(j):
        if j == n:
            yield []
            return
        for rest in rec(j + 1):
            yield [("gen", j)] + rest
        if not ok_tgt[j]:
            return
        for s in range(len(src_units)):
            for length in range(1, n - j + 1):
                if s + length > len(src_units) or src_units[s:s + length] != tgt_units[j:j + length]:
                    break
                if ok_src[s] and ok_src[s + length] and ok_tgt[j + length]:
                    for rest in rec(j + length):
                        yield [("copy", s, length)] + rest

    return rec(0)


def brute_force(source, target, cost, directives, level):
    if level == "line":
        src_units, tgt_units = split_lines(source.text), split_lines(target.text)
        ok_src, ok_tgt = [True] * (len(src_units) + 1), [True] * (len(tgt_units) + 1)
        unit, piece_of = "lines", lambda j: tgt_units[j].encode()
    else:
        src_units, tgt_units = list(source.ids), list(target.ids)
        ok_src = [c is not None for c in source.char_bounds]
        ok_tgt = [c is not None for c in target.char_bounds]
        unit, piece_of = "tokens", lambda j: target.pieces[j]
    best = np.inf
    for steps in all_step_sequences(src_units, tgt_units, ok_src, ok_tgt):
        program = merged(steps, unit, piece_of)
        best = min(best, program_seconds(program, source, target, cost, directives))
    return best


@pytest.mark.parametrize("seed", range(60))
def test_token_dp_is_exact_against_brute_force(seed):
    rng = random.Random(seed)
    src = fake([rng.randrange(3) for _ in range(rng.randrange(0, 7))])
    tgt = fake([rng.randrange(3) for _ in range(rng.randrange(0, 6))])
    cost = random_cost(rng)
    best = optimal_token_program(src, tgt, cost, SYNTH)
    assert resolve(best.program, src.text, src.char_bounds) == tgt.text
    assert best.seconds == pytest.approx(program_seconds(best.program, src, tgt, cost, SYNTH), abs=1e-9)
    assert best.seconds == pytest.approx(brute_force(src, tgt, cost, SYNTH, "token"), abs=1e-9)


LINES = ["a\n", "b\n", "a", "<gen>\n", "&lt;\n", "\n"]


@pytest.mark.parametrize("seed", range(60))
def test_line_dp_is_exact_against_brute_force(qwen, seed):
    rng = random.Random(1000 + seed)
    source = "".join(rng.choice(LINES) for _ in range(rng.randrange(0, 6)))
    target = "".join(rng.choice(LINES) for _ in range(rng.randrange(0, 6)))
    src, tgt = qwen.encode(source), qwen.encode(target)
    cost = random_cost(rng)
    best = optimal_line_program(src, tgt, cost, SYNTH)
    assert resolve(best.program, source) == target
    assert best.seconds == pytest.approx(program_seconds(best.program, src, tgt, cost, SYNTH), abs=1e-9)
    assert best.seconds == pytest.approx(brute_force(src, tgt, cost, SYNTH, "line"), abs=1e-9)


@pytest.mark.parametrize("seed", range(15))
def test_token_dp_is_exact_with_the_real_tokenizer(qwen, seed):
    rng = random.Random(2000 + seed)
    words = ["x", " = ", "1", "\n", "y", "(", ")", "é", "😀"]
    source = "".join(rng.choice(words) for _ in range(rng.randrange(1, 6)))
    target = "".join(rng.choice(words) for _ in range(rng.randrange(1, 5)))
    src, tgt = qwen.encode(source), qwen.encode(target)
    if len(src) > 7 or len(tgt) > 6:
        pytest.skip("too long to enumerate")
    cost = random_cost(rng)
    exact = TokenizerDirectives(qwen)
    best = optimal_token_program(src, tgt, cost, exact)
    assert resolve(best.program, source, src.char_bounds) == target
    assert best.seconds == pytest.approx(brute_force(src, tgt, cost, exact, "token"), abs=1e-9)


PIECES = ["a", "b", " ", "\n", "é", "😀", "<gen>", "</gen>", "<copy", "&lt;", "&amp;", "x = 1\n", "\n\n"]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=25).map("".join)
PLAIN = st.lists(st.sampled_from([p for p in PIECES if escape(p) == p and "<" not in p]), max_size=25).map("".join)
COSTS = st.builds(
    lambda t, p0, p1, td, o: CostModel(t, lambda n: np.where(n > 0, p0 + p1 * n, 0.0), td, o),
    st.floats(0.01, 2), st.floats(0, 5), st.floats(0, 1), st.one_of(st.none(), st.floats(0, 2)),
    st.sampled_from([0.0, 0.0, 0.5, 4.0]),
)


@given(st.one_of(TEXTS, PLAIN), st.one_of(TEXTS, PLAIN), COSTS, st.sampled_from(["line", "token"]))
def test_optimal_programs_round_trip(qwen, source, target, cost, level):
    src, tgt = qwen.encode(source), qwen.encode(target)
    best = optimal_program(level, src, tgt, cost, TokenizerDirectives(qwen))
    assert resolve(parse(render(best.program)), source, src.char_bounds) == target
    if escape(target) != target:
        return  # escape costs are approximated in the DP (module docstring); only the round trip holds
    # never slower than the coverage oracles under the same model, and the DP's value is the program's
    exact = OpDirectives(DirectiveCounter(qwen).of)
    others = [line_oracle(source, target)] if level == "line" else [token_oracle(src, tgt, k) for k in (1, 4)]
    optimal_seconds = program_seconds(best.program, src, tgt, cost, exact)
    assert best.seconds == pytest.approx(optimal_seconds, abs=1e-9)
    for other in others:
        assert optimal_seconds <= program_seconds(other, src, tgt, cost, exact) + 1e-9


def test_escapes_split_over_tokens_are_charged(qwen):
    # '<gen>' is three Qwen tokens; generating it costs escapes, so the whole text is copied
    source = target = "<gen>a<gen>a"
    src, tgt = qwen.encode(source), qwen.encode(target)
    cost = CostModel(0.25, lambda n: np.zeros(len(n)), 1.0)
    best = optimal_token_program(src, tgt, cost, TokenizerDirectives(qwen))
    assert best.program == token_oracle(src, tgt, 1)


def test_tokenizer_directives_match_the_directive_counter(qwen):
    exact, counter = TokenizerDirectives(qwen), DirectiveCounter(qwen)
    rng = random.Random(0)
    for _ in range(200):
        a, b = rng.randrange(1, 30000), rng.randrange(1, 30000)
        unit = rng.choice(["lines", "tokens"])
        assert exact.copy_tokens(unit, np.array([a]), np.array([b]))[0] == counter.of(Copy(a, b, unit))
    for text in ["plain", "a <gen> b", "&lt; and &amp;", "</gen>"]:
        assert exact.gen_tags + exact.gen_extra(text) == counter.of(Gen(text))
    assert exact.monotone("tokens", 5000)


def test_free_copies_maximise_coverage():
    # prefill and directives free, one second per generated token: minimum time = maximum coverage
    rng = random.Random(7)
    cost = CostModel(1.0, lambda n: np.zeros(len(n)), t_directive=0.0)
    for _ in range(30):
        src = fake([rng.randrange(3) for _ in range(rng.randrange(0, 12))])
        tgt = fake([rng.randrange(3) for _ in range(rng.randrange(0, 12))])
        best = optimal_token_program(src, tgt, cost, SYNTH)
        coverage = sum(op.length for op in token_oracle(src, tgt, 1).copies)
        assert best.seconds == pytest.approx(len(tgt) - coverage)


def test_convex_prefill_splits_a_long_copy():
    src = tgt = fake([0, 1, 2, 0, 2, 1, 1, 0])
    free_tags = OpDirectives(lambda op: 0, is_monotone=True)
    convex = CostModel(10.0, lambda n: np.asarray(n, float) ** 2, t_directive=0.0)
    best = optimal_token_program(src, tgt, convex, free_tags)
    assert len(best.program.copies) == 8 and best.seconds == pytest.approx(8.0)
    linear = CostModel(10.0, lambda n: np.asarray(n, float), t_directive=0.0)
    one = OpDirectives(lambda op: 1, is_monotone=True)
    assert optimal_token_program(src, tgt, linear, one).program == Program((Copy(1, 8, "tokens"),))


def test_short_copies_are_not_worth_their_directive(qwen):
    source = "def f(x):\n    return x + 1\n"
    target = "def g(y):\n    return y * 2\n"
    src, tgt = qwen.encode(source), qwen.encode(target)
    directives = TokenizerDirectives(qwen)
    cost = CostModel(0.02, lambda n: np.where(n > 0, 0.05 + 0.001 * n, 0.0))
    best = optimal_token_program(src, tgt, cost, directives)
    # every copy pays ~10 directive tokens and a prefill: the optimum generates everything here
    assert best.program.copies == []
    assert program_seconds(token_oracle(src, tgt, 1), src, tgt, cost, directives) > best.seconds


def test_bad_inputs_are_named():
    src = tgt = fake([0, 1])
    with pytest.raises(ProgramError, match="leftmost"):
        optimal_token_program(src, tgt, CostModel(1.0, lambda n: n * 1.0), OpDirectives(lambda op: 1))
    with pytest.raises(ParamsError, match=r"prefill\(0\)"):
        optimal_token_program(src, tgt, CostModel(1.0, lambda n: n - 1.0), SYNTH)
    with pytest.raises(ParamsError, match="t_step"):
        CostModel(-1.0, lambda n: n)
    with pytest.raises(ParamsError, match="chars"):
        optimal_program("chars", src, tgt, CostModel(1.0, lambda n: n * 1.0), SYNTH)


# ---------------------------------------------------------------- compiled DPs against the reference


class TableDirectives:
    """A directive model with `copy_token_table` (the compiled DPs' fast path): copy tokens =
    base + numbers[a] + numbers[b] for arbitrary non-decreasing numbers; gen costs as SYNTH."""

    def __init__(self, rng: random.Random, upto: int = 64):
        self.gen_tags = 2
        steps = [rng.choice([0.0, 0.0, 1.0, 2.0]) for _ in range(upto + 1)]
        self.numbers = np.cumsum(steps)
        self.base = {"lines": rng.randrange(0, 9), "tokens": rng.randrange(0, 9)}

    def copy_token_table(self, unit, upto):
        assert upto < len(self.numbers)
        return self.base[unit], self.numbers

    def copy_tokens(self, unit, starts, ends):
        return self.base[unit] + self.numbers[np.asarray(starts)] + self.numbers[np.asarray(ends)]

    def gen_extra(self, text):
        return escape(text).count("&") - text.count("&")

    def monotone(self, unit, upto):
        return True


def _same(a, b):
    assert render(a.program) == render(b.program)
    assert a.seconds == b.seconds  # bit for bit: the same float operations in the same order


@pytest.mark.parametrize("seed", range(40))
def test_compiled_dps_match_the_reference_and_brute_force(seed):
    from analysis.oracle.optimal import _reference_optimal_line_program, _reference_optimal_token_program

    rng = random.Random(5000 + seed)
    src = fake([rng.randrange(3) for _ in range(rng.randrange(0, 7))])
    tgt = fake([rng.randrange(3) for _ in range(rng.randrange(0, 6))])
    cost, directives = random_cost(rng), TableDirectives(rng)
    best = optimal_token_program(src, tgt, cost, directives)
    _same(best, _reference_optimal_token_program(src, tgt, cost, directives))
    assert best.seconds == pytest.approx(brute_force(src, tgt, cost, directives, "token"), abs=1e-9)
    lines_src = fake([rng.choice([0, 1, 23]) for _ in range(rng.randrange(0, 12))])  # "x" is 23: "x" vs "a", "b"
    lines_tgt = fake([rng.choice([0, 1, 23]) for _ in range(rng.randrange(0, 10))])
    line_src = TokenizedText(lines_src.text.replace("x", "\n"), lines_src.ids, tuple(p.replace(b"x", b"\n") for p in lines_src.pieces),
                             lines_src.byte_bounds, lines_src.char_bounds)
    line_tgt = TokenizedText(lines_tgt.text.replace("x", "\n"), lines_tgt.ids, tuple(p.replace(b"x", b"\n") for p in lines_tgt.pieces),
                             lines_tgt.byte_bounds, lines_tgt.char_bounds)
    _same(optimal_line_program(line_src, line_tgt, cost, directives),
          _reference_optimal_line_program(line_src, line_tgt, cost, directives))


LONG_PIECES = ["a", "b", " ", "\n", "é", "😀", "<gen>", "&lt;", "x = 1\n", "\n\n", "def f(x):\n", "    return x\n",
               "    y = 2\n", "12345", "(", ")"]
LONG_TEXTS = st.lists(st.sampled_from(LONG_PIECES), max_size=120).map("".join)
STEPPED = st.builds(
    lambda t, table, td, o: CostModel(t, lambda n: np.asarray(table)[np.minimum(n, len(table) - 1)], td, o),
    st.floats(0.01, 2), st.lists(st.sampled_from([0.0, 0.25, 1.0, 3.5, 7.0]), min_size=1, max_size=30),
    st.one_of(st.none(), st.floats(0, 2)), st.sampled_from([0.0, 0.0, 0.5, 4.0]),
)


@given(LONG_TEXTS, LONG_TEXTS, st.one_of(COSTS, STEPPED), st.sampled_from(["line", "token"]))
def test_compiled_dps_match_the_reference_with_the_tokenizer(qwen, source, target, cost, level):
    """The compiled DPs write the reference's program and seconds bit for bit, on texts long enough
    for repeated lines, shared runs and ties (any prefill shape, stepped or linear)."""
    from analysis.oracle.optimal import _reference_optimal_line_program, _reference_optimal_token_program

    src, tgt, directives = qwen.encode(source + target[::3]), qwen.encode(target), TokenizerDirectives(qwen)
    reference = _reference_optimal_line_program if level == "line" else _reference_optimal_token_program
    _same(optimal_program(level, src, tgt, cost, directives), reference(src, tgt, cost, directives))


@pytest.mark.slow  # tables up to 200,000 copy numbers on 8 threads: ~9 s
def test_directive_numbers_grow_safely_across_threads(qwen):
    """Threads sharing one TokenizerDirectives (the threading backend) each get a consistent table."""
    from concurrent.futures import ThreadPoolExecutor

    shared, fresh = TokenizerDirectives(qwen), TokenizerDirectives(qwen)
    sizes = [5, 3000, 40, 70000, 900, 12000, 200000, 7] * 3
    with ThreadPoolExecutor(8) as pool:
        tables = list(pool.map(lambda n: shared.copy_token_table("tokens", n)[1][:n + 1].copy(), sizes))
    for n, table in zip(sizes, tables):
        assert np.array_equal(table, fresh.copy_token_table("tokens", n)[1][:n + 1])
    assert shared.monotone("tokens", 200000)


@pytest.mark.parametrize("step_cost", ["steady", "first_step"])
def test_the_dp_minimises_the_bounds_own_price(qwen, step_cost):
    """One price (review D11): the DP's input is the bound's price at its one context
    (analysis.bounds.fixed_price) and its objective is the bound's `overhead` program cost of the
    program it writes (analysis.bounds.case_costs, fixed mode), first-step overhead included: here a
    kernel whose decode runs cost 3 ms once plus 2 ms a token, the H200 graph loop's shape."""
    import polars as pl

    from analysis.bounds import CostSettings, case_costs, fixed_price
    from analysis.latency.model import GridCurve, LatencyModel, ModelKey
    from analysis.stages.optimal import dp_cost

    ns, contexts = (1.0, 2.0, 4.0, 8.0, 16.0, 512.0), (0.0, 4096.0)
    ar = GridCurve(ns, contexts, tuple(tuple(3e-3 + n * 2e-3 for n in ns) for _ in contexts))
    pre = GridCurve(ns, contexts, tuple(tuple(6e-3 + n * 2e-5 for n in ns) for _ in contexts))
    model = LatencyModel(ModelKey("m", "w", "float32", "cuda", "static"), "interp", ar, pre, (1.0, 512.0), contexts)
    settings = CostSettings("fixed", True, 256, step_cost=step_cost, steady_max_n=8, prefill_past_n="marginal")
    price = fixed_price(model, settings)
    assert (price.overhead, price.step) == pytest.approx((3e-3, 2e-3) if step_cost == "steady" else (0.0, 5e-3))
    source = "def f(x):\n    y = x + 1\n    return y\n\n\ndef g(a, b):\n    return a * b\n" * 3
    target = source.replace("x + 1", "x + 2").replace("a * b", "a - b")
    src, tgt, directives = qwen.encode(source), qwen.encode(target), TokenizerDirectives(qwen)
    for level in ("line", "token"):
        best = optimal_program(level, src, tgt, dp_cost(model, settings), directives)
        rows = program_span_rows(best.program, src, tgt, directives)
        spans = pl.DataFrame([{"case_id": "c", "corpus": "A", "framing": "body", "level": level, "op_index": r.op_index,
                               "kind": r.kind, "n_tokens": r.n_tokens, "n_tokens_src": r.n_tokens_src,
                               "directive_tokens": r.directive_tokens} for r in rows])
        bound = case_costs(spans, model, settings).row(0, named=True)
        assert best.seconds == pytest.approx(bound["program_overhead"], rel=1e-12), level
