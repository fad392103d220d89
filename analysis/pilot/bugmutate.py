"""Seeded bug-injecting mutations of a Python function, for the pilot's `bugfix` task (torch-free).

Each operator plants one bug of a HumanEvalFix bug type in a correct function, on one line:

- wrong_operator     operator misuse: `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`, `+` <-> `-`, `+=` <-> `-=`,
                     `and` <-> `or`
- off_by_one         value misuse: a decimal integer literal n becomes n + 1 or n - 1
- swapped_variable   variable misuse: one read of a variable (a parameter or an assigned name) reads
                     another variable of the function instead
- missing_clause     missing logic: one operand of a one-line `and`/`or` dropped, or one one-line
                     simple statement (in a block of two or more, not a docstring) deleted
- excess_clause      excess logic: a one-line `if`/`while` test gets `and v` or `or v` (v another variable)

`draw_mutation` lists the operator's sites in the function and draws them one at a time with the
caller's seeded `random.Random` until one is verified (`verify`: the mutant parses, differs from the
original, and the line-level fix program rebuilds the original exactly from the mutant); a function
with no verified site yields None, which the caller counts (nothing is skipped silently).
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

from analysis.errors import CorpusError
from analysis.grammar.program import parse, render
from analysis.grammar.resolver import resolve
from analysis.oracle.covmax import line_oracle

MUTATION_KINDS: tuple[str, ...] = (
    "wrong_operator", "off_by_one", "swapped_variable", "missing_clause", "excess_clause",
)

OPERATOR_SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+",
                  "+=": "-=", "-=": "+=", "and": "or", "or": "and"}
DECIMAL = re.compile(r"[0-9]+\Z")


@dataclass(frozen=True)
class Mutation:
    """A planted bug: its operator, the 1-based line of the original function it changes, and the
    whole mutated (buggy) function."""

    kind: str
    site_line: int
    text: str


# ---------------------------------------------------------------- line surgery

def parses(text: str) -> bool:
    """Whether `text` is Python that parses."""
    try:
        return ast.parse(text) is not None
    except SyntaxError:
        return False


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _replace(text: str, line: int, start: int, end: int, new: str) -> str:
    """`text` with characters start..end of 1-based `line` replaced by `new`."""
    lines = _lines(text)
    row = lines[line - 1]
    lines[line - 1] = row[:start] + new + row[end:]
    return "".join(lines)


def _char_col(text: str, line: int, byte_col: int) -> int:
    """ast's UTF-8 byte column as a character column of `line`."""
    return len(_lines(text)[line - 1].encode("utf-8")[:byte_col].decode("utf-8"))


def _span(text: str, node: ast.AST) -> tuple[int, int, int] | None:
    """(line, start, end) character span of a one-line node; None for a node over several lines."""
    if node.lineno != node.end_lineno:
        return None
    return (node.lineno, _char_col(text, node.lineno, node.col_offset),
            _char_col(text, node.lineno, node.end_col_offset))


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _parsed(text: str) -> tuple[ast.AST, list[str]]:
    """The function's tree, and its parameters and assigned names, sorted (the names a variable misuse
    may swap in, and an excess clause may test)."""
    tree = ast.parse(text)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return tree, sorted(names)


# ---------------------------------------------------------------- site finders

def _operator_sites(text: str) -> list[Mutation]:
    return [Mutation("wrong_operator", tok.start[0],
                     _replace(text, tok.start[0], tok.start[1], tok.end[1], OPERATOR_SWAPS[tok.string]))
            for tok in _tokens(text)
            if tok.type in (tokenize.OP, tokenize.NAME) and tok.string in OPERATOR_SWAPS and tok.start[0] == tok.end[0]]


def _constant_sites(text: str) -> list[Mutation]:
    found = []
    for tok in _tokens(text):
        if tok.type == tokenize.NUMBER and DECIMAL.match(tok.string) and (tok.string == "0" or tok.string[0] != "0"):
            value = int(tok.string)
            for new in ([value + 1, value - 1] if value > 0 else [value + 1]):
                found.append(Mutation("off_by_one", tok.start[0],
                                      _replace(text, tok.start[0], tok.start[1], tok.end[1], str(new))))
    return found


def _variable_sites(text: str) -> list[Mutation]:
    tree, variables = _parsed(text)
    reads = [(node, _span(text, node)) for node in ast.walk(tree)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in variables]
    return [Mutation("swapped_variable", span[0], _replace(text, *span, other))
            for node, span in reads if span is not None for other in variables if other != node.id]


def _is_docstring(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


SIMPLE_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Delete,
                     ast.Pass, ast.Break, ast.Continue, ast.Assert)


def _missing_sites(text: str) -> list[Mutation]:
    tree = ast.parse(text)
    lines = _lines(text)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and _span(text, node) is not None:
            line, _, _ = _span(text, node)
            for i in range(len(node.values)):
                cut = (_span(text, node.values[i - 1])[2], _span(text, node.values[i])[2]) if i else \
                      (_span(text, node)[1], _span(text, node.values[1])[1])
                found.append(Mutation("missing_clause", line, _replace(text, line, cut[0], cut[1], "")))
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or len(block) < 2:
                continue
            for stmt in block:
                one_line = stmt.lineno == stmt.end_lineno and lines[stmt.lineno - 1].strip() == \
                    ast.get_source_segment(text, stmt)
                if isinstance(stmt, SIMPLE_STATEMENTS) and not _is_docstring(stmt) and one_line:
                    found.append(Mutation("missing_clause", stmt.lineno,
                                          "".join(lines[:stmt.lineno - 1] + lines[stmt.lineno:])))
    return found


def _excess_sites(text: str) -> list[Mutation]:
    tree, variables = _parsed(text)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.While)) or node.test.lineno != node.lineno:
            continue
        span = _span(text, node.test)
        if span is None:
            continue
        line, start, end = span
        test = _lines(text)[line - 1][start:end]
        wrap = isinstance(node.test, (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda))
        used = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        for other in (v for v in variables if v not in used):
            for joiner in ("and", "or"):
                new = f"({test}) {joiner} {other}" if wrap else f"{test} {joiner} {other}"
                found.append(Mutation("excess_clause", line, _replace(text, line, start, end, new)))
    return found


# one site finder per operator, in MUTATION_KINDS order
SITE_FINDERS: dict[str, Callable[[str], list[Mutation]]] = dict(zip(MUTATION_KINDS, (
    _operator_sites, _constant_sites, _variable_sites, _missing_sites, _excess_sites), strict=True))


# ---------------------------------------------------------------- verification and the draw

def fix_program(buggy: str, original: str) -> str:
    """The line-level oracle program that turns the mutant back into the original, rendered."""
    return render(line_oracle(buggy, original))


def verify(original: str, buggy: str) -> str:
    """The fix program of a mutant, after checking that the mutant parses and differs from the original
    and that the program rebuilds the original exactly (CorpusError otherwise)."""
    if buggy == original:
        raise CorpusError("bug mutation: the mutant equals the original")
    if not parses(buggy):
        raise CorpusError("bug mutation: the mutant does not parse")
    program = fix_program(buggy, original)
    if resolve(parse(program), buggy) != original:
        raise CorpusError("bug mutation: the fix program does not rebuild the original")
    return program


def draw_mutation(text: str, kind: str, rng: random.Random) -> Mutation | None:
    """One verified mutation of `kind` in `text`, its site drawn with `rng`; None when the operator has
    no site in the function whose mutant parses (the caller counts it)."""
    if kind not in SITE_FINDERS:
        raise CorpusError(f"bug mutation: unknown operator {kind!r}; known: {', '.join(MUTATION_KINDS)}")
    candidates = [m for m in SITE_FINDERS[kind](text) if m.text != text]
    while candidates:
        mutation = candidates.pop(rng.randrange(len(candidates)))
        if parses(mutation.text):
            verify(text, mutation.text)  # a mutant that parses must round-trip: a failure is a defect here
            return mutation
    return None
