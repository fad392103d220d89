"""`copydecode grammar`: one source's grammar to stdout or a file, from a case or a file; every bad input
is a named error (exit 2), never a traceback."""

import re

import pytest

from analysis.cli import main
from analysis.corpora.cases import Case, cases_frame
from analysis.layout import CASES

SOURCE = "def f(x):\n    return x\n"


@pytest.fixture()
def scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src.py").write_text(SOURCE)
    CASES.parent.mkdir(parents=True)
    cases_frame([Case("T/1", "T", "python", "body", SOURCE, "y\n"), Case("T/1", "T", "python", "decl", "a\n", "b\n"),
                 Case("U/1", "U", "python", "body", "one\n", "two\n")]).write_parquet(CASES)
    return tmp_path


def test_a_source_file_prints_its_grammar(scratch, capsys):
    assert main(["grammar", "--source", "src.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("%llguidance {}\n") and "src.py, 2 lines" in out and "SPAN: /1-([1-2])|2-(2)/" in out


def test_a_case_writes_its_forced_grammar_to_a_file(scratch, capsys):
    assert main(["grammar", "--case-id", "T/1", "--framing", "body", "--format", "ebnf", "--forced-spans",
                 "--out", "g.gbnf"]) == 0
    text = (scratch / "g.gbnf").read_text()
    assert "T/1 (body), 2 lines" in text and 'l2 ::= "    return x\\n"' in text
    assert "wrote g.gbnf" in capsys.readouterr().err
    assert main(["grammar", "--case-id", "U/1"]) == 0  # one framing: none needed


def test_a_regex_goes_to_stdout_alone_with_its_notes_on_stderr(scratch, capsys):
    assert main(["grammar", "--source", "src.py", "--format", "regex"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("(?:<copy lines=") and "\n" not in captured.out[-1:]
    assert "not enforced: copies in source order" in captured.err


@pytest.mark.parametrize("argv,message", [
    (["--source", "src.py", "--format", "regex", "--forced-spans"], "no compact regex"),
    (["--source", "missing.py"], "--source missing.py: no such file"),
    (["--case-id", "T/1"], "has the framings body, decl; choose one with --framing"),
    (["--case-id", "T/1", "--framing", "unit"], "case 'T/1' has no framing 'unit' \\(it has body, decl\\)"),
    (["--case-id", "Z/9"], "no case 'Z/9'"),
    (["--source", "src.py", "--framing", "body"], "--framing goes with --case-id"),
    (["--source", "latin1.py"], "latin1.py is not UTF-8 text \\(byte 1"),
])
def test_bad_input_is_a_named_error(scratch, capsys, argv, message):
    (scratch / "latin1.py").write_bytes(b"x\xe9y\n")
    assert main(["grammar", *argv]) == 2
    err = capsys.readouterr().err
    assert "copydecode grammar: error:" in err and re.search(message, err), err
    assert "Traceback" not in err


def test_a_missing_cases_table_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["grammar", "--case-id", "T/1"]) == 2
    assert "no cases table; run `copydecode corpora`" in capsys.readouterr().err
