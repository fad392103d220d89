import pytest

from analysis.errors import TokenizerError
from analysis.text.tokens import (
    count_split_boundaries,
    embedded_qwen_dir,
    load_tokenizer,
    tokens_per_line,
)


def test_embedded_default_is_qwen(qwen):
    assert qwen.vocab_size == 151_643 + 22 or qwen.vocab_size > 151_000
    assert (embedded_qwen_dir() / "merges.txt").is_file()


def test_bytes_spell_the_text(qwen):
    text = "def f():\n\treturn 'é中𓀀'\r\n\n"
    tok = qwen.encode(text)
    assert b"".join(tok.pieces) == text.encode()
    assert tok.char_bounds[0] == 0 and tok.char_bounds[-1] == len(text)


def test_blank_lines_merge_into_the_previous_newline(qwen):
    text = "x = f(a).\n\n\ny = 2\n"
    tok = qwen.encode(text)
    per_line = tokens_per_line(tok)
    assert sum(per_line) == len(tok)
    assert per_line[1] == 0 and per_line[2] == 0  # blank lines glued to '.\n\n\n'
    assert count_split_boundaries(tok) == 2


def test_unknown_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerError, match="has no tokenizer.json"):
        load_tokenizer(str(tmp_path))


def test_local_folder_loads(tmp_path, qwen):
    import shutil

    shutil.copy(embedded_qwen_dir() / "tokenizer.json", tmp_path / "tokenizer.json")
    local = load_tokenizer(str(tmp_path))
    assert local.encode("print(1)\n").ids == qwen.encode("print(1)\n").ids


def test_non_nfc_text_is_tokenized_byte_for_byte(qwen):
    import unicodedata

    text = "x = '\uf900'\n"  # a CJK compatibility ideograph that NFC rewrites
    assert unicodedata.normalize("NFC", text) != text
    tok = qwen.encode(text)
    assert b"".join(tok.pieces) == text.encode()
    from tokenizers import Tokenizer as Backend

    original = Backend.from_file(str(embedded_qwen_dir() / "tokenizer.json"))  # with its NFC normalizer
    nfc = "def f():\n    return 'é中'\n"
    assert qwen.encode(nfc).ids == tuple(original.encode(nfc, add_special_tokens=False).ids)


SPECIAL_BODIES = ["<|endoftext|>", "a <|im_end|>\n", "<tool_call>{}</tool_call>", "<|im_start|>user<think>"]


@pytest.mark.parametrize("body", SPECIAL_BODIES)
def test_program_text_spells_added_tokens_as_bytes(qwen, body):
    from analysis.grammar.fsm import ProgramFSM
    from analysis.grammar.program import Gen, Program, render

    text = render(Program((Gen(body),)))
    assert any(i in qwen.added_token_ids for i in qwen.encode(text).ids)  # what a chat template wants
    tok = qwen.encode_program(text)
    assert not set(tok.ids) & qwen.added_token_ids
    assert b"".join(tok.pieces) == text.encode()
    fsm = ProgramFSM(qwen, {"lines": 1}, eos_ids=(151643,))
    walker = fsm.walker()
    for token in tok.ids:
        walker.advance(token)
    assert walker.is_accepting()


def test_program_text_without_added_tokens_tokenizes_as_before(qwen, hep_dir):
    import json

    from analysis.oracle.covmax import line_oracle
    from analysis.grammar.program import render

    records = [json.loads(line) for line in (hep_dir / "python.jsonl").read_text().splitlines()[:40]]
    texts = [r["buggy_solution"] for r in records] + [render(line_oracle(r["buggy_solution"], r["canonical_solution"])) for r in records]
    texts += ["def f():\n\treturn 'é中𓀀'\r\n\n", "x = '\uf900'\n", "<|endoftext"]
    for text in texts:
        assert qwen.encode_program(text).ids == qwen.encode(text).ids
    assert qwen.encode_program("a<|im_end|>b").ids != qwen.encode("a<|im_end|>b").ids


# ---------------------------------------------------------------- fast wrapping against the per-character reference

from hypothesis import given as _given  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402


@_given(_st.text(alphabet=_st.sampled_from(list("ab \n\u00e9\u4e2d\U0001f600\u0301x=(")), max_size=60))
def test_char_bounds_equal_the_per_character_offsets(text):
    from analysis.text.tokens import _char_bounds

    raw = text.encode("utf-8")
    bounds = list(range(len(raw) + 1))  # every byte offset, inside characters too
    reference, pos = {}, 0  # byte offset -> character offset, at the bytes that start a character (and the end)
    for i, ch in enumerate(text):
        reference[pos] = i
        pos += len(ch.encode("utf-8"))
    reference[pos] = len(text)
    assert _char_bounds(raw, bounds) == tuple(reference.get(b) for b in bounds)


def test_encode_many_shares_repeated_neighbours_and_matches_encode(qwen):
    texts = ["x = 1\n", "x = 1\n", "caf\u00e9 \U0001f600\n", "x = 1\n", "", ""]
    many = qwen.encode_many(texts)
    assert many[0] is many[1] and many[4] is many[5]  # a case's text on its two rows: tokenized once
    assert many[3] is not many[0]  # far apart (a benchmark's cycled copy): tokenized again, as a distinct case
    assert many == [qwen.encode(t) for t in texts]
    assert qwen.encode_many([]) == []


def test_encode_many_gives_the_ids_of_encode_on_real_text(qwen):
    texts = ["def f(x):\n    return x + 1  # caf\u00e9 \U0001f600\n" * 3, "  \t\n\n", "<gen>&lt;</gen>", "\u4e2d\u6587\n"]
    assert [t.ids for t in qwen.encode_many(texts)] == [qwen.encode(t).ids for t in texts]
