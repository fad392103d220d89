"""Which directive tokens the grammar forces (the jump-forward variant), counted by hand on the Qwen2.5
tokenizer: `<copy lines="12-15"/>` is `<` `copy` ` lines` `="` `1` `2` `-` `1` `5` `"/>`."""

import pytest

from analysis.grammar.program import Copy, Gen
from analysis.rivals.forced import ForcedCounter


@pytest.mark.parametrize("limit, op, flags", [
    # ' lines' and '="' always; '-' once 12 cannot grow (120 > 20); '"/>' once 15 cannot (150 > 20)
    (20, Copy(12, 15), (False, False, True, True, False, False, True, False, False, True)),
    # 200 lines: 12 may still become 120..199, 15 may become 150..199: only ' lines' and '="'
    (200, Copy(12, 15), (False, False, True, True, False, False, False, False, False, False)),
    # 3 -> 30 > 20: '-' forced; the end must reach 3..20 from '2': only '0' (20), then '"/>'
    (20, Copy(3, 20), (False, False, True, True, False, True, False, True, True)),
])
def test_copy_tags(qwen, limit, op, flags):
    assert ForcedCounter(qwen, "lines", limit).of(op).flags == flags


def test_gen_tags_force_their_closing_bracket_only(qwen):
    # `<` `gen` `>` and `</` `gen` `>`: the op's `<` may be EOS's alternative, `gen` may be `copy`, `</` may be text
    forcing = ForcedCounter(qwen, "lines", 9).of(Gen("x = 1\n"))
    assert forcing.flags == (False, False, True, False, False, True) and forcing.total == 2


def test_token_unit_tags(qwen):
    # `<copy tokens="3-9"/>` over a 9-token source: 3 -> 30 > 9 forces '-', 9 -> 90 > 9 forces '"/>'
    flags = ForcedCounter(qwen, "tokens", 9).of(Copy(3, 9, "tokens")).flags
    assert flags == (False, False, True, True, False, True, False, True)
