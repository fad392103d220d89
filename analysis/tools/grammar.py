"""`copydecode grammar (--case-id ID [--framing F] | --source FILE) [--format lark|ebnf|regex] [--forced-spans]
[--out FILE]`: the program grammar of one source, for a structured-output engine (analysis.grammar.export;
the request bodies for vLLM and SGLang are in docs/grammar.md).

Printed to stdout, or written to FILE (atomically; a FILE that cannot be written, a folder or a name over
255 bytes, is a named error). A regex has no comment syntax, so its notes (what
the grammar enforces and leaves out) go to stderr; Lark and GBNF carry them as a header.
"""

from __future__ import annotations

import stat
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
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--case-id", dest="case_id",
                       help="a case of data/corpora/cases.parquet, else of the committed reports/percase/cases.parquet "
                            "(its source)")
    where.add_argument("--source", metavar="FILE", help="a source file (UTF-8; its bytes, line endings included)")
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


# as corpora.max_text_bytes bounds a case's texts: a source past it is not an edit this suite serves (a 100 MB
# line took 4.3 GB to export before the bound)
MAX_SOURCE_BYTES = 8 << 20


def file_source(path: str) -> tuple[str, str]:
    """(source, label) of a file, read as bytes and decoded as UTF-8 with no newline translation: the grammar's
    lines are the file's lines as the suite splits them (only '\\n' ends a line, so a CRLF line keeps its
    '\\r\\n' and a CR-only file is one line), and its copy spans are the file's bytes."""
    p = Path(path)
    try:
        info = p.stat()
    except FileNotFoundError:
        raise CorpusError(f"--source {path}: no such file") from None
    except OSError as exc:
        raise CorpusError(f"--source {path}: cannot read it ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise CorpusError(f"--source {path}: is a folder; give a source file")
    if not stat.S_ISREG(info.st_mode):
        raise CorpusError(f"--source {path}: not a regular file (a FIFO, a device or a socket); give a source file")
    if info.st_size > MAX_SOURCE_BYTES:
        raise CorpusError(f"--source {path}: {info.st_size:,} bytes, above the {MAX_SOURCE_BYTES:,} a source may hold "
                          "(as corpora.max_text_bytes bounds a case's texts)")
    with p.open("rb") as handle:
        data = handle.read(MAX_SOURCE_BYTES + 1)  # a file that grew since its stat is bounded too
    if len(data) > MAX_SOURCE_BYTES:
        raise CorpusError(f"--source {path}: above the {MAX_SOURCE_BYTES:,} bytes a source may hold")
    try:
        return data.decode("utf-8"), f"file {p.name}"
    except UnicodeDecodeError as exc:
        raise CorpusError(f"--source {path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def is_grammar_export(path: Path) -> bool:
    """Whether `path` holds a grammar this command wrote (its header; a regex export is one line of a
    program's expression), so that writing over it loses nothing of the user's."""
    with path.open("rb") as handle:
        head = handle.read(64)
    if head.startswith((b"%llguidance {}\n// copydecode grammar:", b"# copydecode grammar:")):
        return True
    with path.open("rb") as handle:
        return head.startswith(b"(?:") and handle.read().count(b"\n") == 1


def check_grammar_out(out: str) -> None:
    """--out FILE writes a new file, or over a grammar this command wrote; never over anything else (a
    tracked params.yaml, a module, a folder's file of the user's)."""
    path = Path(out)
    try:
        if not path.exists() or not path.is_file():
            return  # a missing file is made; a folder or other special path is named by the write itself
        ours = is_grammar_export(path)
    except OSError:
        return
    if not ours:
        raise GrammarError(f"--out {out}: the file exists and is not a grammar `copydecode grammar` wrote; give a "
                           "new file name (or remove that file first)")


def command(args) -> int:
    if args.grammar_out == "":  # an unset $VAR: printing to stdout instead would hide it
        raise GrammarError("--out is empty; give a file name, or leave --out out to print the grammar")
    if args.framing and not args.case_id:
        raise GrammarError("--framing chooses among a case's framings; it has no meaning with --source")
    if args.grammar_out:
        check_grammar_out(args.grammar_out)
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
