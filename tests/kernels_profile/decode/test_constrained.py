"""Grammar-constrained generation on the tiny random model with the byte-level toy tokenizer: every
generated program is valid (the mask's guarantee), judged strictly, within the token budget."""

import polars as pl
import pytest

torch = pytest.importorskip("torch")

from fixtures import toy_model_tokenizer  # noqa: E402

from analysis.grammar.fsm import ProgramFSM  # noqa: E402
from kernels_profile.decode.constrained import constrained_generation, judged  # noqa: E402

SOURCE = "alpha = 1\nbeta = 2\ngamma = 3\n"


def test_every_program_generated_under_the_mask_is_valid(tiny):
    tok = toy_model_tokenizer()
    tiny.model.generation_config.eos_token_id = tok.eos_ids[0]  # generate stops at EOS, as a real model's config says
    rows = pl.DataFrame({"case_id": ["C/1", "C/2"], "corpus": ["C", "C"], "source": [SOURCE, SOURCE + "delta = 4\n"],
                         "instruction": ["on line 2, change 2 to 5", "delete line 4"],
                         "target": [SOURCE.replace("2", "5"), SOURCE]})
    records = constrained_generation(tiny, tok, rows, max_new=40)
    assert [r["case_id"] for r in records] == ["C/1", "C/2"]
    for record, source in zip(records, rows["source"]):
        assert record["valid"] is True and isinstance(record["exact_match"], bool)
        assert 0 < record["new_tokens"] <= 40 and record["seconds"] > 0
        fsm = ProgramFSM(tok.fsm_tokenizer, {"lines": source.count("\n")}, eos_ids=tok.eos_ids)
        assert fsm.accepts(record["program"])


def test_a_program_that_is_not_utf8_or_does_not_parse_is_neither_valid_nor_a_match():
    tok = toy_model_tokenizer()
    fsm = ProgramFSM(tok.fsm_tokenizer, {"lines": 3}, eos_ids=tok.eos_ids)
    row = {"source": SOURCE, "target": SOURCE}
    assert judged(fsm, b'<copy lines="1-3"/>', '<copy lines="1-3"/>', row) == (True, True)
    assert judged(fsm, b'<copy lines="1-2"/>', '<copy lines="1-2"/>', row) == (True, False)
    assert judged(fsm, b"\xff", "\\xff", row) == (False, False)
    assert judged(fsm, b"<copy lines=", "<copy lines=", row) == (False, False)
