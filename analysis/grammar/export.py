"""The program grammar for serving engines: llguidance Lark, GBNF (xgrammar, llama.cpp) and a regex (outlines-core).

Two forms, line copies only (the token unit `<copy tokens="i-j"/>` is not exported):

- symbolic: the program language of analysis.grammar.program for a source of N lines, ops written
  back to back, `<copy lines="i-j"/>` with 1 <= i <= j <= N, `<gen>BODY</gen>` with the canonical
  escapes. It is the language the suite FSM (analysis.grammar.fsm) walks, no more and no less
  (property-tested in tests/analysis/grammar/test_export.py): copies in source order are *not*
  required, because the program language does not require them (a program may move lines). The KV
  copy is left to the caller.
- forced-span: each directive `<copy lines="i-j"/>` is followed by the literal text of lines i..j,
  so the grammar's language is the sequence the model sees (kernels_profile.decode.sequence: each
  op's text, the copied text right after its directive) and, once a directive is closed, the engine's
  fast-forward (llguidance `compute_ff_tokens`, xgrammar `find_jump_forward_string`) returns the
  copied text: the copy becomes "structured output with fast-forward", one prefill.

Sizes. The symbolic form is O(N log N) in every format. The forced form in Lark uses llguidance's
parametric rules: the two numbers are read digit by digit through tries whose nodes carry i in the
rule parameter's bits [0:16] (each node at most 11 alternatives, under llguidance's 2,000 Earley
items per row), j is stored in bits [16:32] when its trie closes, and one rule emits line p[0:16] and
steps on until p[0:16] == p[16:32]: O(N) rules plus the source's text, within llguidance's u16 symbol
table up to FORCED_LARK_MAX_LINES lines (measured). GBNF has no parameters, so its forced form needs one
alternative per pair (i, j), O(N^2), with its rules kept to O(N + (N / BLOCK_LINES)^2) by a two-level
(block, line) encoding; FORCED_EBNF_MAX_LINES bounds it. A regex cannot carry the forced
form without repeating the text once per pair (O(N^3) characters): it is refused by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from analysis.errors import GrammarError, ProgramError
from analysis.grammar import body
from analysis.grammar.program import COPY_END, COPY_TAGS, GEN_CLOSE, GEN_OPEN, RANGE_SEP, Program, parse
from analysis.grammar.ranges import max_with_prefix, range_gbnf, range_regex
from analysis.grammar.resolver import resolve
from analysis.text.lines import split_lines

FORMATS = ("lark", "ebnf", "regex")
RANGE_MODES = ("full", "bounded", "none")
# bits [0:16] and [16:32] of the forced Lark form's rule parameter hold line numbers
PARAMETER_MAX_LINES = 2 ** 16 - 1
# llguidance 1.9.1 panics on a grammar of u16::MAX - 10 symbols, and it makes every reference to a terminal
# a symbol: the forced Lark form spends about six per line whatever the text (measured on Qwen2.5: 10,000
# lines compile in 1.5 s, 11,000 overflow the table)
FORCED_LARK_MAX_LINES = 10_000
# the forced GBNF form holds N (N + 1) / 2 alternatives: about 15 MB of grammar at 1,000 lines
FORCED_EBNF_MAX_LINES = 1_000
BLOCK_LINES = 16

_COPY_OPEN = COPY_TAGS["lines"]


@dataclass(frozen=True)
class ExportedGrammar:
    text: str
    format: str      # lark | ebnf | regex
    forced: bool     # the forced-span form (copies followed by their text)
    n_lines: int
    notes: tuple[str, ...]  # what the grammar enforces and leaves out (the header of lark/ebnf; a regex has none)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise GrammarError(f"grammar format {fmt!r} unknown; known: {', '.join(FORMATS)}")
    return fmt


# ---------------------------------------------------------------- notes (the header)

def _notes(n_lines: int, fmt: str, forced: bool, name: str | None) -> tuple[str, ...]:
    engine = {"lark": "llguidance Lark (vLLM --structured-outputs-config.backend guidance, SGLang "
                      "--grammar-backend llguidance, llama.cpp)",
              "ebnf": "GBNF (xgrammar: vLLM backend xgrammar, SGLang; llama.cpp; vLLM's guidance backend reads it too)",
              "regex": "regex (outlines-core; Rust regex syntax, no lookaround)"}[fmt]
    notes = [f"copydecode program grammar, {'forced-span' if forced else 'symbolic'} form, {engine}",
             f"source: {name or 'unnamed'}, {n_lines} lines",
             "ops back to back, nothing between: <copy lines=\"i-j\"/> and <gen>BODY</gen>; the engine ends the "
             "output (EOS) only between ops",
             f"enforced: 1 <= i <= j <= {n_lines}, numbers without leading zeros; a <gen> body is non-empty, holds no "
             "raw <copy, <gen or </gen before its close and only the canonical escapes &lt; &amp;",
             "not enforced: copies in source order; the program language (and the suite FSM) allows any order, "
             "so a program may move lines",
             "line copies only; the token unit <copy tokens=\"i-j\"/> is not exported"]
    if n_lines == 0:
        notes.append("the source has no lines: only <gen> ops are possible")
    if forced:
        notes.append("each directive is followed by the literal text of lines i..j: after its '\"/>' the engine's "
                     "fast-forward returns that text (one prefill); the output is the program with the copied "
                     "text inlined, as the model sees it")
        if fmt == "lark":
            notes.append("parametric rules (llguidance only): bits [0:16] carry i, then the line being emitted; "
                         f"bits [16:32] carry j; up to {FORCED_LARK_MAX_LINES} lines")
        if fmt == "ebnf":
            notes.append(f"one alternative per line pair (GBNF has no parameters): O(N^2) in size, blocks of "
                         f"{BLOCK_LINES} lines keep the rule count down; up to {FORCED_EBNF_MAX_LINES} lines")
    return tuple(notes)


def _header(notes: tuple[str, ...], marker: str) -> str:
    return "".join(f"{marker} {line}\n" for line in notes)


# ---------------------------------------------------------------- Lark (llguidance)

def _lark_literal(text: str) -> str:
    """A Lark string literal: JSON's escapes, which llguidance's Lark reads."""
    return json.dumps(text, ensure_ascii=False)


def _lark_rx(text: str) -> str:
    return text.replace("/", "\\/")


def lark_body() -> str:
    """The <gen> body lexeme (closing tag included) with llguidance's regex intersection and negation."""
    close = _lark_rx(GEN_CLOSE)
    any_ = r"(.|\n)"
    bad_lt = r"&lt;([^cg\/]|c[^o]|co[^p]|cop[^y]|g[^e]|ge[^n]|\/[^g]|\/g[^e]|\/ge[^n])"
    bad_amp = r"&amp;([^la]|l[^t]|lt[^;]|a[^m]|am[^p]|amp[^;])"
    return (f"/{any_}+{close}/ & ~/{any_}*(<copy|<gen|<\\/gen){any_}*{close}/"
            f" & ~/{any_}*{bad_lt}{any_}*/ & ~/{any_}*{bad_amp}{any_}*/")


def _span_regex(n_lines: int, range_mode: str) -> str:
    sep = _lark_rx(RANGE_SEP)
    if range_mode == "full":
        return "|".join(f"{i}{sep}({range_regex(i, n_lines)})" for i in range(1, n_lines + 1))
    number = range_regex(1, n_lines) if range_mode == "bounded" else "[1-9][0-9]*"
    return f"({number}){sep}({number})"


def symbolic_lark(n_lines: int, range_mode: str = "full") -> str:
    """The symbolic program grammar in llguidance's Lark, without a header. `range_mode` "full" is
    1 <= i <= j <= n; "bounded" only i, j <= n and "none" any positive numbers (the mask benchmark's
    looser variants)."""
    if range_mode not in RANGE_MODES:
        raise GrammarError(f"range_mode must be one of {', '.join(RANGE_MODES)}, got {range_mode!r}")
    if n_lines < 0:
        raise GrammarError(f"a source has a non-negative number of lines, got {n_lines}")
    rules = ["start: op*", f"gn: {_lark_literal(GEN_OPEN)} BODY", f"BODY: {lark_body()}"]
    if n_lines == 0 and range_mode != "none":
        return "\n".join(["start: op*", "op: gn", *rules[1:]]) + "\n"
    rules[1:1] = ["op: cp | gn", f"cp: {_lark_literal(_COPY_OPEN)} SPAN {_lark_literal(COPY_END)}"]
    rules.append(f"SPAN: /{_span_regex(n_lines, range_mode)}/")
    return "\n".join(rules) + "\n"


def _children(prefix: str, n_lines: int) -> list[str]:
    return [prefix + d for d in "0123456789" if int(prefix + d) <= n_lines]


# the strings of the tries, one terminal each
_TERMINALS = [f'D{d}: "{d}"' for d in "0123456789"] + [f"SEP: {json.dumps(RANGE_SEP)}", f"END: {json.dumps(COPY_END)}"]


def _first_number_rules(n_lines: int) -> list[str]:
    """The trie of i: rule a<p> after the digits p; SEP passes i = p on as the parameter of b."""
    def step(q: str) -> str:
        if _children(q, n_lines):
            return f"D{q[-1]} a{q}"
        return f"D{q[-1]} SEP b::{hex(int(q))}"  # a leaf: no rule of its own
    rules = ["a: " + " | ".join(step(d) for d in "123456789" if int(d) <= n_lines)]
    for k in range(1, n_lines + 1):
        p = str(k)
        kids = _children(p, n_lines)
        if kids:
            rules.append(f"a{p}: " + " | ".join([f"SEP b::{hex(k)}"] + [step(q) for q in kids]))
    return rules


def _second_number_rules(n_lines: int) -> list[str]:
    """The trie of j under parameter i: a digit only where some j >= i still starts with the digits so
    far (exact, as the FSM is); '"/>' where j >= i, storing j in bits [16:32]."""
    def close(k: int) -> str:
        return f"END ln::bit_or({k << 16}) %if le([0:16], {k})"

    def step(q: str) -> str:
        if _children(q, n_lines):
            return f"D{q[-1]} b{q}::_ %if le([0:16], {max_with_prefix(q, n_lines)})"
        return f"D{q[-1]} {close(int(q))}"
    rules = ["b::_ : " + " | ".join(step(d) for d in "123456789" if int(d) <= n_lines)]
    for k in range(1, n_lines + 1):
        p = str(k)
        kids = _children(p, n_lines)
        if kids:
            rules.append(f"b{p}::_ : " + " | ".join([close(k)] + [step(q) for q in kids]))
    return rules


def _line_rules(lines: list[str]) -> list[str]:
    """One terminal per distinct line text; rule ln emits line p[0:16] and steps on until p[16:32]."""
    names: dict[str, str] = {}
    for text in lines:
        names.setdefault(text, f"L{len(names) + 1}")
    alts = []
    for m, text in enumerate(lines, 1):
        alts.append(f"{names[text]} %if and(eq([0:16], {m}), eq([16:32], {m}))")
        alts.append(f"{names[text]} ln::incr([0:16]) %if and(eq([0:16], {m}), gt([16:32], {m}))")
    return ["ln::_ : " + "\n    | ".join(alts)] + [f"{name}: {_lark_literal(text)}" for text, name in names.items()]


def forced_lark(lines: list[str]) -> str:
    """The forced-span grammar in llguidance's Lark (parametric rules), without a header."""
    n = len(lines)
    if n > FORCED_LARK_MAX_LINES:
        raise GrammarError(
            f"the forced-span Lark form supports sources of up to {FORCED_LARK_MAX_LINES} lines (llguidance's "
            f"symbol table is u16-limited); this source has {n}. Use the symbolic form (--format lark without "
            "--forced-spans) and copy outside the grammar")
    if n == 0:
        return symbolic_lark(0)
    rules = ["start: op*", "op: cp | gn", f"gn: {_lark_literal(GEN_OPEN)} BODY", f"BODY: {lark_body()}",
             f"cp: {_lark_literal(_COPY_OPEN)} a", *_first_number_rules(n), *_second_number_rules(n),
             *_line_rules(lines), *_TERMINALS]
    return "\n".join(rules) + "\n"


# ---------------------------------------------------------------- GBNF (xgrammar)

def gbnf_literal(text: str) -> str:
    """A GBNF string literal: backslash escapes for the quote, the backslash and control characters."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _gbnf_common(n_lines: int) -> list[str]:
    op = "op ::= copy | gen" if n_lines else "op ::= gen"
    return ["root ::= op*", op, f"gen ::= {gbnf_literal(GEN_OPEN)} body0", *body.gbnf_rules("body")]


def symbolic_ebnf(n_lines: int) -> str:
    rules = _gbnf_common(n_lines)
    if n_lines:
        rules.append(f"copy ::= {gbnf_literal(_COPY_OPEN)} span {gbnf_literal(COPY_END)}")
        rules.append("span ::= " + " | ".join(f"{gbnf_literal(f'{i}{RANGE_SEP}')} r{i}" for i in range(1, n_lines + 1)))
        rules += [f"r{i} ::= {range_gbnf(i, n_lines)}" for i in range(1, n_lines + 1)]
    return "\n".join(rules) + "\n"


def _block_of(m: int) -> int:
    return (m - 1) // BLOCK_LINES


def _block_lines(b: int, n: int) -> range:
    return range(b * BLOCK_LINES + 1, min(n, (b + 1) * BLOCK_LINES) + 1)


def _span_items(i: int, j: int, n: int) -> str:
    """The rules spelling lines i..j: line by line inside one block, else tail, whole blocks, head."""
    bi, bj = _block_of(i), _block_of(j)
    if bi == bj:
        return " ".join(f"l{m}" for m in range(i, j + 1))
    items = [f"t{i}"]
    if bj - bi > 1:
        items.append(f"w{bi + 1}_{bj - 1}")
    items.append(f"h{j}")
    return " ".join(items)


def forced_ebnf(lines: list[str]) -> str:
    n = len(lines)
    if n > FORCED_EBNF_MAX_LINES:
        raise GrammarError(
            f"the forced-span GBNF form supports sources of up to {FORCED_EBNF_MAX_LINES} lines (one alternative "
            f"per line pair, O(N^2)); this source has {n}. Use --format lark (parametric rules, up to "
            f"{FORCED_LARK_MAX_LINES} lines) or the symbolic form")
    rules = _gbnf_common(n)
    if not n:
        return "\n".join(rules) + "\n"
    end = gbnf_literal(COPY_END)
    rules.append(f"copy ::= {gbnf_literal(_COPY_OPEN)} cspan")
    rules.append("cspan ::= " + " | ".join(f"{gbnf_literal(f'{i}{RANGE_SEP}')} c{i}" for i in range(1, n + 1)))
    for i in range(1, n + 1):
        alts = [f'{gbnf_literal(str(j))} {end} {_span_items(i, j, n)}' for j in range(i, n + 1)]
        rules.append(f"c{i} ::= " + " | ".join(alts))
    rules += [f"l{m} ::= {gbnf_literal(text)}" for m, text in enumerate(lines, 1)]
    blocks = _block_of(n) + 1
    for b in range(blocks):
        members = list(_block_lines(b, n))
        for k, m in enumerate(members):
            rules.append(f"t{m} ::= " + " ".join(f"l{x}" for x in members[k:]))
            rules.append(f"h{m} ::= " + " ".join(f"l{x}" for x in members[:k + 1]))
    for a in range(blocks):
        for b in range(a, blocks):
            first = f"t{_block_lines(a, n)[0]}"
            rules.append(f"w{a}_{b} ::= {first}" + (f" w{a + 1}_{b}" if b > a else ""))
    return "\n".join(rules) + "\n"


# ---------------------------------------------------------------- regex (outlines-core)

def _regex_literal(text: str) -> str:
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in text)


def symbolic_regex(n_lines: int) -> str:
    gen = _regex_literal(GEN_OPEN) + f"(?:{body.regex()})"
    if not n_lines:
        return f"(?:{gen})*"
    spans = "|".join(f"{i}{_regex_literal(RANGE_SEP)}(?:{range_regex(i, n_lines)})" for i in range(1, n_lines + 1))
    copy = _regex_literal(_COPY_OPEN) + f"(?:{spans})" + _regex_literal(COPY_END)
    return f"(?:{copy}|{gen})*"


# ---------------------------------------------------------------- the one entry

def export(source: str, fmt: str, forced: bool, name: str | None = None) -> ExportedGrammar:
    """The grammar of `source` (its lines; the text too for the forced form) in `fmt`."""
    check_format(fmt)
    lines = split_lines(source)
    n = len(lines)
    if n > PARAMETER_MAX_LINES:
        raise GrammarError(f"the grammar export supports sources of up to {PARAMETER_MAX_LINES} lines; "
                           f"this source has {n}")
    notes = _notes(n, fmt, forced, name)
    if fmt == "lark":
        text = "%llguidance {}\n" + _header(notes, "//") + (forced_lark(lines) if forced else symbolic_lark(n))
    elif fmt == "ebnf":
        text = _header(notes, "#") + (forced_ebnf(lines) if forced else symbolic_ebnf(n))
    else:
        if forced:
            raise GrammarError(
                "the forced-span form has no compact regex (a regex would repeat the source's text once per line "
                "pair, O(N^3) characters): use --format lark or --format ebnf, or the symbolic regex")
        text = symbolic_regex(n)
    return ExportedGrammar(text, fmt, forced, n, notes)


# ---------------------------------------------------------------- reading an engine's output back

def program_of_forced(text: str, source: str) -> Program:
    """The program in the output of a forced-span grammar (each directive followed by its lines' text),
    checked: every copied text must be the source's lines; a ProgramError names the first that is not.
    `resolve(program, source)` is then the edited file."""
    ops = []
    pos = 0
    while pos < len(text):
        if text.startswith(_COPY_OPEN, pos):
            end = text.find(COPY_END, pos)
            if end < 0:
                raise ProgramError(f"forced output: the copy directive at position {pos} is never closed")
            end += len(COPY_END)
            op = parse(text[pos:end]).ops[0]
            copied = resolve(Program((op,)), source)
            if not text.startswith(copied, end):
                raise ProgramError(f"forced output: the text after {text[pos:end]!r} (position {end}) is not "
                                   f"lines {op.start}-{op.end} of the source")
            pos = end + len(copied)
        elif text.startswith(GEN_OPEN, pos):
            close = text.find(GEN_CLOSE, pos)
            if close < 0:
                raise ProgramError(f"forced output: the <gen> at position {pos} is never closed")
            op = parse(text[pos:close + len(GEN_CLOSE)]).ops[0]
            pos = close + len(GEN_CLOSE)
        else:
            raise ProgramError(f"forced output: expected {_COPY_OPEN!r} or {GEN_OPEN!r} at position {pos}, "
                               f"found {text[pos:pos + 24]!r}")
        ops.append(op)
    return Program(tuple(ops))
