"""The longest common subsequence of two sequences of lines: Myers' O(ND) algorithm, which returns a
shortest edit script and so a longest common subsequence, never a heuristic match. The line oracle
(analysis.oracle.covmax), the edit formats and the commit miner all diff through `myers_matches`.

Which LCS (ties). After stripping the common prefix and suffix, let D be the edit distance of the
rest. While the greedy search's trace fits in `MYERS_TRACE_BYTES` (D(D+1)/2 int64 entries, so
D <= 2047 at the default 16 MiB, far beyond the corpora's files of a few hundred lines), the classic
greedy forward Myers search with backtracking is used, with its tie-breaking: on diagonal k at step
d the path comes down from diagonal k+1 (an insertion) when k == -d or v[k-1] < v[k+1], else across
from diagonal k-1 (a deletion; so ties delete first), each move followed by the longest snake; the
backtrack retraces the furthest-reaching path that first reaches the end. Beyond that size the
search runs in linear space: elements that never occur in the other sequence are dropped (they
cannot be in any common subsequence, so the LCS length is unchanged), then Myers' divide and
conquer on the middle snake (the split point of diff-match-patch's bisect) recurses on both halves,
stripping common prefixes and suffixes at each level. Both paths give a maximal LCS; only which one
of several equally long LCSs may differ, and only for inputs past the threshold. Elements must be
hashable.

Reordered files. Myers' time is O((N + M) D), and a file whose lines were reordered has D near N + M:
a reversed 8,000-line file took 30 s, and 50,000 lines would take 15-20 minutes. So past the trace
threshold, or when more than `HS_MIN_LINES` lines differ after the common prefix and suffix (where a
greedy search that gives up at the threshold would already cost O((N + M) * 2047)), and when the number r
of matching pairs (a[i] == b[j]) is at most `HS_MAX_PAIRS`, the exact LCS comes from Hunt-Szymanski, in O((r + N + M) log N): a reordered file of mostly distinct
lines has r near N. Only a large file that is both heavily reordered and made of a few lines repeated
thousands of times (r > HS_MAX_PAIRS) still takes the O((N + M) D) path. None of the default
corpora's cases reaches either path (all take the greedy search), so their programs do not change.
"""

from __future__ import annotations

MYERS_TRACE_BYTES = 16 * 2**20  # the greedy search's backtracking trace may use this much
HS_MAX_PAIRS = 5_000_000        # matching pairs up to which Hunt-Szymanski replaces linear-space Myers (seconds)
HS_MIN_LINES = 4096             # differing lines (after the common prefix and suffix) from which it is tried first


def myers_matches(a: list, b: list, *, trace_bytes: int = MYERS_TRACE_BYTES) -> list[tuple[int, int]]:
    """Index pairs (i, j) with a[i] == b[j] forming a longest common subsequence of a and b.

    `trace_bytes` bounds the greedy search's trace; larger problems take the linear-space path
    (module docstring)."""
    n, m = len(a), len(b)
    # strip a common prefix and suffix: cheap and keeps D small for near-identical texts
    pre = 0
    while pre < n and pre < m and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and suf < m - pre and a[n - 1 - suf] == b[m - 1 - suf]:
        suf += 1
    core = _core_matches(a[pre:n - suf], b[pre:m - suf], trace_bytes)
    pairs = [(i, i) for i in range(pre)]
    pairs += [(i + pre, j + pre) for i, j in core]
    pairs += [(n - suf + k, m - suf + k) for k in range(suf)]
    return pairs


def _core_matches(a: list, b: list, trace_bytes: int) -> list[tuple[int, int]]:
    if not a or not b:
        return []
    max_d = _max_traced_d(trace_bytes)
    # a large reordered core would spend O((n + m) max_d) in a greedy search that then gives up
    if len(a) + len(b) > HS_MIN_LINES and _matching_pairs(a, b) <= HS_MAX_PAIRS:
        return _hunt_szymanski(a, b)
    # a cheap lower bound on D skips a greedy search that could not finish within max_d
    if _edit_distance_lower_bound(a, b) <= max_d:
        pairs = _greedy_myers(a, b, max_d)
        if pairs is not None:
            return pairs
    if _matching_pairs(a, b) <= HS_MAX_PAIRS:
        return _hunt_szymanski(a, b)
    return _linear_space_matches(a, b)


def _matching_pairs(a: list, b: list) -> int:
    from collections import Counter

    count_b = Counter(b)
    return sum(c * count_b[x] for x, c in Counter(a).items())


def _hunt_szymanski(a: list, b: list) -> list[tuple[int, int]]:
    """An exact LCS in O((r + n + m) log n) for r matching pairs: for each b[j], the positions of b[j]
    in `a` in decreasing order extend the shortest-tail array `tail` (tail[k]: the smallest i that
    ends a common subsequence of length k + 1), with a back link per extension."""
    from bisect import bisect_left

    positions: dict = {}
    for i, x in enumerate(a):
        positions.setdefault(x, []).append(i)
    tail: list[int] = []
    links: list[tuple | None] = []
    for j, x in enumerate(b):
        for i in reversed(positions.get(x, ())):
            k = bisect_left(tail, i)
            if k == len(tail):
                tail.append(i)
                links.append(None)
            elif i < tail[k]:
                tail[k] = i
            else:
                continue
            links[k] = (i, j, links[k - 1] if k else None)
    pairs = []
    node = links[-1] if links else None
    while node is not None:
        pairs.append((node[0], node[1]))
        node = node[2]
    return pairs[::-1]


def _max_traced_d(trace_bytes: int) -> int:
    """The largest D whose trace, D(D+1)/2 entries of 8 bytes, fits in `trace_bytes`."""
    d = int((max(trace_bytes, 0) / 4) ** 0.5)
    while d > 0 and 4 * d * (d + 1) > trace_bytes:
        d -= 1
    return d


def _edit_distance_lower_bound(a: list, b: list) -> int:
    """n + m - 2 * (the most elements a common subsequence could hold, counting multiplicities)."""
    from collections import Counter

    count_b = Counter(b)
    shared = sum(min(c, count_b[x]) for x, c in Counter(a).items())
    return len(a) + len(b) - 2 * shared


def _greedy_myers(a: list, b: list, max_d: int) -> list[tuple[int, int]] | None:
    """Greedy forward Myers with backtracking; None if D exceeds max_d.

    trace[d] holds v before step d on the diagonals step d reads: k = -(d-1), -(d-1)+2, ..., d-1."""
    from array import array

    n, m = len(a), len(b)
    offset = n + m
    v = [0] * (2 * offset + 2)
    trace: list[array] = []
    for d in range(min(n + m, max_d) + 1):
        trace.append(array("q", v[offset - d + 1:offset + d:2]))
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
                return _backtrack(trace, n, m, d)
    return None


def _backtrack(trace, n: int, m: int, d_end: int) -> list[tuple[int, int]]:
    x, y = n, m
    pairs: list[tuple[int, int]] = []
    for d in range(d_end, -1, -1):
        row, base = trace[d], d - 1  # v[k] as of step d is row[(k + base) // 2]
        k = x - y
        if d == 0:
            prev_k = 0
        elif k == -d or (k != d and row[(k - 1 + base) // 2] < row[(k + 1 + base) // 2]):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = row[(prev_k + base) // 2] if d > 0 else 0
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y:
            x -= 1
            y -= 1
            pairs.append((x, y))
        x, y = prev_x, prev_y
    pairs.reverse()
    return pairs


def _linear_space_matches(a: list, b: list) -> list[tuple[int, int]]:
    """A longest common subsequence in linear space (module docstring)."""
    in_a, in_b = set(a), set(b)
    keep_a = [i for i, x in enumerate(a) if x in in_b]
    keep_b = [j for j, y in enumerate(b) if y in in_a]
    codes: dict = {}  # small ints compare faster than long lines
    ca = [codes.setdefault(a[i], len(codes)) for i in keep_a]
    cb = [codes.setdefault(b[j], len(codes)) for j in keep_b]
    return [(keep_a[i], keep_b[j]) for i, j in _divide_and_conquer(ca, cb)]


def _divide_and_conquer(a: list, b: list) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    todo = [(0, len(a), 0, len(b))]
    while todo:
        a0, a1, b0, b1 = todo.pop()
        while a0 < a1 and b0 < b1 and a[a0] == b[b0]:
            pairs.append((a0, b0))
            a0, b0 = a0 + 1, b0 + 1
        while a0 < a1 and b0 < b1 and a[a1 - 1] == b[b1 - 1]:
            a1, b1 = a1 - 1, b1 - 1
            pairs.append((a1, b1))
        if a0 == a1 or b0 == b1:
            continue
        split = _middle_snake(a[a0:a1], b[b0:b1])
        if split is None:  # nothing in common
            continue
        x, y = split
        if (x, y) in ((0, 0), (a1 - a0, b1 - b0)):
            raise AssertionError("the middle snake must split a stripped problem")  # invariant
        todo.append((a0, a0 + x, b0, b0 + y))
        todo.append((a0 + x, a1, b0 + y, b1))
    pairs.sort()
    return pairs


def _middle_snake(a: list, b: list) -> tuple[int, int] | None:
    """A point on a shortest edit path of a -> b, where the forward and reverse searches meet
    (Myers 1986, section 4b; the loop of diff-match-patch's diff_bisect); None if a and b share
    nothing."""
    n, m = len(a), len(b)
    max_d = (n + m + 1) // 2
    off, size = max_d, 2 * max_d + 2
    v1, v2 = [-1] * size, [-1] * size
    v1[off + 1] = v2[off + 1] = 0
    delta = n - m
    front = delta % 2 != 0  # with an odd delta the forward search detects the overlap
    k1start = k1end = k2start = k2end = 0
    for d in range(max_d):
        for k1 in range(-d + k1start, d + 1 - k1end, 2):
            k1o = off + k1
            if k1 == -d or (k1 != d and v1[k1o - 1] < v1[k1o + 1]):
                x1 = v1[k1o + 1]
            else:
                x1 = v1[k1o - 1] + 1
            y1 = x1 - k1
            while x1 < n and y1 < m and a[x1] == b[y1]:
                x1 += 1
                y1 += 1
            v1[k1o] = x1
            if x1 > n:
                k1end += 2
            elif y1 > m:
                k1start += 2
            elif front:
                k2o = off + delta - k1
                if 0 <= k2o < size and v2[k2o] != -1 and x1 >= n - v2[k2o]:
                    return x1, y1
        for k2 in range(-d + k2start, d + 1 - k2end, 2):
            k2o = off + k2
            if k2 == -d or (k2 != d and v2[k2o - 1] < v2[k2o + 1]):
                x2 = v2[k2o + 1]
            else:
                x2 = v2[k2o - 1] + 1
            y2 = x2 - k2
            while x2 < n and y2 < m and a[n - x2 - 1] == b[m - y2 - 1]:
                x2 += 1
                y2 += 1
            v2[k2o] = x2
            if x2 > n:
                k2end += 2
            elif y2 > m:
                k2start += 2
            elif not front:
                k1o = off + delta - k2
                if 0 <= k1o < size and v1[k1o] != -1:
                    x1 = v1[k1o]
                    if x1 >= n - x2:
                        return x1, x1 - (k1o - off)
    return None


