"""Oracle programs: the best program a perfect model could write for (source, target).

Line level: an exact longest common subsequence of the source and target lines (Myers' O(ND)
algorithm, which returns a shortest edit script and so a longest common subsequence, never a
heuristic match). Matched target lines that are consecutive in both texts become one copy span;
every other target line is generated.

Token level: any token range of the source may be copied, in any order, any number of times. With a
minimum copy length k, the oracle maximises the number of copied target tokens exactly:

    f[i] = max( f[i-1],  max_{i-L(i) <= j <= i-k} f[j] + (i - j) )

where L(i) is the longest suffix of target[:i] that occurs in the source (matching statistics from
a suffix automaton of the source, linear time). f[j] + i - j = (f[j] - j) + i, and the window's left
edge i - L(i) never moves left, so a monotone deque gives the inner max in amortised O(1): O(n + m)
per case. Copy spans start and end on boundaries that fall between UTF-8 characters, so every span
is copyable as text. Ties prefer generating, then the longest copy.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from analysis.errors import ProgramError
from analysis.program import Copy, Gen, Op, Program, merge_adjacent
from analysis.text import split_lines
from analysis.tokenization import TokenizedText

# ---------------------------------------------------------------- line level: Myers' diff

def myers_matches(a: list, b: list) -> list[tuple[int, int]]:
    """Index pairs (i, j) with a[i] == b[j] forming a longest common subsequence of a and b."""
    n, m = len(a), len(b)
    # strip a common prefix and suffix: cheap and keeps D small for near-identical texts
    pre = 0
    while pre < n and pre < m and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and suf < m - pre and a[n - 1 - suf] == b[m - 1 - suf]:
        suf += 1
    core = _myers_core(a[pre:n - suf], b[pre:m - suf])
    pairs = [(i, i) for i in range(pre)]
    pairs += [(i + pre, j + pre) for i, j in core]
    pairs += [(n - suf + k, m - suf + k) for k in range(suf)]
    return pairs


def _myers_core(a: list, b: list) -> list[tuple[int, int]]:
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return []
    max_d = n + m
    offset = max_d
    v = [0] * (2 * max_d + 2)
    trace: list[list[int]] = []
    for d in range(max_d + 1):
        trace.append(v[:])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                return _backtrack(trace, a, b, d, offset)
    raise AssertionError("Myers' search must end by d = n + m")


def _backtrack(trace: list[list[int]], a: list, b: list, d_end: int, offset: int) -> list[tuple[int, int]]:
    x, y = len(a), len(b)
    pairs: list[tuple[int, int]] = []
    for d in range(d_end, -1, -1):
        v = trace[d]
        k = x - y
        if d == 0:
            prev_k = 0
        elif k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = v[offset + prev_k] if d > 0 else 0
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            pairs.append((x, y))
        x, y = prev_x, prev_y
    pairs.reverse()
    return pairs


def line_oracle(source: str, target: str) -> Program:
    src_lines, tgt_lines = split_lines(source), split_lines(target)
    matched = dict((j, i) for i, j in myers_matches(src_lines, tgt_lines))
    ops: list[Op] = []
    for j, line in enumerate(tgt_lines):
        i = matched.get(j)
        ops.append(Gen(line) if i is None else Copy(i + 1, i + 1, "lines"))
    return merge_adjacent(ops)


# ---------------------------------------------------------------- token level: suffix automaton

@dataclass
class SuffixAutomaton:
    """Suffix automaton of a token sequence; `first_end[s]` is an end position of state s's strings."""

    next: list[dict[int, int]]
    link: list[int]
    length: list[int]
    first_end: list[int]

    @classmethod
    def build(cls, seq) -> "SuffixAutomaton":
        nxt: list[dict[int, int]] = [{}]
        link, length, first_end = [-1], [0], [-1]
        last = 0
        for pos, c in enumerate(seq):
            cur = len(nxt)
            nxt.append({})
            length.append(length[last] + 1)
            link.append(0)
            first_end.append(pos)
            p = last
            while p != -1 and c not in nxt[p]:
                nxt[p][c] = cur
                p = link[p]
            if p != -1:
                q = nxt[p][c]
                if length[p] + 1 == length[q]:
                    link[cur] = q
                else:
                    clone = len(nxt)
                    nxt.append(dict(nxt[q]))
                    length.append(length[p] + 1)
                    link.append(link[q])
                    first_end.append(first_end[q])
                    while p != -1 and nxt[p].get(c) == q:
                        nxt[p][c] = clone
                        p = link[p]
                    link[q] = clone
                    link[cur] = clone
            last = cur
        return cls(nxt, link, length, first_end)

    def matching_statistics(self, seq) -> tuple[list[int], list[int]]:
        """For each prefix seq[:i+1]: the longest suffix length found in the source, and its state."""
        state, cur_len = 0, 0
        lengths, states = [], []
        for c in seq:
            while state and c not in self.next[state]:
                state = self.link[state]
                cur_len = self.length[state]
            if c in self.next[state]:
                state = self.next[state][c]
                cur_len += 1
            else:
                state, cur_len = 0, 0
            lengths.append(cur_len)
            states.append(state)
        return lengths, states


def _aligned(tok: TokenizedText) -> list[bool]:
    return [c is not None for c in tok.char_bounds]


def token_oracle(source: TokenizedText, target: TokenizedText, min_copy: int = 1) -> Program:
    """Coverage-maximising token-level program (module docstring); copies use 1-based token indices."""
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
    return _token_program(source, target, choice, match_state, sam, src_ok)


def _token_program(source, target, choice, match_state, sam, src_ok) -> Program:
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
        end = sam.first_end[match_state[i - 1]]  # 0-based source index of the copy's last token
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
