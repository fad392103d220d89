"""The exported grammars say what the suite's FSM says.

Character level: the symbolic regex (Python's `re`, whose syntax the export shares with Rust's regex
crate) accepts exactly what the parser and the range check accept. Token level, with the Qwen2.5
tokenizer: llguidance's matcher over each symbolic export (Lark as is, GBNF through llguidance's own GBNF
converter: the EBNF parser test, the regex through `grammar_from_regex`) accepts a token sequence iff this
suite's FSM does, for rendered programs and for random mutations of them. The forced-span forms: the
stream of every valid program is accepted, `compute_ff_tokens()` after each directive is the copied text's
tokens, and the header's digits are allowed exactly where the FSM allows them. No difference is
tolerated: none was found, so none is documented.
"""

import random
import re

import pytest
from fixtures import fsm_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.errors import GrammarError, GrammarLimitError
from analysis.grammar.export import (
    MAX_FORCED_EBNF_LINES,
    MAX_FORCED_LARK_LINES,
    export,
    lark_literal,
)
from analysis.grammar.fsm import ProgramFSM
from analysis.grammar.program import Copy, Gen, Program, render, render_op
from analysis.grammar.regular import number_range, to_regex
from analysis.grammar.resolver import resolve

llguidance = pytest.importorskip("llguidance")  # a declared dependency: never skipped in a built venv

from analysis.grammar.llg import accepts, compile_grammar, ll_tokenizer  # noqa: E402

QWEN_EOS = 151643
N = 12
SOURCE = "".join(f"line {k} = {k} * 2\n" for k in range(1, N)) + 'tail "q" \\ é'  # last line without \n
FRAGMENTS = ["<gen>", "</gen>", '<copy lines="', '<copy tokens="', '"/>', "-", "1", "2", "0", "12", "13", "&lt;",
             "&amp;", "&", "<", "/", "lt;", "amp;", "copy", "gen", "/gen", "</gen", "<gen", "a", " ", "\n", ">",
             "é", "中", "😀", "<c", "<co", "<cop", "</g", "&l", "&a", "&am", "&amp", "&lt", "x", ";"]
BODY = st.lists(st.sampled_from(FRAGMENTS[5:]), min_size=1, max_size=8).map("".join)
OP = st.one_of(
    st.builds(lambda b: f"<gen>{b}</gen>", BODY),
    st.builds(lambda i, j: f'<copy lines="{i}-{j}"/>', st.sampled_from(["1", "2", "3", "9", "10", "12", "13", "0", "01"]),
              st.sampled_from(["1", "2", "9", "11", "12", "13", "0", "25"])),
)
TEXTS = st.one_of(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join), st.lists(OP, max_size=4).map("".join))
GEN_TEXT = st.lists(st.sampled_from(list("ab<&/;\n é") + ["copy", "gen", "lt;", "amp;", "&lt;", "&amp;"]), min_size=1,
                    max_size=12).map("".join)
VALID = st.lists(st.one_of(st.builds(Gen, GEN_TEXT),
                           st.builds(lambda a, b: Copy(min(a, b), max(a, b)), st.integers(1, N), st.integers(1, N))),
                 max_size=4).map(lambda ops: Program(tuple(ops)))


@pytest.fixture(scope="module")
def llg(qwen):
    return ll_tokenizer(qwen, (QWEN_EOS,))


@pytest.fixture(scope="module")
def fsm(qwen):
    return ProgramFSM(qwen, {"lines": N}, eos_ids=(QWEN_EOS,))


@pytest.fixture(scope="module")
def symbolic(llg):
    return {fmt: compile_grammar(llg, export(SOURCE, fmt, forced=False)).matcher for fmt in ("lark", "ebnf", "regex")}


@pytest.fixture(scope="module")
def forced(llg):
    return {fmt: compile_grammar(llg, export(SOURCE, fmt, forced=True)).matcher for fmt in ("lark", "ebnf")}


def fsm_accepts(fsm, ids) -> bool:
    state = fsm.initial
    for t in ids:
        try:
            state = fsm.advance(state, t)
        except Exception:
            return False
    return fsm.is_accepting(state)


# ---------------------------------------------------------------- character level

SYMBOLIC_RE = re.compile(export(SOURCE, "regex", forced=False).grammar)

def test_number_ranges_are_exact():
    for lo, hi in [(1, 1), (1, 9), (3, 12), (7, 100), (95, 1203), (99, 100), (10, 10)]:
        pattern = re.compile(to_regex(number_range(lo, hi)))
        for n in range(1400):
            assert bool(pattern.fullmatch(str(n))) == (lo <= n <= hi), (lo, hi, n)
        assert not pattern.fullmatch("07") and not pattern.fullmatch("")


@settings(max_examples=1500, deadline=None)
@given(TEXTS)
def test_symbolic_regex_accepts_exactly_what_the_parser_accepts(text):
    assert bool(SYMBOLIC_RE.fullmatch(text)) == fsm_reference(text, {"lines": N}), text


def test_regex_of_a_source_without_lines_has_no_copy():
    pattern = re.compile(export("", "regex", forced=False).grammar)
    assert pattern.fullmatch("<gen>x</gen>") and not pattern.fullmatch('<copy lines="1-1"/>')


# ---------------------------------------------------------------- token level: llguidance == FSM

@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(VALID, st.sampled_from(["lark", "ebnf", "regex"]))
def test_every_valid_program_is_accepted_by_llguidance_and_the_fsm(symbolic, fsm, qwen, program, fmt):
    ids = list(qwen.encode_program(render(program)).ids)
    assert fsm_accepts(fsm, ids)
    assert accepts(symbolic[fmt], ids), (fmt, render(program))


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(VALID, st.integers(0, 2 ** 32), st.sampled_from(["lark", "ebnf", "regex"]))
def test_mutated_token_sequences_are_rejected_by_both_or_accepted_by_both(symbolic, fsm, qwen, program, seed, fmt):
    ids = mutate(list(qwen.encode_program(render(program)).ids), qwen, random.Random(seed))
    assert accepts(symbolic[fmt], ids) == fsm_accepts(fsm, ids), (fmt, qwen.decode_bytes(ids))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXTS, st.sampled_from(["lark", "ebnf", "regex"]))
def test_fragment_texts_are_judged_alike(symbolic, fsm, qwen, text, fmt):
    ids = list(qwen.encode_program(text).ids)
    assert accepts(symbolic[fmt], ids) == fsm_accepts(fsm, ids) == fsm_reference(text, {"lines": N}), (fmt, text)


@pytest.mark.slow
def test_mutations_exercise_both_verdicts(symbolic, fsm, qwen):
    rng = random.Random(0)
    programs = [Program((Copy(1, 3), Gen("a < b && c\n"), Copy(5, 12))), Program((Gen("&lt;gen"),)), Program(())]
    verdicts = []
    for k in range(300):
        ids = mutate(list(qwen.encode_program(render(programs[k % 3])).ids), qwen, rng)
        verdict = fsm_accepts(fsm, ids)
        assert all(accepts(m, ids) == verdict for m in symbolic.values()), qwen.decode_bytes(ids)
        verdicts.append(verdict)
    assert 10 < sum(verdicts) < 290  # mutations both break and keep programs


MUTATION_TOKENS = ['"/>', "<", "gen", "</", ">", "-", "0", "1", "3", "9", "13", "&", "lt", ";", "<copy", " lines",
                   '="', "&lt;", "copy", "/"]


def mutate(ids: list[int], qwen, rng: random.Random) -> list[int]:
    """One to three edits: delete, duplicate, or replace/insert a grammar-relevant token."""
    pool = [i for t in MUTATION_TOKENS for i in qwen.encode(t).ids]
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(ids) + 1)
        kind = rng.choice(("delete", "insert", "replace", "duplicate"))
        if kind == "delete" and k < len(ids):
            del ids[k]
        elif kind == "replace" and k < len(ids):
            ids[k] = rng.choice(pool)
        elif kind == "duplicate" and k < len(ids):
            ids.insert(k, ids[k])
        else:
            ids.insert(k, rng.choice(pool))
    return ids


# ---------------------------------------------------------------- forced spans

def stream_ids(qwen, program: Program, source: str) -> list[tuple[str, list[int]]]:
    """The decoder's layout: each op's tokens, and after each directive the copied text's tokens."""
    out = []
    for op in program.ops:
        out.append(("op", list(qwen.encode_program(render_op(op)).ids)))
        if isinstance(op, Copy):
            out.append(("copied", list(qwen.encode(resolve(Program((op,)), source)).ids)))
    return out


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(VALID, st.sampled_from(["lark", "ebnf"]))
def test_forced_streams_are_accepted_and_each_span_is_fast_forwarded(forced, qwen, program, fmt):
    matcher = forced[fmt].deep_copy()
    for kind, ids in stream_ids(qwen, program, SOURCE):
        if kind == "copied":
            assert matcher.compute_ff_tokens() == ids, (fmt, render(program))
        assert matcher.consume_tokens(ids), (fmt, render(program), matcher.get_error())
    assert matcher.is_accepting()


HEADER = st.lists(st.sampled_from(list("0123456789-")), min_size=1, max_size=6).map("".join)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(HEADER, st.sampled_from([9, 12, 40, 100, 599]))
def test_forced_header_digits_are_allowed_exactly_where_the_fsm_allows_them(llg, qwen, header, n_lines):
    source = "".join(f"{k}\n" for k in range(n_lines))
    matcher, fsm = compiled_forced(llg, qwen, n_lines, source)
    matcher = matcher.deep_copy()
    state = fsm.initial
    prefix = list(qwen.encode('<copy lines="').ids)
    assert matcher.consume_tokens(prefix)
    for t in prefix:
        state = fsm.advance(state, t)
    for ch in header:  # one character a token: Qwen has a token for each digit and for '-'
        (token,) = qwen.encode(ch).ids
        alive = fsm.automaton.walk(state, ch.encode()) is not None
        assert bool(matcher.consume_token(token)) == alive, (n_lines, header, ch)
        if not alive:
            break
        state = fsm.advance(state, token)


_FORCED = {}


def compiled_forced(llg, qwen, n_lines, source):
    """The forced matcher and the FSM of an `n_lines` source, built once per size (the FSM reads the
    whole vocabulary: seconds)."""
    if n_lines not in _FORCED:
        _FORCED[n_lines] = (compile_grammar(llg, export(source, "lark", forced=True)).matcher,
                            ProgramFSM(qwen, {"lines": n_lines}, eos_ids=(QWEN_EOS,)))
    return _FORCED[n_lines]


@pytest.mark.slow
def test_the_forced_form_handles_sources_past_the_chain_forms_symbol_limit(llg, qwen):
    lines = [f"    value_{k} = compute({k}, 'x')\n" for k in range(1, 1201)]
    compiled = compile_grammar(llg, export("".join(lines), "lark", forced=True))
    m = compiled.matcher
    assert m.consume_tokens(list(qwen.encode('<copy lines="3-1200"/>').ids))
    assert m.compute_ff_tokens() == list(qwen.encode("".join(lines[2:])).ids)


def test_lark_literals_spell_every_character():
    assert lark_literal('a"b\\c\n\t\r\x00é') == '"a\\"b\\\\c\\n\\t\\r\\u0000é"'


def test_limits_are_named_errors_that_state_the_limit():
    with pytest.raises(GrammarLimitError, match=f"at most {MAX_FORCED_EBNF_LINES}"):
        export("x\n" * (MAX_FORCED_EBNF_LINES + 1), "ebnf", forced=True)
    with pytest.raises(GrammarLimitError, match=f"at most {MAX_FORCED_LARK_LINES:,}"):
        export("x\n" * (MAX_FORCED_LARK_LINES + 1), "lark", forced=True)
    with pytest.raises(GrammarLimitError, match="no regex export"):
        export("x\n", "regex", forced=True)
    with pytest.raises(GrammarError, match="one of lark, ebnf, regex"):
        export("x\n", "gbnf", forced=False)


def test_headers_say_what_is_not_enforced():
    for fmt in ("lark", "ebnf"):
        text = export(SOURCE, fmt, forced=False).text()
        assert "Not enforced: the order of copies" in text and f"1 <= i <= j <= {N}" in text
    assert export(SOURCE, "lark", forced=True).text().startswith("%llguidance {}\n")
    assert export(SOURCE, "regex", forced=False).text().count("\n") == 1  # the expression alone


def test_a_grammar_llguidance_refuses_is_a_named_error(llg):
    from analysis.grammar.export import Exported

    with pytest.raises(GrammarError, match="llguidance refused"):
        compile_grammar(llg, Exported("symbolic", "lark", 1, "start: nothing_defined\n", ()))


def test_a_forced_stream_splits_back_into_its_program():
    from analysis.errors import ProgramError
    from analysis.grammar.export import split_stream

    program = Program((Copy(2, 3), Gen("x &lt;gen\n"), Copy(1, 1)))
    stream = "".join(render_op(op) + (resolve(Program((op,)), SOURCE) if isinstance(op, Copy) else "")
                     for op in program.ops)
    assert split_stream(stream, SOURCE) == program
    with pytest.raises(ProgramError, match="is not those lines"):
        split_stream('<copy lines="1-1"/>nope\n', SOURCE)
    with pytest.raises(ProgramError, match="outside the 12-line source"):
        split_stream('<copy lines="1-13"/>', SOURCE)
    with pytest.raises(ProgramError, match="never closes"):
        split_stream("<gen>abc", SOURCE)


@pytest.mark.slow
def test_the_stated_lark_limit_is_llguidances_own(llg, qwen):
    """MAX_FORCED_LARK_LINES distinct lines compile and fast-forward; 10% more overflow llguidance's symbol
    table, which compile_grammar names (the export itself refuses anything past the stated limit)."""
    from analysis.grammar.export import Exported, forced_lark

    def lines(n):
        return [f"    value_{k} = compute({k}, 'x')\n" for k in range(1, n + 1)]

    n = MAX_FORCED_LARK_LINES
    m = compile_grammar(llg, export("".join(lines(n)), "lark", forced=True)).matcher
    assert m.consume_tokens(list(qwen.encode(f'<copy lines="{n - 1}-{n}"/>').ids))
    assert m.compute_ff_tokens() == list(qwen.encode("".join(lines(n)[-2:])).ids)
    over = int(n * 1.1)
    with pytest.raises(GrammarLimitError, match="symbol table"):
        compile_grammar(llg, Exported("forced", "lark", over, forced_lark(lines(over)), ()))


# ---------------------------------------------------------------- the file's bytes, every line ending (round 6, H3)

# probe files as bytes: line endings of every convention, and the characters other splitters break on
PROBE_FILES = {
    "crlf.py": b"a = 1\r\nb = 2\r\nc = 3\r\n",
    "cr_only.py": b"a = 1\rb = 2\rc = 3\r",
    "mixed.py": b"a = 1\r\nb = 2\nc = 3\rd = 4\r\n\r\ne = 5",
    "bom_crlf.py": "\ufeffx = 'é'\r\n\r\ny = 1\r\n".encode(),
    "controls.py": b"n = '\x00b'\nd = '\x7fc'\nv = '\x0b\x0c\x1c\x1d\x1e'\n",
    "unicode_breaks.py": "a = '\u2028'\nb = '\u2029'\nc = '\x85'\n".encode(),
    "no_final_newline.py": b"x = 1\r\ny = 2",
    "blank_lines.py": b"\n\r\n\n",
}


@pytest.mark.parametrize("name", sorted(PROBE_FILES))
def test_a_source_file_exports_a_grammar_of_its_own_bytes(llg, qwen, tmp_path, name):
    """H3 (qa-review round 6): `grammar --source` read the file in text mode, so universal newlines turned
    '\\r\\n' and '\\r' into '\\n' before the suite's splitter ran: the copy spans spelt other bytes (llguidance
    rejected every copy stream of a CRLF file) and a CR-only file had 3 lines where the suite counts 1. Now the
    forced grammar (Lark, and GBNF through llguidance's converter) accepts exactly the file's copy programs."""
    from analysis.text.lines import split_lines
    from analysis.tools.grammar import file_source
    from fixtures import check_forced_copies

    path = tmp_path / name
    path.write_bytes(PROBE_FILES[name])
    source, label = file_source(str(path))
    assert source.encode("utf-8") == PROBE_FILES[name] and name in label
    n_lines = len(split_lines(source))
    for fmt in ("lark", "ebnf"):
        exported = export(source, fmt, forced=True, label=label)
        assert exported.n_lines == n_lines
        checked = check_forced_copies(compile_grammar(llg, exported).matcher, qwen, source)
        assert checked == n_lines * (n_lines + 1) // 2
    symbolic = compile_grammar(llg, export(source, "lark", forced=False)).matcher
    assert accepts(symbolic, qwen.encode_program(f'<copy lines="1-{n_lines}"/>').ids)
    assert not accepts(symbolic, qwen.encode_program(f'<copy lines="1-{n_lines + 1}"/>').ids)


def test_a_cr_only_file_is_one_line_as_the_suite_counts_it(tmp_path):
    from analysis.tools.grammar import file_source

    (tmp_path / "cr.py").write_bytes(PROBE_FILES["cr_only.py"])
    assert export(file_source(str(tmp_path / "cr.py"))[0], "lark", forced=False).n_lines == 1


@pytest.mark.slow
def test_every_committed_case_source_exports_a_grammar_the_engine_accepts_exactly(llg, qwen):
    """Every source of the committed per-case tables (every corpus of the default run; about 1,700 files): the
    forced Lark grammar, compiled by llguidance, fast-forwards and accepts a seeded sample of the file's copy
    programs (the whole file and its last line included) and rejects their other line endings."""
    import polars as pl
    from fixtures import ROOT, check_forced_copies

    cases = pl.read_parquet(ROOT / "reports/percase/cases.parquet", columns=["corpus", "source"]).unique("source")
    assert cases["corpus"].n_unique() >= 5
    checked = 0
    for k, source in enumerate(cases.sort("source")["source"]):
        matcher = compile_grammar(llg, export(source, "lark", forced=True)).matcher
        checked += check_forced_copies(matcher, qwen, source, sample=2, seed=k)
    assert checked >= cases.height


def test_a_gbnf_escape_is_never_followed_by_a_hex_digit_in_its_literal():
    """L10 (round 6): xgrammar reads \\x escapes greedily ("a\\x01b" is U+001B), so a control character before a
    hex digit was misread; the literal now ends after such an escape (checked by hand with xgrammar 0.2.8, which
    accepts "a\\x01" "b" and "a\\x00" "b" as the bytes; not a dependency). NUL is spelt the same way."""
    from analysis.grammar.regular import gbnf_literal

    assert gbnf_literal("a\x01b") == '"a\\x01" "b"'
    assert gbnf_literal("n\x00F\x7fz\x1f") == '"n\\x00" "F\\x7Fz\\x1F"'
    assert gbnf_literal('plain "q" \\') == '"plain \\"q\\" \\\\"'
    text = export("x = '\x00b'\ny = '\x7fc'\n", "ebnf", forced=True).grammar
    assert not re.search(r"\\x[0-9A-F]{2}[0-9a-fA-F]", text)


def test_every_note_is_one_comment_line_whatever_the_label():
    """M1 (round 6): a file name with a newline wrote `%ignore ANY` and a rule of its own into the header."""
    label = 'file x.py\nANY: "\\u0001".."\\uffff"\n%ignore ANY\r\x0b\x0c\x1c\x85\u2028\u2029#'
    for fmt, forced in (("lark", True), ("lark", False), ("ebnf", True), ("ebnf", False)):
        exported = export("a = 1\n", fmt, forced, label)
        text = exported.text()
        assert len(text.splitlines()) == len(text.split("\n")) - 1  # no other character breaks a line
        header = text.split("\n")[: len(exported.notes) + (fmt == "lark")]
        assert header[-len(exported.notes):][0].startswith(("// copydecode grammar: file x.py\\n", "# copydecode"))
        assert "%ignore" not in "\n".join(line for line in text.split("\n") if not line.startswith(("//", "#")))
        assert len(text.split("\n")) == len(export("a = 1\n", fmt, forced, "file x.py").text().split("\n"))
