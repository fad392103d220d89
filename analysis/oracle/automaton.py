"""Suffix automata of token sequences: the plain-Python reference and the compiled (numba) one.

`SuffixAutomaton.build(seq)` is the textbook online construction (states, suffix links, lengths, and
one end position per state); `matching_statistics(seq)` gives, for each prefix of another sequence,
its longest suffix that occurs in the automaton's sequence. `CompiledAutomaton` is the same automaton
(same states and numbers, in the same creation order) built and queried in compiled code; the token
oracle (analysis.oracle.covmax) and the cost-optimal token DP (analysis.oracle.optimal, analysis.oracle.optimal_dp) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


# ---------------------------------------------------------------- the reference (plain Python)

@dataclass
class SuffixAutomaton:
    """Suffix automaton of a token sequence; `first_end[s]` is an end position of state s's strings."""

    next: list[dict[int, int]]
    link: list[int]
    length: list[int]
    first_end: list[int]

    @classmethod
    def build(cls, seq) -> SuffixAutomaton:
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


# ---------------------------------------------------------------- compiled suffix automaton (numba)
#
# The same automaton as `SuffixAutomaton` (same states, links, lengths and first end positions, in
# the same creation order), built in compiled code with flat arrays: transitions live in one
# open-addressing hash table keyed by (state, token), and each state's outgoing tokens in a linked
# list (a clone copies them). `SuffixAutomaton` stays as the readable reference; the tests compare
# the two on random sequences.


@njit(cache=True)
def _hash_slot(keys, state, token, mask):
    key = state * np.int64(4294967296) + token
    h = (np.uint64(key) * np.uint64(11400714819323198485)) >> np.uint64(20)
    slot = np.int64(h & np.uint64(mask))
    while keys[slot] != -1 and keys[slot] != key:
        slot = (slot + 1) & mask
    return slot, key


@njit(cache=True)
def sam_get(keys, values, state, token, mask):
    """The compiled automaton's transition from `state` on `token` (-1: none); public because the
    cost-optimal token DP (analysis.oracle.optimal_dp) walks the same automaton."""
    slot, key = _hash_slot(keys, state, token, mask)
    if keys[slot] == key:
        return values[slot]
    return -1


@njit(cache=True)
def _sam_build(seq):
    n = seq.shape[0]
    n_states = 2 * n + 2
    cap = 16
    while cap < 4 * (3 * n + 8):
        cap *= 2
    mask = cap - 1
    keys = np.full(cap, -1, dtype=np.int64)
    values = np.full(cap, -1, dtype=np.int64)
    link = np.full(n_states, -1, dtype=np.int64)
    length = np.zeros(n_states, dtype=np.int64)
    first_end = np.full(n_states, -1, dtype=np.int64)
    head = np.full(n_states, -1, dtype=np.int64)       # first outgoing edge of a state
    edge_token = np.empty(3 * n + 8, dtype=np.int64)
    edge_next = np.empty(3 * n + 8, dtype=np.int64)
    n_edges = 0
    size = 1
    last = 0
    for pos in range(n):
        c = seq[pos]
        cur = size
        size += 1
        length[cur] = length[last] + 1
        link[cur] = 0
        first_end[cur] = pos
        p = last
        while p != -1:
            slot, key = _hash_slot(keys, p, c, mask)
            if keys[slot] == key:
                break
            keys[slot] = key
            values[slot] = cur
            edge_token[n_edges] = c
            edge_next[n_edges] = head[p]
            head[p] = n_edges
            n_edges += 1
            p = link[p]
        if p != -1:
            q = sam_get(keys, values, p, c, mask)
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = size
                size += 1
                e = head[q]
                while e != -1:
                    t = edge_token[e]
                    slot, key = _hash_slot(keys, clone, t, mask)
                    keys[slot] = key
                    values[slot] = sam_get(keys, values, q, t, mask)
                    edge_token[n_edges] = t
                    edge_next[n_edges] = head[clone]
                    head[clone] = n_edges
                    n_edges += 1
                    e = edge_next[e]
                length[clone] = length[p] + 1
                link[clone] = link[q]
                first_end[clone] = first_end[q]
                while p != -1:
                    slot, key = _hash_slot(keys, p, c, mask)
                    if keys[slot] != key or values[slot] != q:
                        break
                    values[slot] = clone
                    p = link[p]
                link[q] = clone
                link[cur] = clone
        last = cur
    return keys, values, mask, link[:size].copy(), length[:size].copy(), first_end[:size].copy()


@njit(cache=True)
def _sam_matching_statistics(keys, values, mask, link, length, seq):
    n = seq.shape[0]
    lengths = np.zeros(n, dtype=np.int64)
    states = np.zeros(n, dtype=np.int64)
    state = 0
    cur_len = 0
    for i in range(n):
        c = seq[i]
        nxt = sam_get(keys, values, state, c, mask)
        while state != 0 and nxt == -1:
            state = link[state]
            cur_len = length[state]
            nxt = sam_get(keys, values, state, c, mask)
        if nxt != -1:
            state = nxt
            cur_len += 1
        else:
            state = 0
            cur_len = 0
        lengths[i] = cur_len
        states[i] = state
    return lengths, states


@dataclass
class CompiledAutomaton:
    """`SuffixAutomaton` as flat arrays, built and queried in compiled code (same states and numbers)."""

    keys: np.ndarray
    values: np.ndarray
    mask: int
    link: np.ndarray
    length: np.ndarray
    first_end: np.ndarray

    @classmethod
    def build(cls, seq) -> CompiledAutomaton:
        return cls(*_sam_build(_as_ids(seq)))

    def transition(self, state: int, token: int) -> int:
        """The state reached from `state` by `token`, or -1."""
        return int(sam_get(self.keys, self.values, state, token, self.mask))

    def matching_statistics(self, seq) -> tuple[np.ndarray, np.ndarray]:
        """As `SuffixAutomaton.matching_statistics`, as int64 arrays."""
        return _sam_matching_statistics(self.keys, self.values, self.mask, self.link, self.length, _as_ids(seq))


def _as_ids(seq) -> np.ndarray:
    return np.asarray(seq, dtype=np.int64).reshape(-1)
