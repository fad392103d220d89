"""What the line oracle leaves out (analysis.tools.moves): moved and repeated lines, per case and per corpus."""

import pytest

from analysis.corpora.cases import Case
from analysis.tools.moves import line_moves, moves_table


def test_move_aware_measure_counts_moved_blocks():
    first = "".join(f"a{i}\n" for i in range(5))
    second = "".join(f"b{i}\n" for i in range(5))
    moves = line_moves(first + second, second + first)  # two 5-line blocks swapped
    assert (moves.lines, moves.diff_lines, moves.move_lines) == (10, 5, 10)
    assert moves.move_bytes == moves.bytes == 2 * moves.diff_bytes


def test_a_repeated_target_line_is_movable_every_time_but_copied_once_in_order():
    moves = line_moves("x = 1\ny = 2\n", "x = 1\nx = 1\nz = 3\n")
    assert (moves.lines, moves.diff_lines, moves.move_lines) == (3, 1, 2)
    assert (moves.bytes, moves.diff_bytes, moves.move_bytes) == (18, 6, 12)


def test_bytes_are_utf8_bytes_and_an_empty_target_has_nothing_to_copy():
    moves = line_moves("é\n", "é\n")
    assert moves.bytes == moves.diff_bytes == moves.move_bytes == 3
    assert line_moves("a\n", "") == line_moves("", "") and line_moves("a\n", "").lines == 0


def test_the_table_pools_bytes_per_corpus_and_framing_not_per_case_shares():
    cases = [Case("A/0", "A", "python", "pair", "a\nb\n", "b\na\n", None),       # swap: 1 of 2 lines by diff
             Case("A/1", "A", "python", "pair", "c\n", "c\n" * 3 + "d\n", None),  # 1 by diff, 3 movable of 4
             Case("B/0", "B", "python", "body", "q\n", "q\n", None)]
    table = moves_table(cases)
    assert table.select("corpus", "framing", "n_cases").rows() == [("A", "pair", 2), ("B", "body", 1)]
    a = table.row(0, named=True)
    assert a["diff_line_share"] == pytest.approx(2 / 6) and a["move_line_share"] == pytest.approx(5 / 6)
    assert a["added_bytes_pp"] == pytest.approx((10 - 4) / 12 * 100)
    assert table.row(1, named=True)["added_bytes_pp"] == 0.0
