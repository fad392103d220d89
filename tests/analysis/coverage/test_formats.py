from analysis.coverage.formats import search_replace_text, span_boundary_rows, unified_diff_text
from analysis.oracle.covmax import line_oracle, token_oracle

SOURCE = "def f(x):\n    return x\n\ndef g(x):\n    return x\n"
TARGET = "def f(x):\n    return x\n\ndef g(x):\n    return x + 1\n"


def test_search_block_is_unique_in_the_source():
    text = search_replace_text(SOURCE, TARGET)
    search = text.split("<<<<<<< SEARCH\n")[1].split("=======\n")[0]
    replace = text.split("=======\n")[1].split(">>>>>>> REPLACE\n")[0]
    assert SOURCE.count(search) == 1
    assert SOURCE.replace(search, replace) == TARGET


def test_unified_diff_has_the_change():
    diff = unified_diff_text(SOURCE, TARGET, 3)
    assert "-    return x\n" in diff and "+    return x + 1\n" in diff


def test_line_copy_tokens_can_differ_from_the_gold_tokenization(qwen):
    source = "x = f(a).\ny = 2\n"
    target = "x = f(a).\n\ny = 2\n"  # the inserted blank line glues to '.\n' in the gold output
    src, tgt = qwen.encode(source), qwen.encode(target)
    rows = span_boundary_rows(line_oracle(source, target), src, tgt, qwen)
    assert any(r["mismatched"] for r in rows)
    token_rows = span_boundary_rows(token_oracle(src, tgt), src, tgt, qwen)
    assert not any(r["mismatched"] for r in token_rows)
