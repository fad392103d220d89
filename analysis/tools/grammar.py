"""`copydecode grammar`: the program grammar of one source, for a serving engine.

    copydecode grammar (--case-id ID [--framing F] | --source FILE) [--format lark|ebnf|regex]
                       [--forced-spans] [--out FILE]

prints the grammar (analysis.grammar.export) to stdout, or writes it to FILE. lark is llguidance's
dialect (vLLM's guidance backend, SGLang's llguidance backend), ebnf is GBNF (xgrammar, llama.cpp),
regex is for outlines-core (symbolic form only). The Lark and GBNF texts carry a header saying what
the grammar enforces and leaves out; a regex has no room for one, so its notes go to stderr.
docs/grammar.md shows the request bodies that post these grammars to vLLM and SGLang.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from analysis.errors import CorpusError, GrammarError


def add_arguments(parser) -> None:
    from analysis.grammar.export import FORMATS

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--case-id", dest="case_id", help="a case of data/corpora/cases.parquet (its source)")
    source.add_argument("--source", metavar="FILE", help="a source file (UTF-8 text)")
    parser.add_argument("--framing", default=None,
                        help="with --case-id, the framing of a multi-framing corpus (HEvalFix: body, decl, ...)")
    parser.add_argument("--format", default="lark", choices=FORMATS,
                        help="lark (llguidance), ebnf (GBNF: xgrammar, llama.cpp) or regex (outlines-core); default lark")
    parser.add_argument("--forced-spans", dest="forced", action="store_true",
                        help="follow each copy directive with the literal text of its lines, so the engine's "
                             "fast-forward returns the copy (lark and ebnf)")
    parser.add_argument("--out", dest="grammar_out", default=None, metavar="FILE",
                        help="write the grammar here instead of stdout")


def case_source(case_id: str, framing: str | None) -> tuple[str, str]:
    """(source, name) of a case of the cases table; the framing is needed where the case has several."""
    from analysis.corpora.cases import read_cases
    from analysis.layout import CASES

    rows = read_cases(CASES).filter(pl.col("case_id") == case_id)
    if rows.is_empty():
        raise CorpusError(f"grammar: no case {case_id!r} in {CASES}")
    framings = sorted(rows["framing"].to_list())
    if framing is not None:
        rows = rows.filter(pl.col("framing") == framing)
        if rows.is_empty():
            raise CorpusError(f"grammar: case {case_id!r} has no framing {framing!r} (it has {', '.join(framings)})")
    elif rows.height > 1:
        raise CorpusError(f"grammar: case {case_id!r} has the framings {', '.join(framings)}; choose one with --framing")
    row = rows.row(0, named=True)
    return row["source"], f"{case_id} ({row['framing']})"


def file_source(path: str) -> tuple[str, str]:
    file = Path(path)
    if not file.is_file():
        raise GrammarError(f"grammar: --source {path}: no such file")
    data = file.read_bytes()
    try:
        return data.decode("utf-8"), file.name
    except UnicodeDecodeError as exc:
        raise GrammarError(f"grammar: --source {path} is not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") from None


def command(args) -> int:
    from analysis.grammar.export import export
    from analysis.pipeline.io import write_text

    if args.framing and not args.case_id:
        raise GrammarError("grammar: --framing goes with --case-id (a --source file has no framing)")
    source, name = case_source(args.case_id, args.framing) if args.case_id else file_source(args.source)
    grammar = export(source, args.format, args.forced, name)
    if grammar.format == "regex":
        for line in grammar.notes:
            print(f"copydecode grammar: {line}", file=sys.stderr)
    if args.grammar_out:
        write_text(grammar.text, args.grammar_out)
        print(f"copydecode grammar: wrote {args.grammar_out} ({len(grammar.text.encode('utf-8')):,} bytes, "
              f"{grammar.n_lines} source lines, {grammar.format}, {'forced-span' if grammar.forced else 'symbolic'})",
              file=sys.stderr)
    else:
        sys.stdout.write(grammar.text)
    return 0
