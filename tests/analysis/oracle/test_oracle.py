import json
import random

import pytest
from fixtures import ROOT
from hypothesis import given
from hypothesis import strategies as st

from analysis.errors import ProgramError
from analysis.oracle.covmax import line_oracle, token_oracle
from analysis.text.diff import myers_matches
from analysis.grammar.program import Copy, parse, render
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines

# texts that stress the grammar and the line and token rules
PIECES = ["𓀀", "ᚠ", "a", "b", " ", "\t", "\n", "\r\n", "\r", "é", "😀", "中", "<gen>", "</gen>", "<copy", "&lt;", "&amp;", "x = 1\n", "\n\n"]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)
ANY = st.one_of(TEXTS, st.text(max_size=60))


def lcs_length(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[-1]))
        prev = cur
    return prev[-1]


@given(st.lists(st.integers(0, 4), max_size=25), st.lists(st.integers(0, 4), max_size=25))
def test_myers_is_an_exact_lcs(a, b):
    pairs = myers_matches(a, b)
    assert len(pairs) == lcs_length(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(pairs, pairs[1:]))


@given(ANY, ANY)
def test_line_oracle_roundtrips(source, target):
    program = line_oracle(source, target)
    assert resolve(program, source) == target
    assert resolve(parse(render(program)), source) == target


@given(ANY, ANY, st.integers(1, 4))
def test_token_oracle_roundtrips(qwen, source, target, min_copy):
    src, tgt = qwen.encode(source), qwen.encode(target)
    program = token_oracle(src, tgt, min_copy)
    assert resolve(parse(render(program)), source, src.char_bounds) == target
    assert all(c.length >= 1 for c in program.copies)


def test_line_oracle_copies_all_matching_lines():
    source = "def f(x):\n    y = x + 1\n    return y\n"
    target = "def f(x):\n    y = x - 1\n    return y\n"
    assert render(line_oracle(source, target)) == (
        '<copy lines="1-1"/><gen>    y = x - 1\n</gen><copy lines="3-3"/>'
    )


def best_coverage_bruteforce(src, tgt, k):
    """O(n^3) reference: the most target tokens coverable by source substrings of length >= k."""
    occurs = {tuple(src[i:j]) for i in range(len(src)) for j in range(i + 1, len(src) + 1)}
    best = [0] * (len(tgt) + 1)
    for i in range(1, len(tgt) + 1):
        best[i] = best[i - 1]
        for j in range(0, i - k + 1):
            if tuple(tgt[j:i]) in occurs:
                best[i] = max(best[i], best[j] + i - j)
    return best[-1]


class FakeTok:
    """Token ids are single ASCII letters, so every boundary is a character boundary."""

    def __init__(self, ids):
        from analysis.text.tokens import TokenizedText

        text = "".join(chr(97 + i) for i in ids)
        bounds = tuple(range(len(ids) + 1))
        self.tok = TokenizedText(text, tuple(ids), tuple(c.encode() for c in text), bounds, bounds)


@pytest.mark.parametrize("seed", range(40))
def test_token_oracle_maximises_coverage(seed):
    rng = random.Random(seed)
    src = [rng.randrange(3) for _ in range(rng.randrange(0, 14))]
    tgt = [rng.randrange(3) for _ in range(rng.randrange(0, 14))]
    k = rng.randrange(1, 4)
    s, t = FakeTok(src).tok, FakeTok(tgt).tok
    program = token_oracle(s, t, k)
    copied = sum(op.length for op in program.copies)
    assert copied == best_coverage_bruteforce(src, tgt, k)
    assert resolve(program, s.text, s.char_bounds) == t.text


def test_token_oracle_respects_min_copy():
    s, t = FakeTok([0, 1, 2, 0]).tok, FakeTok([1, 2, 1, 2, 0]).tok
    assert all(isinstance(op, Copy) is False or op.length >= 3 for op in token_oracle(s, t, 3))
    with pytest.raises(ProgramError, match="min_copy"):
        token_oracle(s, t, 0)


def test_token_oracle_on_unicode_split_tokens(qwen):
    # an emoji is split over several byte-level tokens; spans must not cut it
    source = "x = '𓀀𓀀'\nprint(x)\n"
    target = "x = '𓀀'\nprint(x)\n"
    src, tgt = qwen.encode(source), qwen.encode(target)
    assert None in src.char_bounds
    assert resolve(token_oracle(src, tgt), source, src.char_bounds) == target
    assert split_lines(target) == ["x = '𓀀'\n", "print(x)\n"]


# ---------------------------------------------------------------- Myers: linear space past the threshold

MYERS_GOLDEN = json.loads((ROOT / "tests" / "golden" / "myers_matches.json").read_text())


def _is_a_common_subsequence(a, b, pairs):
    return (all(a[i] == b[j] for i, j in pairs)
            and all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(pairs, pairs[1:])))


def _random_pair(rng, max_len=40):
    alphabet = rng.randrange(1, 8)
    a = [rng.randrange(alphabet) for _ in range(rng.randrange(max_len))]
    b = [rng.randrange(alphabet) for _ in range(rng.randrange(max_len))]
    if a and rng.random() < 0.5:  # near-identical pairs, as real edits are
        b = [x if rng.random() < 0.8 else rng.randrange(alphabet + 2) for x in a]
    return a, b


def test_myers_below_the_threshold_keeps_the_golden_tie_breaking():
    """tests/golden/myers_matches.json pins which longest common subsequence the greedy forward search
    picks (made when it was checked equal to the search of commit d0ba23a, which the pipeline's programs
    were made with): 80 random token pairs and 30 near-identical text-line pairs."""
    for case in MYERS_GOLDEN:
        a, b = case["a"], case["b"]
        pairs = myers_matches(a, b)
        assert [list(p) for p in pairs] == case["matches"], (a, b)
        assert len(pairs) == lcs_length(a, b) and _is_a_common_subsequence(a, b, pairs)


@pytest.mark.parametrize("seed", range(5))
def test_myers_below_the_threshold_is_an_exact_lcs(seed):
    rng = random.Random(seed)
    for _ in range(400):
        a, b = _random_pair(rng)
        pairs = myers_matches(a, b)
        assert len(pairs) == lcs_length(a, b) and _is_a_common_subsequence(a, b, pairs), (a, b)


@pytest.mark.parametrize("trace_bytes", [0, 8, 48, 400])
def test_myers_past_the_threshold_is_still_an_exact_lcs(trace_bytes):
    rng = random.Random(trace_bytes)
    for _ in range(500):
        a, b = _random_pair(rng)
        pairs = myers_matches(a, b, trace_bytes=trace_bytes)
        assert len(pairs) == lcs_length(a, b), (a, b)
        assert all(a[i] == b[j] for i, j in pairs)
        assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(pairs, pairs[1:]))


def test_line_oracle_roundtrips_past_the_threshold():
    rng = random.Random(3)
    for _ in range(200):
        source = "".join(rng.choice(["a\n", "b\n", "c\n", "\n", "é\n"]) for _ in range(rng.randrange(30)))
        target = "".join(rng.choice(["a\n", "b\n", "x\n", "\n"]) for _ in range(rng.randrange(30)))
        program = line_oracle(source, target, trace_bytes=0)
        assert resolve(program, source) == target
        copied = sum(op.length for op in program.copies)
        assert copied == lcs_length(split_lines(source), split_lines(target))


def test_myers_memory_stays_linear_on_a_large_file():
    import tracemalloc

    # 3,000 lines, every other one changed: the old search kept a copy of v per step (~290 MB here)
    source = [f"line {i} = compute({i})\n" for i in range(3000)]
    target = [s if i % 2 == 0 else f"line {i} = changed({i})\n" for i, s in enumerate(source)]
    tracemalloc.start()
    try:
        pairs = myers_matches(source, target)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(pairs) == 1500
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.1f} MiB"


# ---------------------------------------------------------------- compiled automaton and DP against the reference

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from analysis.oracle.covmax import _reference_token_oracle  # noqa: E402
from analysis.grammar.program import render  # noqa: E402


WORDS = ["x", " = ", "1", "\n", "y", "(", ")", "é", "😀", "def f():\n", "    return 1\n"]


@given(st.lists(st.sampled_from(WORDS), max_size=80).map("".join), st.lists(st.sampled_from(WORDS), max_size=80).map("".join),
       st.integers(1, 8))
def test_compiled_token_oracle_is_the_reference(qwen, source, target, min_copy):
    src, tgt = qwen.encode(source), qwen.encode(target)
    assert render(token_oracle(src, tgt, min_copy)) == render(_reference_token_oracle(src, tgt, min_copy))


LINE_CHOICES = ["a\n", "b\n", "c\n", "a", "x = 1\n", "\n", "caf\u00e9\n"]


@given(st.lists(st.sampled_from(LINE_CHOICES), max_size=30).map("".join),
       st.lists(st.sampled_from(LINE_CHOICES), max_size=30).map("".join))
def test_line_oracle_is_the_merge_of_one_op_per_line(source, target):
    from analysis.grammar.program import Gen, merge_adjacent
    from analysis.text.lines import split_lines

    src_lines, tgt_lines = split_lines(source), split_lines(target)
    matched = dict((j, i) for i, j in myers_matches(src_lines, tgt_lines))
    per_line = [Gen(line) if matched.get(j) is None else Copy(matched[j] + 1, matched[j] + 1, "lines")
                for j, line in enumerate(tgt_lines)]
    assert line_oracle(source, target) == merge_adjacent(per_line)
