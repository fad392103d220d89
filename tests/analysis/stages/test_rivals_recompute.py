"""An independent recomputation of one pooled figure per new rival family (issue 46 section 3): each drafter written
again here from its engine's rule, by brute force (no index, no automaton), run with gold acceptance and priced
under the paper's kernel curve by its formula, over the scratch pipeline's cases; compared with the `rivals` stage's
table (pooled over every corpus). Nothing here calls analysis.rivals but the copy program's forwards, which the
hybrid's recomputation reads as data (which gold tokens its gen spans hold).

The gold-acceptance rule written here is what a deployment's drafter sees: a draft comes from the context alone (the
source and the output so far), up to the budget k (unbounded: to the drafter's own end), never cut to the gold tokens
still to come; the verify forwards the whole draft and accepts at most the gold tokens still to come less one (the last
is a corrected token), and an empty draft is a plain decode step. A prefill past the paper curve's last point (N = 512)
costs no less than its segment from N = 8 continued at its marginal cost per token (params bounds.prefill_past_n,
marginal; the paper's curve has no device floor)."""

import math
import shutil

import polars as pl
import pytest
from fixtures import ROOT

from analysis.cli import main
from analysis.pipeline.config import tokenizer_spec
from analysis.pipeline.params import load_params
from analysis.text.tokens import load_tokenizer

PAPER = (8, 6.8), (512, 303.0)  # paper_claims.json's kernel points: speedup(N) on a log-log line


def paper_prefill(q: int) -> float:
    (n0, s0), (n1, s1) = PAPER
    curve = q / (s0 * (q / n0) ** (math.log(s1 / s0) / math.log(n1 / n0)))
    if q <= n1:
        return curve
    top, bottom = n1 / s1, n0 / s0
    return max(curve, top + (q - n1) * (top - bottom) / (n1 - n0))


def price(forwards: list[tuple[int, bool]]) -> float:
    """Under the paper source a decode step costs 1 (no first-step overhead) and a prefill-type forward T(q)."""
    return sum(paper_prefill(q) if prefill else 1.0 for q, prefill in forwards)


def accept(draft_of, source: list[int], gold: list[int], k: int | None) -> list[tuple[int, bool]]:
    """Gold acceptance with `draft_of(context, budget)`: (q, prefill) per forward."""
    out, pos = [], 0
    while pos < len(gold):
        context = source + gold[:pos]
        draft = draft_of(context, len(context) if k is None else k)
        room = len(gold) - pos - 1
        n = 0
        while n < min(len(draft), room) and draft[n] == gold[pos + n]:
            n += 1
        out.append((len(draft) + 1, bool(draft)))
        pos += n + 1
    return out


# ---------------------------------------------------------------- each rule, by brute force

def ngram_simple(n: int, m: int):
    def draft(context, budget):
        history = len(context) - 1
        if history <= n + m + 1:
            return []
        pattern = context[-n:]
        for j in range(history - n - 1, -1, -1):  # the latest earlier occurrence (from 0: no template here)
            if context[j:j + n] == pattern:
                copy = min(m, history - (j + n))
                return [] if copy < n else context[j + n:j + n + min(copy, budget)]
        return []
    return draft


def ngram_mod(n: int, n_min: int, n_max: int, source_len: int):
    state = {"pool": {}, "last": 0, "low": 0, "drafted": 0, "seen": source_len}

    def fill(context, begin, end):
        for i in range(begin, end):
            state["pool"][tuple(context[i:i + n])] = context[i + n]
        state["last"] = end

    def draft(context, budget):
        if state["drafted"]:  # the previous verify's acceptance: the output grew by accepted + 1
            accepted = len(context) - state["seen"] - 1
            state["low"] = state["low"] + 1 if accepted / state["drafted"] < 0.5 else 0
            if state["low"] >= 3:
                state.update(pool={}, last=0, low=0)
        state["drafted"], state["seen"] = 0, len(context)
        history = len(context) - 1
        if history < n:
            return []
        if state["last"] + 32 < history:
            fill(context, state["last"], history - n)
        key, out = tuple(context[-n:]), []
        for i in range(n_max):
            if key not in state["pool"]:
                if i < n_min:
                    return []
                break
            out.append(state["pool"][key])
            key = key[1:] + (out[-1],)
        out = out[:budget]
        state["drafted"] = len(out)
        return out

    def start(context):
        if len(context) >= n:
            fill(context, 0, len(context) - n)
        return draft
    return start


def suffix_automaton(context, budget):
    """The longest suffix of the context that ends earlier, at its first such end: the tokens after it."""
    best, at, last = 0, None, len(context) - 1
    for end in range(last):
        length = 0
        while length <= end and context[end - length] == context[last - length]:
            length += 1
        if length > best:
            best, at = length, end
    return [] if at is None else context[at + 1:at + 1 + budget]


def input_draft(source: list[int], resync: int, realign: str):
    state = {"at": 0, "lost": 0, "seen": 0}

    def draft(context, budget):
        output = context[len(source):]
        for token in output[state["seen"]:]:  # walk the new output tokens against the input
            if state["at"] is None:
                continue
            if state["at"] < len(source) and source[state["at"]] == token:
                state["at"] += 1
            else:
                state["lost"], state["at"] = state["at"], None
        state["seen"] = len(output)
        if state["at"] is None and len(output) >= resync:
            tail = output[-resync:]
            found = [j for j in range(len(source) - resync + 1) if source[j:j + resync] == tail]
            ahead = [j for j in found if j >= state["lost"]]
            if ahead or (found and realign == "anywhere"):
                state["at"] = (ahead[0] if ahead else found[-1]) + resync
        return [] if state["at"] is None else source[state["at"]:state["at"] + budget]
    return draft


def prompt_lookup(context, budget):
    """transformers' earliest match, 2-gram then 1-gram, up to the context's end."""
    for n in (2, 1):
        if len(context) - 1 < n:
            continue
        pattern = context[-n:]
        for start in range(len(context) - n):
            if context[start:start + n] == pattern:
                return context[start + n:start + n + budget]
    return []


def hybrid(program: list[tuple[int, int, bool]], source: list[int], gold: list[int], k: int):
    """The copy program's forwards (q, emitted, prefill) with each run of gen decode steps drafted instead."""
    out, produced, i = [], 0, 0
    while i < len(program):
        q, emitted, prefill = program[i]
        if prefill or emitted != 1:
            out.append((q, prefill))
            produced, i = produced + emitted, i + 1
            continue
        n = 0
        while i + n < len(program) and program[i + n][1] == 1 and not program[i + n][2]:
            n += 1
        span = gold[produced:produced + n]
        out += accept(lambda ctx, budget: prompt_lookup(source + gold[:produced] + ctx[len(source):], budget),
                      source, span, k)
        produced, i = produced + n, i + n
    return out


# ---------------------------------------------------------------- the stage's figure, and this one


@pytest.mark.slow
def test_each_new_family_s_pooled_speedup_is_recomputed_independently(stage_scratch):
    (stage_scratch / "reports/kernels").mkdir(parents=True)
    shutil.copy(ROOT / "reports/kernels/latency_model.json", stage_scratch / "reports/kernels/latency_model.json")
    assert main(["--set", 'rivals.kernel_sources=["paper"]', "--set", "rivals.estimates=[]",
                 "--set", "rivals.judged_source=paper", "--set", "rivals.pld.k=[10]",
                 "--set", "rivals.bootstrap_resamples=50", "rivals"]) == 0
    table = pl.read_csv(stage_scratch / "reports/tables/rivals.csv").filter(pl.col("pool") == "all")
    forwards = pl.read_parquet(stage_scratch / "data/rivals/forwards.parquet")
    params = load_params(stage_scratch / "params.yaml")
    tokenizer = load_tokenizer(tokenizer_spec(params))
    ids = sorted(set(forwards["case_id"]))
    cases = (pl.read_parquet(stage_scratch / "data/corpora/cases.parquet").filter(pl.col("case_id").is_in(ids))
             .filter(pl.col("framing") == params["rivals"]["framing"]))
    assert 3 <= cases.height == len(ids)
    r = params["rivals"]
    programs = {row["case_id"]: list(zip(row["new_tokens"], row["emitted"], row["prefill"]))
                for row in forwards.filter(pl.col("method") == "copy-line-decoded").iter_rows(named=True)}
    totals: dict[str, list[float]] = {}
    for row in cases.iter_rows(named=True):
        source, gold = tokenizer.encode(row["source"]).ids, tokenizer.encode(row["target"]).ids
        ours = {
            f"ngram-simple-k{r['ngram_simple']['k'][0]}": accept(
                ngram_simple(r["ngram_simple"]["size_n"], r["ngram_simple"]["k"][0]), source, gold,
                r["ngram_simple"]["k"][0]),
            f"ngram-mod-k{r['ngram_mod']['k'][0]}": accept(
                ngram_mod(r["ngram_mod"]["n_match"], r["ngram_mod"]["n_min"], r["ngram_mod"]["k"][0], len(source))(source),
                source, gold, r["ngram_mod"]["k"][0]),
            f"sa-k{r['sa']['k'][0]}": accept(suffix_automaton, source, gold, r["sa"]["k"][0]),
            f"input-k{r['input']['k'][0]}": accept(input_draft(source, r["input"]["resync_ngram"], r["input"]["realign"]), source, gold,
                                                   r["input"]["k"][0]),
            "input-kinf": accept(input_draft(source, r["input"]["resync_ngram"], r["input"]["realign"]), source, gold, None),
            f"copy-pld-line-decoded-k{r['copy_pld']['k'][0]}": hybrid(programs[row["case_id"]], source, gold,
                                                                      r["copy_pld"]["k"][0]),
        }
        for method, log in ours.items():
            ar, own = totals.setdefault(method, [0.0, 0.0]), price(log)
            ar[0] += len(gold)
            ar[1] += own
    for method, (ar, own) in totals.items():
        stage = table.filter(pl.col("method") == method)
        assert stage.height == 1, method
        assert stage["speedup"][0] == pytest.approx(ar / own, rel=1e-9), method
