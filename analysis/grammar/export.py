"""The program grammar of one source, exported for structured-output engines (`copydecode grammar`).

Two forms, three formats (docs/grammar.md shows what a user posts to vLLM and SGLang):

symbolic   the program alone, exactly the language of this suite's FSM (analysis.grammar.fsm) for a source
           of N lines: ops back to back, `<copy lines="i-j"/>` with 1 <= i <= j <= N, `<gen>BODY</gen>`
           with the canonical escapes. In llguidance Lark (two regex lexemes), GBNF (xgrammar, llama.cpp)
           and one regular expression (outlines-core), all written from analysis.grammar.regular's tree.
forced     the stream a Copy-as-Decode model emits: each directive is followed by the literal text of the
           lines it copies, so an engine with fast-forward (llguidance's `compute_ff_tokens`) forces
           the span after the header and can run it as one prefill.
           - Lark (llguidance): parametric rules. The header's numbers are read digit by digit into a
             64-bit rule parameter (i and j as BCD, so that `lt`/`eq` against literals order them; a
             digit is allowed exactly where the suite's FSM allows it), then one self-recursive rule emits
             line m and moves on while m < j. Its size is linear in the source (one lexeme and three
             alternatives per line); llguidance's symbol table (u16) caps it at MAX_FORCED_LARK_LINES.
           - GBNF: the chain form (one rule per span (i, j): quadratic), up to MAX_FORCED_EBNF_LINES.
           - regex: none; a regular expression spells every span after its header, cubic in N.
A source longer than a form supports is a GrammarLimitError that states the limit.

Not expressed, in every form: the order of copies. The suite's FSM and resolver accept copies in any
order (a moved line is copied out of order), so a grammar that made a copy start after the previous one
ends would reject programs the suite accepts. Only line copies are exported (`<copy tokens=...>` is the
token-level primitive, not a serving form).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from analysis.errors import GrammarError, GrammarLimitError, ProgramError
from analysis.grammar.program import COPY_END, COPY_TAGS, GEN_CLOSE, GEN_OPEN, RANGE_SEP, Copy, Program, parse
from analysis.grammar.regular import (
    Lit,
    Node,
    alt,
    body,
    body_parts,
    gbnf_literal,
    number_range,
    seq,
    star,
    to_gbnf,
    to_regex,
)
from analysis.text.lines import split_lines

FORMATS = ("lark", "ebnf", "regex")
FORMS = ("symbolic", "forced")
# llguidance 1.9.1: the forced Lark form compiled 20,000 distinct lines (2.9 s) and failed at 22,000 with
# "assertion failed: grammar.symbols.len() < u16::MAX"; one rule parameter field holds 5 BCD digits
MAX_FORCED_LARK_LINES = 20_000
# the chain form has N(N+1)/2 span rules; xgrammar 0.2.8 took 521 s to compile it at 200 lines
MAX_FORCED_EBNF_LINES = 200
# the symbolic forms: about 150-250 bytes of grammar per line, built at about 1 s per 2,000 lines here (20,000 lines:
# a 4 MB grammar in about 12 s); 100,000 lines took 536 s and 2.4 GB before the bound
MAX_SYMBOLIC_LINES = 20_000
SYMBOLIC_BYTES_PER_LINE = 250
COPY_OPEN_LINES = COPY_TAGS["lines"]

# the forced Lark form's rule parameter: i and j as BCD (5 digits each), the current line m as a counter
I_BITS, J_BITS, M_BITS = (0, 20), (20, 40), (40, 56)


@dataclass(frozen=True)
class Exported:
    form: str
    format: str
    n_lines: int
    grammar: str              # what an engine reads (for regex: the expression alone)
    notes: tuple[str, ...]    # what the grammar says and leaves out (a header in lark and ebnf)

    def text(self) -> str:
        """The file `copydecode grammar` writes: the notes as the format's comments, then the grammar;
        a regex has no comment syntax, so it is written alone (the notes go to stderr)."""
        if self.format == "regex":
            return self.grammar + "\n"
        mark = "//" if self.format == "lark" else "#"
        lines = [f"{mark} {one_line(n)}" for n in self.notes]
        if self.format == "lark":  # SGLang reads a Lark grammar only after this line; llguidance accepts it
            return "%llguidance {}\n" + "\n".join(lines) + "\n" + self.grammar
        return "\n".join(lines) + "\n" + self.grammar


def one_line(text: str) -> str:
    """`text` as one comment line: every character a grammar parser might take as a line break or that does not
    print (a newline in a file name would start a directive of its own: `%ignore ANY`) is escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


# ---------------------------------------------------------------- the regular pieces

def span_node(n_lines: int) -> Node:
    """`i-j` for 1 <= i <= j <= n_lines."""
    return alt(*(seq(Lit(f"{i}{RANGE_SEP}"), number_range(i, n_lines)) for i in range(1, n_lines + 1)))


def copy_node(n_lines: int) -> Node:
    return seq(Lit(COPY_OPEN_LINES), span_node(n_lines), Lit(COPY_END))


def gen_node() -> Node:
    return seq(Lit(GEN_OPEN), body(), Lit(GEN_CLOSE))


def program_node(n_lines: int) -> Node:
    op = alt(copy_node(n_lines), gen_node()) if n_lines else gen_node()
    return star(op)


# ---------------------------------------------------------------- symbolic

def symbolic_lark(n_lines: int) -> str:
    ops = "COPY | GEN" if n_lines else "GEN"
    rules = ["start: op*", f"op: {ops}", f"GEN: /{to_regex(gen_node(), slash=True)}/"]
    if n_lines:
        rules.append(f"COPY: /{to_regex(copy_node(n_lines), slash=True)}/")
    return "\n".join(rules) + "\n"


def _gbnf_body_rules() -> list[str]:
    parts = body_parts()
    return [
        f"gen ::= {gbnf_literal(GEN_OPEN)} body {gbnf_literal(GEN_CLOSE)}",
        "body ::= y+ r* | r+",
        "y ::= plain | t | r+ t",
        f"plain ::= {to_gbnf(parts['plain'])}",
        f"t ::= {to_gbnf(parts['t'])}",
        f"r ::= {to_gbnf(parts['r'])}",
    ]


def symbolic_ebnf(n_lines: int) -> str:
    rules = ["root ::= op*", f"op ::= {'copy | gen' if n_lines else 'gen'}"]
    if n_lines:
        rules.append(f"copy ::= {gbnf_literal(COPY_OPEN_LINES)} span {gbnf_literal(COPY_END)}")
        rules.append("span ::= " + " | ".join(
            f"{gbnf_literal(f'{i}{RANGE_SEP}')} ({to_gbnf(number_range(i, n_lines))})" for i in range(1, n_lines + 1)))
    return "\n".join(rules + _gbnf_body_rules()) + "\n"


def symbolic_regex(n_lines: int) -> str:
    return to_regex(program_node(n_lines))


# ---------------------------------------------------------------- forced: llguidance parametric Lark

# a Lark string literal's escapes: quote, backslash, the three named controls, the other controls as \\uXXXX
LARK_ESCAPES = {**{c: f"\\u{c:04x}" for c in (*range(0x20), 0x7F)}, ord('"'): '\\"', ord("\\"): "\\\\",
                ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r"}


def lark_literal(text: str) -> str:
    """A Lark string literal spelling `text` byte for byte (checked with llguidance's parser); one translate
    pass, so a long line costs about its own size again (not a list entry per character)."""
    return '"' + text.translate(LARK_ESCAPES) + '"'


def bcd(n: int) -> int:
    """n's decimal digits as 4-bit nibbles: BCD values order like the numbers, so literal comparisons work."""
    return int(str(n), 16)


def _field(bits: tuple[int, int], shift_nibbles: int = 0, width_nibbles: int | None = None) -> str:
    lo = bits[0] + 4 * shift_nibbles
    hi = bits[1] if width_nibbles is None else lo + 4 * width_nibbles
    return f"[{lo}:{hi}]"


def _or(value: int) -> str:
    return f"bit_or({value})" if value else "_"


def _digits(position: int) -> range:
    return range(1, 10) if position == 0 else range(10)


def _reachable(starts: list[str], expand) -> list[str]:
    """The rules reachable from `starts`: `expand(name)` gives (rule text, names it refers to)."""
    rules, seen, todo = [], set(starts), list(starts)
    while todo:
        text, refs = expand(todo.pop(0))
        rules.append(text)
        for ref in refs:
            if ref not in seen:
                seen.add(ref)
                todo.append(ref)
    return rules


def _i_rules(n_digits: list[int]) -> list[str]:
    """i, digit by digit, for each length k: rule `i{k}_{p}{t}` reads digit p, where t = 'h' while the
    digits so far equal N's (only then does N bound the next digit)."""
    top = len(n_digits)
    heads = [f"i{k}_0{'h' if k == top else 'f'}" for k in range(1, top + 1)]

    def expand(name: str):
        if name == "inum":
            return "inum::_ : " + " | ".join(f"{h}::_" for h in heads), heads
        k, p = (int(x) for x in name[1:-1].split("_"))
        tight = name[-1]
        options, refs = [], []
        for d in _digits(p):
            if tight == "h" and d > n_digits[p]:
                continue
            nxt = "h" if tight == "h" and d == n_digits[p] else "f"
            expr = _or(d << (I_BITS[0] + 4 * (k - 1 - p)))
            if p + 1 < k:
                refs.append(f"i{k}_{p + 1}{nxt}")
                options.append(f'"{d}" {refs[-1]}::{expr}')
            else:
                options.append(f'"{d}" {lark_literal(RANGE_SEP)} jnum::{expr}')
        return f"{name}::_ : " + " | ".join(options), refs

    return _reachable(["inum"], expand)


def _j_rules(n_digits: list[int]) -> list[str]:
    """j, digit by digit: rule `j{k}_{p}{l}{h}` reads digit p of a k-digit j, where l = 'l' while the
    digits so far equal i's (read from the parameter: j may not go below i), h = 'h' while they equal N's."""
    top = len(n_digits)

    def expand(name: str):
        if name == "jnum":
            options, refs = [], []
            for k in range(1, top + 1):
                h = "h" if k == top else "f"
                same = f"and(ge({_field(I_BITS)}, {bcd(10 ** (k - 1))}), le({_field(I_BITS)}, {bcd(10 ** k - 1)}))"
                refs.append(f"j{k}_0l{h}")
                options.append(f"{refs[-1]}::_ %if {same}")
                if k > 1:  # i has fewer digits than j: j > i whatever its digits
                    refs.append(f"j{k}_0f{h}")
                    options.append(f"{refs[-1]}::_ %if le({_field(I_BITS)}, {bcd(10 ** (k - 1) - 1)})")
            return "jnum::_ : " + " | ".join(options), refs
        k, p = (int(x) for x in name[1:-2].split("_"))
        return _j_rule(k, p, name[-2], name[-1], n_digits)

    return _reachable(["jnum"], expand)


def _j_rule(k: int, p: int, low: str, tight: str, n_digits: list[int]) -> tuple[str, list[str]]:
    i_digit = _field(I_BITS, k - 1 - p, 1)  # i's digit at this position (i has k digits while low == 'l')
    options, refs = [], []
    for d in _digits(p):
        if tight == "h" and d > n_digits[p]:
            continue
        nxt_h = "h" if tight == "h" and d == n_digits[p] else "f"
        expr = _or(d << (J_BITS[0] + 4 * (k - 1 - p)))
        if low == "l":  # d may not be below i's digit; equal keeps j tight with i
            branches = [("l", f"eq({i_digit}, {d})")]
            if d > (1 if p == 0 else 0):  # i's digit can be below d (its first digit is at least 1)
                branches.append(("f", f"lt({i_digit}, {d})"))
        else:
            branches = [("f", "")]
        for nxt_l, cond in branches:
            target = "close"
            if p + 1 < k:
                target = f"j{k}_{p + 1}{nxt_l}{nxt_h}"
                refs.append(target)
            options.append(f'"{d}" {target}::{expr}' + (f" %if {cond}" if cond else ""))
    return f"j{k}_{p}{low}{tight}::_ : " + " | ".join(options), refs


def forced_lark(lines: list[str]) -> str:
    n = len(lines)
    rules = ["start: op*", f"op: {'cp | GEN' if n else 'GEN'}", f"GEN: /{to_regex(gen_node(), slash=True)}/"]
    if not n:
        return "\n".join(rules) + "\n"
    digits = [int(c) for c in str(n)]
    rules.append(f"cp: {lark_literal(COPY_OPEN_LINES)} inum::0")
    rules += _i_rules(digits) + _j_rules(digits)
    end = lark_literal(COPY_END)
    rules.append("close::_ : " + " | ".join(
        f"{end} span::{_or(m << M_BITS[0])} %if eq({_field(I_BITS)}, {bcd(m)})" for m in range(1, n + 1)))
    span = []
    for m, line in enumerate(lines, start=1):
        text, at = lark_literal(line), f"eq({_field(M_BITS)}, {m})"
        if m < n:
            span.append(f"{text} span::incr({_field(M_BITS)}) %if and({at}, gt({_field(J_BITS)}, {bcd(m)}))")
        span.append(f"{text} %if and({at}, eq({_field(J_BITS)}, {bcd(m)}))")
    rules.append("span::_ : " + " | ".join(span))
    return "\n".join(rules) + "\n"


# ---------------------------------------------------------------- forced: GBNF chain form

def forced_ebnf(lines: list[str]) -> str:
    n = len(lines)
    rules = ["root ::= op*", f"op ::= {'copy | gen' if n else 'gen'}"]
    if n:
        rules.append(f"copy ::= {gbnf_literal(COPY_OPEN_LINES)} (" + " | ".join(
            f"{gbnf_literal(f'{i}{RANGE_SEP}')} e{i}" for i in range(1, n + 1)) + ")")
        for i in range(1, n + 1):
            rules.append(f"e{i} ::= " + " | ".join(
                f"{gbnf_literal(f'{j}{COPY_END}')} s{i}x{j}" for j in range(i, n + 1)))
        for j in range(1, n + 1):
            for i in range(1, j + 1):
                rules.append(f"s{i}x{j} ::= l{i}" + (f" s{i + 1}x{j}" if i < j else ""))
        rules += [f"l{m} ::= {gbnf_literal(line)}" for m, line in enumerate(lines, start=1)]
    return "\n".join(rules + _gbnf_body_rules()) + "\n"


# ---------------------------------------------------------------- the entry point

def check_limit(n_lines: int, fmt: str, forced: bool) -> None:
    if not forced:
        if n_lines > MAX_SYMBOLIC_LINES:
            raise GrammarLimitError(
                f"the symbolic {fmt} form supports sources of at most {MAX_SYMBOLIC_LINES:,} lines; this one has "
                f"{n_lines:,} (its grammar would be about {n_lines * SYMBOLIC_BYTES_PER_LINE / 1e6:,.0f} MB, built in "
                f"about {n_lines / 2000:,.0f} s or more, for an engine to compile): export a part of the file")
        return
    if fmt == "regex":
        raise GrammarLimitError(
            "the forced-span form has no regex export: a regular expression must spell every span (i, j) "
            f"in full after its header, O(N^3) characters for N lines (N = {n_lines}); use --format lark "
            f"(llguidance, up to {MAX_FORCED_LARK_LINES:,} lines) or the symbolic regex")
    limit = MAX_FORCED_LARK_LINES if fmt == "lark" else MAX_FORCED_EBNF_LINES
    if n_lines > limit:
        why = ("llguidance's symbol table is u16-limited (one lexeme and three alternatives per line)" if fmt == "lark"
               else "the chain form has one rule per span, N(N+1)/2 of them (xgrammar took 521 s at 200 lines)")
        raise GrammarLimitError(f"the forced-span {fmt} form supports sources of at most {limit:,} lines; this one "
                                f"has {n_lines:,} ({why})")


def notes(n_lines: int, fmt: str, forced: bool, label: str) -> tuple[str, ...]:
    what = ("the forced-span stream: each <copy lines=\"i-j\"/> is followed by the literal text of lines i..j"
            if forced else "the Copy-as-Decode program (copies are served outside the grammar)")
    out = [f"copydecode grammar: {label}, {n_lines} lines, {'forced' if forced else 'symbolic'} form, {fmt}",
           f"Language: {what}.",
           f"Enforced: 1 <= i <= j <= {n_lines} in every copy; <gen> bodies non-empty, with the canonical escapes "
           "(&lt; only before copy/gen//gen, &amp; only before lt;/amp;) and no raw <copy, <gen, </gen.",
           "Not enforced: the order of copies (the suite's FSM and resolver accept any order, so this grammar "
           "does too); only line copies are exported, not <copy tokens=...>."]
    if forced and fmt == "lark":
        out.append("llguidance Lark with parametric rules (llguidance only); compute_ff_tokens() after a directive "
                   "returns the copied text's tokens.")
    return tuple(out)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The grammar trees are acyclic and many (about 80 nodes a line): the cycle collector only rescans them, which
    made a 20,000-line symbolic export 3-4 times slower (and superlinear); reference counting frees them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def export(source: str, fmt: str, forced: bool, label: str = "source") -> Exported:
    """The grammar of `source` (a GrammarError names a bad format, a GrammarLimitError a size limit)."""
    if fmt not in FORMATS:
        raise GrammarError(f"grammar format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    lines = split_lines(source)
    check_limit(len(lines), fmt, forced)
    with _collector_paused():
        if forced:
            grammar = forced_lark(lines) if fmt == "lark" else forced_ebnf(lines)
        else:
            grammar = {"lark": symbolic_lark, "ebnf": symbolic_ebnf, "regex": symbolic_regex}[fmt](len(lines))
    return Exported("forced" if forced else "symbolic", fmt, len(lines), grammar, notes(len(lines), fmt, forced, label))


def split_stream(stream: str, source: str) -> Program:
    """The program a forced-span stream holds: each directive's copied text, checked against the source and
    removed. `resolve(split_stream(text, source), source)` is the edited file an engine's output stands for;
    a ProgramError names the first directive whose following text is not the lines it copies."""
    lines = split_lines(source)
    ops, pos = [], 0
    while pos < len(stream):
        end = _op_end(stream, pos)
        (op,) = parse(stream[pos:end]).ops
        ops.append(op)
        pos = end
        if isinstance(op, Copy):
            if not 1 <= op.start <= op.end <= len(lines):
                raise ProgramError(f"stream position {pos}: copy lines {op.start}-{op.end} is outside the "
                                   f"{len(lines)}-line source")
            text = "".join(lines[op.start - 1:op.end])
            if not stream.startswith(text, pos):
                raise ProgramError(f"stream position {pos}: the text after <copy lines=\"{op.start}-{op.end}\"/> is "
                                   f"not those lines ({stream[pos:pos + 24]!r})")
            pos += len(text)
    return Program(tuple(ops))


def _op_end(stream: str, pos: int) -> int:
    """Where the op starting at `pos` ends (a directive at its '"/>', a gen op at its first '</gen>')."""
    closer = COPY_END if stream.startswith(COPY_OPEN_LINES, pos) else GEN_CLOSE
    end = stream.find(closer, pos)
    if end < 0:
        raise ProgramError(f"stream position {pos}: an op that never closes ({stream[pos:pos + 24]!r})")
    return end + len(closer)
