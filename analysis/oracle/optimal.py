"""Cost-optimal oracle programs: the program that minimises predicted time, by exact dynamic programming.

The coverage-maximising oracles (`analysis.oracle.covmax`) copy every token they can; under a latency model
that is not the fastest program: a 1-token copy pays a prefill and a ~10-token directive to save one
decode step. Here the objective is the predicted time itself.

Cost model (seconds; `CostModel`, pure, no torch):

    copy   prefill(n_src) + directive_tokens(copy) * t_directive
    gen    gold_tokens(body) * t_step + (gen_tags + escape_extra(body)) * t_directive
    every op that follows a copy or opens the program: + t_overhead (a decode run's first step)

`n_src` are the source tokens the copy forwards (first-byte rule, as `spans.n_tokens_src`), gold tokens
are the target's own tokens (first-byte rule, as `spans.n_tokens`). `t_directive` is `t_step` by default
(the "overhead" variant of `analysis.bounds`, the floor); 0 gives the "ideal" variant. `prefill` is any
vectorised function of n: the DP evaluates it once on 0..N and indexes the table, so it does not care
where the function comes from (fitted model, interpolation, the paper's curve). Directive token counts
come from a `Directives` object (`TokenizerDirectives` is exact for the tokenizer).

Adjacent gen ops share one `<gen>` body, so the DP has two states at each target position: the last op
was a gen (the next gen unit extends its body for free) or it was not (a gen pays the tags). Over
target units j (backwards):

    F_C[j] = o + min( g_j + tags + F_G[j+1],  min over copies (j, L, s) of c(s, L) + F_C[j+L] )
    F_G[j] =     min( g_j        + F_G[j+1],  the same copy term )
    F_C[m] = F_G[m] = 0,  answer F_C[0]

Line level: units are target lines; a copy is any run of source lines s..s+L-1 equal to target lines
j..j+L-1 (any source position, any length, not only the LCS order). Runs are found by extension,
ext(s, j) = 1 + ext(s+1, j+1), keeping one target line's row at a time. Work is
O(sum over matching line pairs (s, j) of ext(s, j)) numpy element operations, one numpy call per
matching pair; exact for any prefill and any directive function.

Token level: units are gold target tokens; a copy is any source token range equal to target tokens
j..j+L-1 with 1 <= L <= M(j), M(j) the longest prefix of target[j:] found in the source (matching
statistics of a suffix automaton, read off by two pointers), starting and ending on UTF-8 character
boundaries. Every length is considered (no maximal-match shortcut: with a convex or stepped prefill a
split copy or a shorter copy can win). For each (j, L) the source occurrence used is the leftmost one;
this is exact when the directive's token count is non-decreasing in the span's start and end (true
for Qwen2.5, whose pre-tokenizer makes every digit one token; `TokenizerDirectives` checks it for
the numbers in use and the DP refuses a directive model that is not monotone). The leftmost
occurrence is the automaton state's first end position; once a state has a single occurrence the
walk stops, since every longer prefix has that occurrence too. Work is O(sum_j M(j)) numpy element
operations (quadratic in the worst case of two near-identical texts, a few million elements for a
400-line file) plus O(sum_j u(j)) Python steps, u(j) the length at which target[j:] becomes unique.

Compiled. With `TokenizerDirectives` (any directive model with `copy_token_table`), both DPs run as
numba loops (`analysis.oracle.optimal_dp`, on `analysis.oracle.automaton.CompiledAutomaton`): the same candidates,
the same float expression per candidate in the same order, the same tie-breaks, so programs and
seconds are bit for bit those of the numpy/Python versions kept as `_reference_optimal_*_program`
(which any other directive model still uses; tests/analysis/oracle/test_optimal.py compares the two). The
work bounds above hold, as compiled element steps instead of numpy calls and Python steps.

Coverage oracle vs floor (token level). `programs.token_min_copy` stays 1: the programs stage's token
oracle maximises coverage, which is what the paper's coverage claim measures. It is not the fastest
program: with min_copy = 1 a large share of token copies are 1-2 tokens, each paying a prefill and a
~10-token directive. The `optimal` stage's `min_copy_sweep` table is where the trade-off is shown:
token_oracle(min_copy) for min_copy in 1, 2, 4, 8, 16 (coverage falls a little, to about 91-99.6% at 8,
close to the paper's 91-99%, while the floor rises) beside this module's cost-optimal program, whose
floor no min_copy reaches.

What is exact, and what is not:
- Exact for the cost model over line-aligned programs (line level) and gold-token-aligned programs
  (token level); a program that copies a source line into the middle of a target line, or source
  tokens that match target bytes across gold token boundaries, is outside both spaces, as it is for
  the coverage oracles.
- Escape overhead is treated as additive over units: each target line contributes
  `directives.gen_extra(line)`; at token level each escapable sequence of the target (`<copy`,
  `<gen`, `</gen`, `&lt;`, `&amp;`) contributes `gen_extra(sequence)` at the token where it starts.
  At line level the escapes themselves are additive (no escaped sequence spans a newline) but the
  tokens an escaped body costs are not quite (BPE); at token level a sequence cut by a copy boundary
  is charged though the body would not escape it. So for targets containing those sequences the DP
  minimises that approximation. Any program is priced exactly from its span rows
  (`program_span_rows`, what the bound's `case_costs` reads); for targets without those sequences
  that price equals the DP's value (tested).
- Tie-breaks: a gen wins a tie with a copy; among copies the longest, then (line level) the first
  source position.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Protocol

import numpy as np

from analysis.oracle.automaton import CompiledAutomaton, SuffixAutomaton
from analysis.errors import ParamsError, ProgramError, TokenizerError
from analysis.bounds import CostSettings, fixed_price
from analysis.latency.model import LatencyModel
from analysis.layout import LEVELS
from analysis.oracle.optimal_dp import compiled_longest_prefix_matches, compiled_occurrence_counts, line_dp, token_dp
from analysis.grammar.program import Copy, Gen, Op, Program, escape, render_op
from analysis.coverage.spans import SpanRow, program_spans
from analysis.text.lines import split_lines
from analysis.text.tokens import TokenizedText, Tokenizer, tokens_per_line


# ---------------------------------------------------------------- cost model and directives

@dataclass(frozen=True)
class CostModel:
    """Seconds per decoded token, and seconds to forward n copied tokens (vectorised over n).

    `t_directive` prices each directive token (copy tags, gen tags, escapes); None means t_step.
    `t_overhead` is a decode run's first-step overhead, paid by every op that follows a prefill (a
    copy, or the prompt's: the program's first op), as the bound's steady pricing charges it in the
    `overhead` variant (`analysis.bounds`; exact when every op decodes at least one token, as every
    directive does). The optimal stage builds it from the bound's price (`analysis.bounds.fixed_price`).
    """

    t_step: float
    prefill: Callable[[np.ndarray], np.ndarray]
    t_directive: float | None = None
    t_overhead: float = 0.0

    def __post_init__(self):
        for name in ("t_step", "t_directive", "t_overhead"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value) or value < 0):
                raise ParamsError(f"CostModel.{name} must be a finite number >= 0, got {value!r}")

    @property
    def t_dir(self) -> float:
        return self.t_step if self.t_directive is None else self.t_directive

    def prefill_table(self, n_max: int) -> np.ndarray:
        """prefill(0..n_max) as floats, checked once so the DP can index it."""
        n = np.arange(n_max + 1)
        table = np.asarray(self.prefill(n), dtype=float)
        if table.shape != n.shape:
            raise ParamsError(f"CostModel.prefill must map an array of {n.size} counts to {n.size} seconds, "
                              f"got shape {table.shape}")
        bad = ~np.isfinite(table) | (table < 0)
        if bad.any():
            k = int(np.argmax(bad))
            raise ParamsError(f"CostModel.prefill({k}) = {table[k]!r}; prefill times must be finite and >= 0")
        return table


def dp_cost(model: LatencyModel, cost: CostSettings) -> CostModel:
    """The DP's input: the bounds' price at its one context (`analysis.bounds.fixed_price`: the steady step
    per decoded token, directive tokens included, the first-step overhead once per decode run, T_prefill per
    copy). Extrapolated values are allowed here; whether the chosen programs may use them is the bound's
    check (`case_costs`), which also counts them."""
    price = fixed_price(model, cost)
    return CostModel(price.step, price.prefill, t_overhead=price.overhead)


class Directives(Protocol):
    """Decoded tokens of directives, for one tokenizer."""

    gen_tags: int

    def copy_tokens(self, unit: str, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Tokens of `<copy unit="start-end"/>` for each pair (1-based bounds)."""

    def gen_extra(self, text: str) -> int:
        """Extra tokens that escaping `text` inside a `<gen>` body costs."""

    def monotone(self, unit: str, upto: int) -> bool:
        """Whether copy_tokens is non-decreasing in start and end for bounds up to `upto`."""


@dataclass
class OpDirectives:
    """Directives from any per-op counter, e.g. `DirectiveCounter(tok).of`; exact, one call per op.

    `is_monotone` is the caller's statement that the count never falls as a bound grows (the token
    DP needs it and cannot check an arbitrary function).
    """

    of: Callable[[Op], int]
    is_monotone: bool = False
    gen_tags: int = field(init=False)

    def __post_init__(self):
        self.gen_tags = int(self.of(Gen("x")))

    def copy_tokens(self, unit, starts, ends):
        starts, ends = np.broadcast_arrays(np.asarray(starts), np.asarray(ends))
        return np.array([self.of(Copy(int(a), int(b), unit)) for a, b in zip(starts.ravel(), ends.ravel())],
                        dtype=float).reshape(starts.shape)

    def gen_extra(self, text):
        return int(self.of(Gen(text))) - self.gen_tags if text else 0

    def monotone(self, unit, upto):
        return self.is_monotone


class TokenizerDirectives:
    """Exact directive counts for a tokenizer whose pre-tokenizer isolates numbers (Qwen2.5: one token
    per digit), so that tokens(`<copy u="a-b"/>`) = base(u) + tokens(str(a)) + tokens(str(b)).

    The decomposition is checked on construction against the tokenizer itself (numbers at every digit
    length boundary up to 10^7, both units); a tokenizer for which it fails raises TokenizerError.
    Number counts are computed in batches as larger bounds are needed.
    """

    _CHECK = (1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, 100000, 999999, 1000000, 1234567)

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.gen_tags = tokenizer.count("<gen>") + tokenizer.count("</gen>")
        self._numbers = np.zeros(1, dtype=float)  # index 0 unused
        one = tokenizer.count("1")
        self._base = {u: tokenizer.count(render_op(Copy(1, 1, u))) - 2 * one for u in ("lines", "tokens")}
        self._check()

    def _number_counts(self, upto: int) -> np.ndarray:
        # grown on a local copy and published whole, so threads (the threading backend) sharing this
        # object never see, or build on, an array another thread is extending
        numbers = self._numbers
        if upto >= len(numbers):
            new = range(len(numbers), max(upto + 1, 2 * len(numbers)))
            counts = [len(e.ids) for e in self.tokenizer.backend.encode_batch([str(x) for x in new],
                                                                              add_special_tokens=False)]
            numbers = np.concatenate([numbers, np.array(counts, dtype=float)])
            if len(numbers) > len(self._numbers):
                self._numbers = numbers
        return numbers

    def _check(self) -> None:
        for unit in ("lines", "tokens"):
            for a in self._CHECK:
                for b in self._CHECK:
                    want = self.tokenizer.count(render_op(Copy(a, b, unit)))
                    got = self._base[unit] + self.tokenizer.count(str(a)) + self.tokenizer.count(str(b))
                    if want != got:
                        raise TokenizerError(
                            f"{self.tokenizer.name}: copy directive tokens do not split into tag + numbers "
                            f"(copy {unit} {a}-{b}: {want} tokens, decomposition says {got}); "
                            "use OpDirectives(DirectiveCounter(tokenizer).of)")

    def copy_tokens(self, unit, starts, ends):
        starts, ends = np.asarray(starts), np.asarray(ends)
        upto = int(max(starts.max(initial=1), ends.max(initial=1)))
        numbers = self._number_counts(upto)
        return self._base[unit] + numbers[starts] + numbers[ends]

    def copy_token_table(self, unit: str, upto: int) -> tuple[int, np.ndarray]:
        """(base, numbers) with copy_tokens(unit, a, b) = base + numbers[a] + numbers[b], for a, b <= upto
        (what the compiled DPs read; the same sum, in the same order, as `copy_tokens`)."""
        return self._base[unit], self._number_counts(max(upto, 1))

    def gen_extra(self, text):
        if "<" not in text and "&" not in text:  # nothing `escape` could rewrite
            return 0
        escaped = escape(text)
        return 0 if escaped == text else self.tokenizer.count(escaped) - self.tokenizer.count(text)

    def monotone(self, unit, upto):
        return bool(np.all(np.diff(self._number_counts(max(upto, 1))[1:upto + 1]) >= 0))


# ---------------------------------------------------------------- evaluating a program

class _OfAdapter:
    """`program_spans` wants a DirectiveCounter-like `.of(op)`; this one answers from `Directives`."""

    def __init__(self, directives: Directives):
        self.d = directives

    def of(self, op: Op) -> int:
        if isinstance(op, Copy):
            return int(self.d.copy_tokens(op.unit, np.array([op.start]), np.array([op.end]))[0])
        return self.d.gen_tags + self.d.gen_extra(op.text)


def program_span_rows(program: Program, source: TokenizedText, target: TokenizedText,
                      directives: Directives) -> list[SpanRow]:
    """The program's rows of the span table (`analysis.coverage.spans`), with directive tokens from `directives`,
    so that any program can be costed by the bound (`analysis.bounds.case_costs`)."""
    return program_spans(program, source, target, _OfAdapter(directives))


# ---------------------------------------------------------------- the DP

@dataclass(frozen=True)
class Optimal:
    """The DP's program and its objective (predicted seconds)."""

    level: str
    program: Program
    seconds: float


@dataclass
class _Tables:
    """Backward DP values and choices; choice -1 = gen this unit, else index into `copies`."""

    f_c: np.ndarray
    f_g: np.ndarray
    copy_choice: list[tuple[int, int] | None]  # per j: (L, s) of the best copy, or None
    copy_value: np.ndarray                     # per j: cost of that copy + F_C[j+L]


def _solve(n_units: int, gen_unit: np.ndarray, tags: float, overhead: float,
           best_copy: Callable[[int, np.ndarray], tuple[float, tuple[int, int] | None]]) -> _Tables:
    f_c = np.zeros(n_units + 1)
    f_g = np.zeros(n_units + 1)
    choices: list[tuple[int, int] | None] = [None] * n_units
    values = np.full(n_units, np.inf)
    for j in range(n_units - 1, -1, -1):
        value, choice = best_copy(j, f_c)
        choices[j], values[j] = choice, value
        gen_g = gen_unit[j] + f_g[j + 1]
        f_g[j] = gen_g if gen_g <= value else value
        gen_c = gen_unit[j] + tags + f_g[j + 1]
        f_c[j] = (gen_c if gen_c <= value else value) + overhead  # after a prefill: a new decode run
    return _Tables(f_c, f_g, choices, values)


def _tables(f_c, f_g, choice_len, choice_start, values) -> _Tables:
    choices = [None if length < 0 else (length, start)
               for length, start in zip(choice_len.tolist(), choice_start.tolist())]
    return _Tables(f_c, f_g, choices, values)


def _walk(tables: _Tables, gen_unit: np.ndarray, tags: float) -> list[tuple[str, int, int, int]]:
    """Forward replay of the choices: ("gen", j, j+1, 0) or ("copy", j, j+L, s)."""
    steps, j, in_gen = [], 0, False
    n = len(gen_unit)
    while j < n:
        gen = gen_unit[j] + (0.0 if in_gen else tags) + tables.f_g[j + 1]
        if tables.copy_choice[j] is not None and tables.copy_value[j] < gen:
            length, s = tables.copy_choice[j]
            steps.append(("copy", j, j + length, s))
            j, in_gen = j + length, False
        else:
            steps.append(("gen", j, j + 1, 0))
            j, in_gen = j + 1, True
    return steps


def _program(steps, unit: str, gen_text: Callable[[int, int], str]) -> Program:
    ops: list[Op] = []
    gen_from = None
    for kind, lo, hi, s in steps + [("end", 0, 0, 0)]:
        if kind == "gen":
            gen_from = lo if gen_from is None else gen_from
            gen_to = hi
            continue
        if gen_from is not None:
            ops.append(Gen(gen_text(gen_from, gen_to)))
            gen_from = None
        if kind == "copy":
            ops.append(Copy(s + 1, s + (hi - lo), unit))  # type: ignore[arg-type]
    return Program(tuple(ops))


def optimal_line_program(source: TokenizedText, target: TokenizedText,
                         cost: CostModel, directives: Directives) -> Optimal:
    """Time-minimising line-level program (module docstring). `source`/`target` are gold tokenizations.

    With a directive model that has a `copy_token_table` (`TokenizerDirectives`) the DP runs compiled
    (`analysis.oracle.optimal_dp.line_dp`), the same arithmetic in the same order as `_reference_optimal_line_program`, which
    any other directive model uses."""
    if getattr(directives, "copy_token_table", None) is None:
        return _reference_optimal_line_program(source, target, cost, directives)
    src_lines, tgt_lines = split_lines(source.text), split_lines(target.text)
    src_tok = np.concatenate([[0], np.cumsum(tokens_per_line(source))]).astype(np.int64)
    gold = np.array(tokens_per_line(target), dtype=float)
    extra = np.array([directives.gen_extra(line) for line in tgt_lines], dtype=float)
    gen_unit = gold * cost.t_step + extra * cost.t_dir
    tags = directives.gen_tags * cost.t_dir
    prefill = cost.prefill_table(int(src_tok[-1]))
    base, numbers = directives.copy_token_table("lines", len(src_lines) + 1)
    ids: dict[str, int] = {}
    src_ids = np.array([ids.setdefault(line, len(ids)) for line in src_lines], dtype=np.int64)
    tgt_ids = np.array([ids.get(line, -1) for line in tgt_lines], dtype=np.int64)
    tables = _tables(*line_dp(src_ids, tgt_ids, src_tok, gen_unit, float(tags), float(cost.t_overhead), prefill, float(cost.t_dir),
                               float(base), numbers))
    program = _program(_walk(tables, gen_unit, tags), "lines", lambda lo, hi: "".join(tgt_lines[lo:hi]))
    return Optimal("line", program, float(tables.f_c[0]) if tgt_lines else 0.0)


def _reference_optimal_line_program(source: TokenizedText, target: TokenizedText,
                         cost: CostModel, directives: Directives) -> Optimal:
    """`optimal_line_program` in numpy and Python, one target line at a time (the readable reference)."""
    src_lines, tgt_lines = split_lines(source.text), split_lines(target.text)
    src_tok = np.concatenate([[0], np.cumsum(tokens_per_line(source))]).astype(int)
    gold = np.array(tokens_per_line(target), dtype=float)
    extra = np.array([directives.gen_extra(line) for line in tgt_lines], dtype=float)
    gen_unit = gold * cost.t_step + extra * cost.t_dir
    tags = directives.gen_tags * cost.t_dir
    prefill = cost.prefill_table(int(src_tok[-1]))
    positions: dict[str, list[int]] = {}
    for s, line in enumerate(src_lines):
        positions.setdefault(line, []).append(s)
    ext_next: dict[int, int] = {}

    def best_copy(j: int, f_c: np.ndarray):
        nonlocal ext_next
        ext = {s: 1 + ext_next.get(s + 1, 0) for s in positions.get(tgt_lines[j], ())}
        ext_next = ext
        if not ext:
            return np.inf, None
        # every (s, L) candidate of this target line in one vector: numpy calls per line, not per pair
        starts = np.fromiter(ext.keys(), dtype=int, count=len(ext))
        runs = np.fromiter(ext.values(), dtype=int, count=len(ext))
        offsets = np.cumsum(runs) - runs
        s_rep = np.repeat(starts, runs)
        lengths = np.arange(int(runs.sum())) - np.repeat(offsets, runs) + 1
        n_src = src_tok[s_rep + lengths] - src_tok[s_rep]
        values = (prefill[n_src] + cost.t_dir * directives.copy_tokens("lines", s_rep + 1, s_rep + lengths)
                  + f_c[j + lengths])
        best = values.min()
        # the first source position attaining the minimum, then its longest length attaining it
        group = int(np.searchsorted(offsets, int(np.argmax(values == best)), side="right")) - 1
        lo, hi = int(offsets[group]), int(offsets[group] + runs[group])
        k = hi - 1 - int(np.argmax(values[lo:hi][::-1] == best))
        return float(best), (int(lengths[k]), int(starts[group]))

    tables = _solve(len(tgt_lines), gen_unit, tags, cost.t_overhead, best_copy)
    program = _program(_walk(tables, gen_unit, tags), "lines", lambda lo, hi: "".join(tgt_lines[lo:hi]))
    return Optimal("line", program, float(tables.f_c[0]) if tgt_lines else 0.0)


def _occurrence_counts(sam: SuffixAutomaton) -> np.ndarray:
    """|endpos| of every state: 1 for each state created at a position (length == first_end + 1),
    0 for clones, summed up the suffix links from the longest states down."""
    length = np.array(sam.length)
    first_end = np.array(sam.first_end)
    counts = ((length == first_end + 1) & (np.arange(len(length)) > 0)).astype(np.int64)
    for state in np.argsort(-length, kind="stable"):
        if sam.link[state] >= 0:
            counts[sam.link[state]] += counts[state]
    return counts


def _leftmost_starts(sam: SuffixAutomaton, counts: np.ndarray, ids: Sequence[int], j: int, m: int) -> np.ndarray:
    """0-based source start of the leftmost occurrence of target[j:j+L], for L = 1..m."""
    starts = np.empty(m, dtype=int)
    state = 0
    for k in range(m):
        state = sam.next[state][ids[j + k]]
        starts[k] = sam.first_end[state] - k
        if counts[state] == 1:  # a single occurrence: every longer prefix has it too
            starts[k + 1:] = starts[k]
            break
    return starts


_ESCAPED = (b"<copy", b"<gen", b"</gen", b"&lt;", b"&amp;")


def _token_escape_extra(target: TokenizedText, directives: Directives) -> np.ndarray:
    """Escape overhead per target token: each sequence `escape` would rewrite in the whole target
    (found on bytes; all are ASCII) is charged `gen_extra(sequence)` at the token holding its first
    byte. An approximation (module docstring): a sequence cut by a copy boundary is not escaped."""
    raw = target.text.encode("utf-8")
    extra = np.zeros(len(target.ids))
    for pattern in _ESCAPED:
        cost = directives.gen_extra(pattern.decode())
        at = raw.find(pattern)
        while at >= 0:
            extra[bisect_right(target.byte_bounds, at) - 1] += cost
            at = raw.find(pattern, at + 1)
    return extra


def optimal_token_program(source: TokenizedText, target: TokenizedText,
                          cost: CostModel, directives: Directives) -> Optimal:
    """Time-minimising token-level program (module docstring); copies use 1-based token indices.

    With a directive model that has a `copy_token_table` (`TokenizerDirectives`) the automaton and the
    DP run compiled (`CompiledAutomaton`, `analysis.oracle.optimal_dp.token_dp`), the same arithmetic in the same order as
    `_reference_optimal_token_program`, which any other directive model uses."""
    if getattr(directives, "copy_token_table", None) is None:
        return _reference_optimal_token_program(source, target, cost, directives)
    n = len(target.ids)
    if not directives.monotone("tokens", len(source.ids) + 1):
        raise ProgramError("the token-level optimal oracle uses the leftmost occurrence of each copy, which is "
                           "optimal only if directive tokens never fall as a span bound grows; this directive "
                           "model does not say so (OpDirectives(is_monotone=...)) or its counts are not monotone")
    sam = CompiledAutomaton.build(source.ids)
    counts = compiled_occurrence_counts(sam.link, sam.length, sam.first_end)
    target_ids = np.asarray(target.ids, dtype=np.int64)
    match_len, _ = sam.matching_statistics(target_ids)
    longest = compiled_longest_prefix_matches(match_len, n)
    tgt_ok = np.array([c is not None for c in target.char_bounds], dtype=np.bool_)
    extra = _token_escape_extra(target, directives)
    gen_unit = cost.t_step + extra * cost.t_dir
    tags = directives.gen_tags * cost.t_dir
    prefill = cost.prefill_table(int(longest.max(initial=0)))
    base, numbers = directives.copy_token_table("tokens", len(source.ids) + 1)
    tables = _tables(*token_dp(sam.keys, sam.values, sam.mask, sam.first_end, counts, target_ids, longest, tgt_ok,
                                gen_unit, float(tags), float(cost.t_overhead), prefill, float(cost.t_dir), float(base), numbers))
    program = _program(_walk(tables, gen_unit, tags), "tokens",
                       lambda lo, hi: b"".join(target.pieces[lo:hi]).decode("utf-8"))
    return Optimal("token", program, float(tables.f_c[0]) if n else 0.0)


def _reference_optimal_token_program(source: TokenizedText, target: TokenizedText,
                          cost: CostModel, directives: Directives) -> Optimal:
    """`optimal_token_program` in numpy and Python, one target token at a time (the readable reference)."""
    n = len(target.ids)
    if not directives.monotone("tokens", len(source.ids) + 1):
        raise ProgramError("the token-level optimal oracle uses the leftmost occurrence of each copy, which is "
                           "optimal only if directive tokens never fall as a span bound grows; this directive "
                           "model does not say so (OpDirectives(is_monotone=...)) or its counts are not monotone")
    sam = SuffixAutomaton.build(source.ids)
    counts = _occurrence_counts(sam)
    match_len, _ = sam.matching_statistics(target.ids)
    longest = compiled_longest_prefix_matches(np.asarray(match_len, dtype=np.int64), n)  # M(j), defined once
    tgt_ok = np.array([c is not None for c in target.char_bounds], dtype=bool)
    extra = _token_escape_extra(target, directives)
    gen_unit = cost.t_step + extra * cost.t_dir
    tags = directives.gen_tags * cost.t_dir
    prefill = cost.prefill_table(int(longest.max(initial=0)))

    def best_copy(j: int, f_c: np.ndarray):
        m = int(longest[j])
        if m == 0 or not tgt_ok[j]:
            return np.inf, None
        lengths = np.arange(1, m + 1)
        starts = _leftmost_starts(sam, counts, target.ids, j, m)
        values = prefill[lengths] + cost.t_dir * directives.copy_tokens("tokens", starts + 1, starts + lengths)
        values = np.where(tgt_ok[j + lengths], values + f_c[j + lengths], np.inf)
        k = m - 1 - int(np.argmin(values[::-1]))
        return float(values[k]), (int(lengths[k]), int(starts[k]))

    tables = _solve(n, gen_unit, tags, cost.t_overhead, best_copy)
    program = _program(_walk(tables, gen_unit, tags), "tokens",
                       lambda lo, hi: b"".join(target.pieces[lo:hi]).decode("utf-8"))
    return Optimal("token", program, float(tables.f_c[0]) if n else 0.0)


def optimal_program(level: str, source: TokenizedText, target: TokenizedText,
                    cost: CostModel, directives: Directives) -> Optimal:
    if level == "line":
        return optimal_line_program(source, target, cost, directives)
    if level == "token":
        return optimal_token_program(source, target, cost, directives)
    raise ParamsError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")
