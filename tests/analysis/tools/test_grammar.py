"""`copydecode grammar`: a case's or a file's grammar to stdout or a file; bad input is a named error."""

import re

from fixtures import toy_cases

from analysis.cli import main
from analysis.corpora.cases import Case, cases_frame
from analysis.grammar.export import export


def write_cases(root, cases):
    (root / "data" / "corpora").mkdir(parents=True)
    cases_frame(cases).write_parquet(root / "data" / "corpora" / "cases.parquet")


def test_a_case_grammar_goes_to_stdout(tmp_path, monkeypatch, capsys):
    write_cases(tmp_path, toy_cases())
    monkeypatch.chdir(tmp_path)
    assert main(["grammar", "--case-id", "T/1", "--forced-spans"]) == 0
    out = capsys.readouterr().out
    assert out == export(toy_cases()[0].source, "lark", True, "case T/1 (body)").text()
    assert '"    y = x + 1\\n" span::incr' in out


def test_a_file_grammar_goes_to_out_and_a_regex_is_the_expression_alone(tmp_path, capsys):
    source = tmp_path / "s.py"
    source.write_text("a = 1\nb = 2\n")
    target = tmp_path / "g.regex"
    assert main(["grammar", "--source", str(source), "--format", "regex", "--out", str(target)]) == 0
    text = target.read_text()
    assert text.count("\n") == 1 and re.fullmatch(text.strip(), '<copy lines="1-2"/><gen>x</gen>')
    assert "Not enforced" in capsys.readouterr().err  # the notes a regex cannot carry


def test_bad_input_is_a_named_error(tmp_path, monkeypatch, capsys):
    write_cases(tmp_path, toy_cases() + [Case("T/1", "Toy", "python", "decl", "x\n", "y\n")])
    monkeypatch.chdir(tmp_path)
    assert main(["grammar", "--case-id", "nope/1"]) == 2
    assert "no case 'nope/1'" in capsys.readouterr().err
    assert main(["grammar", "--case-id", "T/1"]) == 2
    assert "2 framings (body, decl): choose one with --framing" in capsys.readouterr().err
    assert main(["grammar", "--case-id", "T/1", "--framing", "prompt"]) == 2
    assert "has no framing 'prompt'" in capsys.readouterr().err
    assert main(["grammar", "--source", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "latin1.py").write_bytes(b"caf\xe9\n")
    assert main(["grammar", "--source", str(tmp_path / "latin1.py")]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    (tmp_path / "ok.py").write_text("x\n")
    assert main(["grammar", "--source", str(tmp_path / "ok.py"), "--format", "regex", "--forced-spans"]) == 2
    assert "no regex export" in capsys.readouterr().err


def test_a_case_is_found_in_the_committed_copy_on_a_fresh_clone(tmp_path, monkeypatch, capsys):
    """UX review C9: docs/grammar.md's first example failed on a clone without data/ ("no cases table"); it reads
    the committed per-case copy, as the explorer does, and says so; with neither table the error names data/'s."""
    monkeypatch.chdir(tmp_path)
    assert main(["grammar", "--case-id", "T/1"]) == 2
    assert "data/corpora/cases.parquet: no cases table" in capsys.readouterr().err
    (tmp_path / "reports" / "percase").mkdir(parents=True)
    cases_frame(toy_cases()).write_parquet(tmp_path / "reports" / "percase" / "cases.parquet")
    assert main(["grammar", "--case-id", "T/1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == export(toy_cases()[0].source, "lark", False, "case T/1 (body)").text()
    assert "reading the committed run's copy, reports/percase/cases.parquet" in captured.err
