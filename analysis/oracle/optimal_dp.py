"""The cost-optimal DPs of analysis.oracle.optimal as compiled loops (numba), bit for bit its references.

`line_dp` and `token_dp` are `analysis.oracle.optimal`'s `_solve` with the reference programs' `best_copy`,
in compiled loops: every candidate's value is the same float expression evaluated in the same order
(prefill + t_dir * ((base + numbers[a]) + numbers[b])) + f_c[j + L], and ties break the same way, so
the tables, the programs and the seconds are bit for bit the reference's (tests/analysis/oracle/test_optimal.py
compares them on random cases). Each returns the DP tables (f_c, f_g, choice_len, choice_start,
values) that `analysis.oracle.optimal` walks into a program.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from analysis.oracle.automaton import sam_get


@njit(cache=True)
def close_unit(j, value, gen_unit, tags, overhead, f_c, f_g):
    """F_G[j] and F_C[j] from the best copy's `value` at unit j (inf: none) and the gen terms
    (`analysis.oracle.optimal._solve`'s step, the same comparisons; a gen wins a tie); after a
    prefill (F_C) the op at j also opens a decode run and pays the first-step `overhead`."""
    gen_g = gen_unit[j] + f_g[j + 1]
    f_g[j] = gen_g if gen_g <= value else value
    gen_c = gen_unit[j] + tags + f_g[j + 1]
    f_c[j] = (gen_c if gen_c <= value else value) + overhead


@njit(cache=True)
def line_dp(src_ids, tgt_ids, src_tok, gen_unit, tags, overhead, prefill, t_dir, base, numbers):
    n_src = src_ids.shape[0]
    m = tgt_ids.shape[0]
    # source positions of each line id, ascending (the reference's `positions`)
    n_ids = 0
    for s in range(n_src):
        n_ids = max(n_ids, src_ids[s] + 1)
    starts_of = np.zeros(n_ids + 1, dtype=np.int64)
    for s in range(n_src):
        starts_of[src_ids[s] + 1] += 1
    for k in range(n_ids):
        starts_of[k + 1] += starts_of[k]
    fill = starts_of[:-1].copy()
    positions = np.empty(n_src, dtype=np.int64)
    for s in range(n_src):
        positions[fill[src_ids[s]]] = s
        fill[src_ids[s]] += 1
    f_c = np.zeros(m + 1)
    f_g = np.zeros(m + 1)
    choice_len = np.full(m, -1, dtype=np.int64)
    choice_start = np.zeros(m, dtype=np.int64)
    values_out = np.full(m, np.inf)
    ext_next = np.zeros(n_src + 2, dtype=np.int64)  # ext(s, j + 1), 0 where s was not a match
    ext_cur = np.zeros(n_src + 2, dtype=np.int64)
    touched_next = np.empty(n_src, dtype=np.int64)
    n_touched_next = 0
    for j in range(m - 1, -1, -1):
        line = tgt_ids[j]
        lo = 0
        hi = 0
        if line >= 0 and line < n_ids:
            lo = starts_of[line]
            hi = starts_of[line + 1]
        best = np.inf
        best_s = -1
        best_len = -1
        for k in range(lo, hi):
            s = positions[k]
            run = 1 + ext_next[s + 1]
            ext_cur[s] = run
            for length in range(1, run + 1):
                n_tok = src_tok[s + length] - src_tok[s]
                value = prefill[n_tok] + t_dir * ((base + numbers[s + 1]) + numbers[s + length])
                value = value + f_c[j + length]
                # the first source position attaining the minimum, then its longest length attaining it
                if value < best:
                    best = value
                    best_s = s
                    best_len = length
                elif value == best and s == best_s:
                    best_len = length
        # roll the extension rows: ext_next := ext_cur for this line's positions only
        for k in range(n_touched_next):
            ext_next[touched_next[k]] = 0
        n_touched_next = 0
        for k in range(lo, hi):
            s = positions[k]
            ext_next[s] = ext_cur[s]
            ext_cur[s] = 0
            touched_next[n_touched_next] = s
            n_touched_next += 1
        if best_len > 0:
            choice_len[j] = best_len
            choice_start[j] = best_s
            values_out[j] = best
        close_unit(j, values_out[j], gen_unit, tags, overhead, f_c, f_g)
    return f_c, f_g, choice_len, choice_start, values_out


@njit(cache=True)
def compiled_occurrence_counts(link, length, first_end):
    """`analysis.oracle.optimal`'s `_occurrence_counts` on the compiled automaton's arrays (states by decreasing length)."""
    n = length.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    for state in range(1, n):
        if length[state] == first_end[state] + 1:
            counts[state] = 1
    max_len = 0
    for state in range(n):
        max_len = max(max_len, length[state])
    by_len = np.zeros(max_len + 2, dtype=np.int64)
    for state in range(n):
        by_len[length[state] + 1] += 1
    for k in range(max_len + 1):
        by_len[k + 1] += by_len[k]
    order = np.empty(n, dtype=np.int64)
    for state in range(n):
        order[by_len[length[state]]] = state
        by_len[length[state]] += 1
    for k in range(n - 1, -1, -1):
        state = order[k]
        if link[state] >= 0:
            counts[link[state]] += counts[state]
    return counts


@njit(cache=True)
def compiled_longest_prefix_matches(match_len, n):
    """M(j) = longest L with target[j:j+L] in the source, from the suffix matching statistics:
    target[j:e] occurs iff left(e) = e - match_len[e-1] <= j, and left never decreases (the reference
    DP in analysis.oracle.optimal uses it too)."""
    longest = np.zeros(n + 1, dtype=np.int64)
    e = 0
    for j in range(n):
        e = max(e, j)
        while e < n and (e + 1) - match_len[e] <= j:
            e += 1
        longest[j] = e - j
    return longest


@njit(cache=True)
def token_dp(keys, values, mask, first_end, counts, ids, longest, tgt_ok, gen_unit, tags, overhead, prefill, t_dir,
              base, numbers):
    n = ids.shape[0]
    f_c = np.zeros(n + 1)
    f_g = np.zeros(n + 1)
    choice_len = np.full(n, -1, dtype=np.int64)
    choice_start = np.zeros(n, dtype=np.int64)
    values_out = np.full(n, np.inf)
    starts = np.empty(n + 1, dtype=np.int64)
    for j in range(n - 1, -1, -1):
        m = longest[j]
        if m > 0 and tgt_ok[j]:
            # leftmost start of target[j:j+L] for L = 1..m (the reference's `_leftmost_starts`)
            state = 0
            for k in range(m):
                state = sam_get(keys, values, state, ids[j + k], mask)
                starts[k] = first_end[state] - k
                if counts[state] == 1:
                    for r in range(k + 1, m):
                        starts[r] = starts[k]
                    break
            best = np.inf
            best_k = m - 1
            for k in range(m - 1, -1, -1):  # the longest length among ties
                length = k + 1
                if tgt_ok[j + length]:
                    s = starts[k]
                    value = prefill[length] + t_dir * ((base + numbers[s + 1]) + numbers[s + length])
                    value = value + f_c[j + length]
                else:
                    value = np.inf
                if value < best:
                    best = value
                    best_k = k
            choice_len[j] = best_k + 1
            choice_start[j] = starts[best_k]
            values_out[j] = best
        close_unit(j, values_out[j], gen_unit, tags, overhead, f_c, f_g)
    return f_c, f_g, choice_len, choice_start, values_out
