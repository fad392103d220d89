"""kernels_profile.measure.interleave: the seeded, carry-over balanced run order of the methods compared."""

from collections import Counter

import pytest

from analysis.errors import ParamsError
from kernels_profile.measure.interleave import interleaved_order, williams_rows


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_williams_rows_are_a_latin_square_balanced_for_first_order_carry_over(n):
    rows = williams_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    # every treatment follows every other equally often
    follows = Counter((a, b) for row in rows for a, b in zip(row, row[1:]))
    if n > 1:
        assert set(follows) == {(a, b) for a in range(n) for b in range(n) if a != b}
        assert len(set(follows.values())) == 1, follows


def test_the_order_is_seeded_and_more_repeats_extend_it():
    methods = ["ar", "pld", "program"]
    assert interleaved_order(methods, 4, "s") == interleaved_order(methods, 4, "s")
    assert interleaved_order(methods, 10, 7)[:4] == interleaved_order(methods, 4, 7)
    assert len({str(interleaved_order(methods, 6, seed)) for seed in range(8)}) > 1
    assert interleaved_order(methods, 0, 1) == []


@pytest.mark.parametrize(("methods", "repeats", "message"), [
    ([], 2, "no methods"),
    (["a", "a"], 2, "distinct"),
    (["a", "b"], -1, "repeats must be an integer"),
    (["a", "b"], 2.0, "repeats must be an integer"),
])
def test_bad_arguments_are_named_params_errors(methods, repeats, message):
    with pytest.raises(ParamsError, match=message):
        interleaved_order(methods, repeats, 0)


def test_two_methods_alternate_and_the_seed_decides_who_starts():
    starts = set()
    for seed in range(8):
        order = interleaved_order(["ar", "prefill"], 6, seed)
        assert all(sorted(row) == ["ar", "prefill"] for row in order)
        assert all(order[r][0] != order[r + 1][0] for r in range(5))
        assert order == interleaved_order(["ar", "prefill"], 6, seed)
        starts.add(order[0][0])
    assert starts == {"ar", "prefill"}


@pytest.mark.parametrize("methods", [["ar", "pld", "line", "token"], ["a", "b", "c"]])
def test_williams_order_balances_position_and_carry_over(methods):
    rows = len(williams_rows(len(methods)))
    order = interleaved_order(methods, rows, seed="e2e/case-1")  # one full square: balanced at every position
    for position in range(len(methods)):
        assert Counter(row[position] for row in order) == Counter({m: rows // len(methods) for m in methods})
    follows = Counter((row[i], row[i + 1]) for row in order for i in range(len(methods) - 1))
    assert len(follows) == len(methods) * (len(methods) - 1)
    assert len(set(follows.values())) == 1
