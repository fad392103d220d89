"""Oracle programs: the best program a perfect model could write for (source, target).

Line level: an exact longest common subsequence of the source and target lines (Myers' O(ND)
algorithm, which returns a shortest edit script and so a longest common subsequence, never a
heuristic match). Matched target lines that are consecutive in both texts become one copy span;
every other target line is generated.

The LCS itself (Myers' diff, its ties and its linear-space and Hunt-Szymanski paths) is
analysis.text.diff.

Token level: any token range of the source may be copied, in any order, any number of times. With a
minimum copy length k, the oracle maximises the number of copied target tokens exactly:

    f[i] = max( f[i-1],  max_{i-L(i) <= j <= i-k} f[j] + (i - j) )

where L(i) is the longest suffix of target[:i] that occurs in the source (matching statistics from
a suffix automaton of the source, linear time). f[j] + i - j = (f[j] - j) + i, and the window's left
edge i - L(i) never moves left, so a monotone deque gives the inner max in amortised O(1): O(n + m)
per case. Copy spans start and end on boundaries that fall between UTF-8 characters, so every span
is copyable as text. Ties prefer generating, then the longest copy. The automaton (analysis.oracle.automaton)
and this DP run compiled (numba: `CompiledAutomaton`, `_token_oracle_choices`); `SuffixAutomaton` and
`_reference_token_oracle` are the plain-Python versions the tests hold them to.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numba import njit

from analysis.oracle.automaton import CompiledAutomaton, SuffixAutomaton
from analysis.errors import ProgramError
from analysis.grammar.program import Copy, Gen, Op, Program, merge_adjacent
from analysis.text.diff import MYERS_TRACE_BYTES, myers_matches
from analysis.text.lines import split_lines
from analysis.text.tokens import TokenizedText

# ---------------------------------------------------------------- line level

def line_oracle(source: str, target: str, *, trace_bytes: int = MYERS_TRACE_BYTES) -> Program:
    """The LCS program: matched target lines copied (consecutive matches in both texts as one copy),
    the others generated (adjacent ones as one gen). Built run by run: the program
    `merge_adjacent` makes of one op per target line (tested), without the per-line ops."""
    src_lines, tgt_lines = split_lines(source), split_lines(target)
    matched = dict((j, i) for i, j in myers_matches(src_lines, tgt_lines, trace_bytes=trace_bytes))
    ops: list[Op] = []
    gen: list[str] = []
    first = last = -1  # the copy run being built: source lines first..last (0-based), none if -1
    for j, line in enumerate(tgt_lines):
        i = matched.get(j)
        if i is None:
            if first >= 0:
                ops.append(Copy(first + 1, last + 1, "lines"))
                first = -1
            gen.append(line)
            continue
        if gen:
            ops.append(Gen("".join(gen)))
            gen = []
        if first >= 0 and last + 1 == i:
            last = i
            continue
        if first >= 0:
            ops.append(Copy(first + 1, last + 1, "lines"))
        first = last = i
    if first >= 0:
        ops.append(Copy(first + 1, last + 1, "lines"))
    if gen:
        ops.append(Gen("".join(gen)))
    return Program(tuple(ops))


# ---------------------------------------------------------------- token level

def _aligned(tok: TokenizedText) -> list[bool]:
    return [c is not None for c in tok.char_bounds]


def token_oracle(source: TokenizedText, target: TokenizedText, min_copy: int = 1) -> Program:
    """Coverage-maximising token-level program (module docstring); copies use 1-based token indices.

    The automaton and the DP run compiled (`CompiledAutomaton`, `_token_oracle_choices`); the program
    is the one `_reference_token_oracle` writes (tested)."""
    if min_copy < 1:
        raise ProgramError(f"min_copy must be >= 1, got {min_copy}")
    sam = CompiledAutomaton.build(source.ids)
    match_len, match_state = sam.matching_statistics(target.ids)
    tgt_ok = np.array(_aligned(target), dtype=np.bool_)
    choice = _token_oracle_choices(match_len, tgt_ok, min_copy)
    return _token_program(source, target, choice.tolist(), match_state.tolist(), sam.first_end.tolist(),
                          _aligned(source))


def _reference_token_oracle(source: TokenizedText, target: TokenizedText, min_copy: int = 1) -> Program:
    """`token_oracle` in plain Python (the readable reference; the tests compare the two)."""
    if min_copy < 1:
        raise ProgramError(f"min_copy must be >= 1, got {min_copy}")
    sam = SuffixAutomaton.build(source.ids)
    match_len, match_state = sam.matching_statistics(target.ids)
    n = len(target.ids)
    src_ok, tgt_ok = _aligned(source), _aligned(target)
    best = [0] * (n + 1)
    choice: list[int] = [-1] * (n + 1)  # -1: token i-1 generated; else j, the copy's start
    window: deque[int] = deque()  # candidate j, with best[j] - j decreasing
    for i in range(1, n + 1):
        j_new = i - min_copy
        if j_new >= 0 and tgt_ok[j_new]:
            while window and best[window[-1]] - window[-1] < best[j_new] - j_new:
                window.pop()
            window.append(j_new)
        left = i - match_len[i - 1]
        while window and window[0] < left:
            window.popleft()
        best[i], choice[i] = best[i - 1], -1
        if window and tgt_ok[i]:
            j = window[0]
            gain = best[j] + (i - j)
            if gain > best[i]:
                best[i], choice[i] = gain, j
    return _token_program(source, target, choice, match_state, sam.first_end, src_ok)


def _token_program(source, target, choice, match_state, first_end, src_ok) -> Program:
    """Walk the DP choices back; generated tokens are kept as indices and joined as bytes, so a
    multi-byte character split over several generated tokens is decoded whole."""
    steps: list[int | Copy] = []
    i = len(target.ids)
    while i > 0:
        j = choice[i]
        if j < 0:
            steps.append(i - 1)
            i -= 1
            continue
        end = first_end[match_state[i - 1]]  # 0-based source index of the copy's last token
        start = end - (i - j) + 1
        if source.ids[start:end + 1] != target.ids[j:i] or not (src_ok[start] and src_ok[end + 1]):
            raise AssertionError("suffix automaton returned a wrong occurrence")  # invariant
        steps.append(Copy(start + 1, end + 1, "tokens"))
        i = j
    steps.reverse()
    ops: list[Op] = []
    run: list[int] = []
    for step in steps + [None]:
        if isinstance(step, int):
            run.append(step)
            continue
        if run:
            ops.append(Gen(b"".join(target.pieces[k] for k in run).decode("utf-8")))
            run.clear()
        if step is not None:
            ops.append(step)
    return merge_adjacent(ops)


# ---------------------------------------------------------------- the compiled DP (numba)

@njit(cache=True)
def _token_oracle_choices(match_len, tgt_ok, min_copy):
    """`_reference_token_oracle`'s DP (monotone deque as an array): choice[i] = -1 or the copy's start."""
    n = match_len.shape[0]
    best = np.zeros(n + 1, dtype=np.int64)
    choice = np.full(n + 1, -1, dtype=np.int64)
    window = np.empty(n + 1, dtype=np.int64)
    lo = 0
    hi = 0  # window[lo:hi], best[j] - j decreasing
    for i in range(1, n + 1):
        j_new = i - min_copy
        if j_new >= 0 and tgt_ok[j_new]:
            while hi > lo and best[window[hi - 1]] - window[hi - 1] < best[j_new] - j_new:
                hi -= 1
            window[hi] = j_new
            hi += 1
        left = i - match_len[i - 1]
        while hi > lo and window[lo] < left:
            lo += 1
        best[i] = best[i - 1]
        choice[i] = -1
        if hi > lo and tgt_ok[i]:
            j = window[lo]
            gain = best[j] + (i - j)
            if gain > best[i]:
                best[i] = gain
                choice[i] = j
    return choice
