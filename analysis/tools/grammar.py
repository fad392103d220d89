"""`copydecode grammar (--case-id ID [--framing F] | --source FILE) [--format lark|ebnf|regex] [--forced-spans]
[--out FILE]`: the program grammar of one source, for a structured-output engine (analysis.grammar.export;
the request bodies for vLLM and SGLang are in docs/grammar.md).

Printed to stdout, or written to FILE (atomically; a FILE that cannot be written, a folder or a name over
255 bytes, is a named error). A regex has no comment syntax, so its notes (what
the grammar enforces and leaves out) go to stderr; Lark and GBNF carry them as a header.
"""

from __future__ import annotations

import sys
from pathlib import Path

from analysis.errors import CorpusError, GrammarError
from analysis.grammar.export import FORMATS, export
from analysis.corpora.cases import read_cases
from analysis.layout import CASES
from analysis.results.percase import where
from analysis.pipeline.io import output_path_error, write_text


# `copydecode grammar`: its help line and what it reads and writes (the CLI's --help)
HELP = ("the program grammar of one source for a structured-output engine: symbolic or forced spans, in llguidance "
        "Lark, GBNF (xgrammar) or a regex (outlines-core); see docs/grammar.md")
READS_WRITES = ("reads data/corpora/cases.parquet, else its committed copy reports/percase/cases.parquet (--case-id), "
                "or --source FILE; it writes stdout or --out FILE")
READS_PARAMS = False  # the grammar depends on the source alone: --params and --set are refused, not ignored


def add_arguments(parser) -> None:
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--case-id", dest="case_id",
                       help="a case of data/corpora/cases.parquet, else of the committed reports/percase/cases.parquet "
                            "(its source)")
    given.add_argument("--source", metavar="FILE", help="a source file (UTF-8)")
    parser.add_argument("--framing", default=None,
                        help="the framing of a multi-framing case (HEvalFix: body, decl, prompt)")
    parser.add_argument("--format", default="lark", choices=FORMATS,
                        help="lark: llguidance (vLLM's guidance backend, SGLang's llguidance); ebnf: GBNF "
                             "(xgrammar, llama.cpp); regex: outlines-core (symbolic form only). Default lark")
    parser.add_argument("--forced-spans", dest="forced", action="store_true",
                        help="each copy directive followed by the literal copied lines, so that an engine "
                             "fast-forwards the span (default: the program alone)")
    parser.add_argument("--out", dest="grammar_out", default=None, metavar="FILE",
                        help="write the grammar here instead of stdout")


def case_source(case_id: str, framing: str | None) -> tuple[str, str]:
    """(source, label) of a case in the cases table (this run's, else the committed copy, as the explorer reads
    it; which one is said on stderr when it is the copy); a case with several framings needs --framing."""
    import polars as pl

    table = where("cases") or CASES  # neither: read_cases names the missing data/ table
    if table != CASES:
        print(f"copydecode grammar: no {CASES}; reading the committed run's copy, {table}", file=sys.stderr)
    rows = read_cases(table).filter(pl.col("case_id") == case_id)
    if rows.is_empty():
        raise CorpusError(f"no case {case_id!r} in {table}")
    framings = sorted(rows["framing"].unique().to_list())
    if framing is not None:
        rows = rows.filter(pl.col("framing") == framing)
        if rows.is_empty():
            raise CorpusError(f"case {case_id!r} has no framing {framing!r} (it has {', '.join(framings)})")
    elif rows.height > 1:
        raise CorpusError(f"case {case_id!r} has {rows.height} framings ({', '.join(framings)}): choose one "
                          "with --framing")
    row = rows.row(0, named=True)
    return row["source"], f"case {case_id} ({row['framing']})"


def file_source(path: str) -> tuple[str, str]:
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"--source {path}: no such file")
    try:
        return p.read_text(encoding="utf-8"), f"file {p.name}"
    except UnicodeDecodeError as exc:
        raise CorpusError(f"--source {path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def command(args) -> int:
    if args.grammar_out == "":  # an unset $VAR: printing to stdout instead would hide it
        raise GrammarError("--out is empty; give a file name, or leave --out out to print the grammar")
    if args.framing and not args.case_id:
        raise GrammarError("--framing chooses among a case's framings; it has no meaning with --source")
    source, label = case_source(args.case_id, args.framing) if args.case_id else file_source(args.source)
    exported = export(source, args.format, args.forced, label)
    if exported.format == "regex":
        for note in exported.notes:
            print(note, file=sys.stderr)
    if args.grammar_out:
        try:
            write_text(exported.text(), args.grammar_out)
        except (OSError, UnicodeEncodeError) as exc:  # about the path the user named: named here, not a traceback
            named = output_path_error(exc, "--out", args.grammar_out)
            if named is None:
                raise
            raise named from None
        print(f"copydecode grammar: wrote {args.grammar_out} ({len(exported.text()):,} characters)", file=sys.stderr)
    else:
        sys.stdout.write(exported.text())
    return 0
