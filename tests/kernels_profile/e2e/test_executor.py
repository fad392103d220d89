import pytest

torch = pytest.importorskip("torch")

from analysis.errors import ParamsError, ProgramError  # noqa: E402
from analysis.grammar.program import Copy, Gen, Program, escape, render_op  # noqa: E402
from kernels_profile.measure.equivalence import rel_diff  # noqa: E402
from kernels_profile.runtime.hf import numbered  # noqa: E402
from analysis.rivals.families.pld import PromptLookup  # noqa: E402
from analysis.rivals.families.suffix import SuffixDecoder  # noqa: E402
from kernels_profile.e2e.executor import Executor, Run, acceptance_histogram, program_segments  # noqa: E402
from kernels_profile.runtime.models import build_model  # noqa: E402

SOURCE = "alpha\nbeta\ngamma\n"


def encode(text):  # a toy tokenizer: one id per byte, within the tiny model's vocabulary
    return [b for b in text.encode()]


@pytest.fixture(scope="module")
def executor():
    lm = build_model("tiny-qwen2", "random", "float32", "cpu")
    # the program prompt: the source's lines numbered
    return Executor(lm, encode("edit this:\n" + numbered(SOURCE)))


@pytest.fixture(scope="module")
def rewriter(executor):
    """The rewrite prompt (unnumbered source), what AR and a drafter are given."""
    return Executor(executor.lm, encode("rewrite this:\n" + SOURCE))


def pld(executor, k, ngram_max=3, policy="latest"):
    return PromptLookup(executor.prompt_ids, policy=policy, max_ngram=ngram_max)


def lookup_draft(context, k, ngram_max, policy):
    return PromptLookup(context, policy=policy, max_ngram=ngram_max).draft(k)


def test_segments_spell_the_resolved_output():
    program = Program((Copy(1, 2), Gen("BETA\n"), Copy(3, 3)))
    segments = program_segments(program, SOURCE, None, encode)
    assert [s.kind for s in segments] == ["copy", "gen", "copy"]
    assert bytes(t for s in segments for t in s.ids).decode() == "alpha\nbeta\nBETA\ngamma\n"
    with pytest.raises(ProgramError, match="out of range"):
        program_segments(Program((Copy(2, 7),)), SOURCE, None, encode)


def test_executor_is_lossless_and_uses_fewer_forwards(executor):
    segments = program_segments(Program((Copy(1, 2), Gen("X\n"), Copy(3, 3))), SOURCE, None, encode)
    run, cad_logits = executor.copy_as_decode(segments)
    sequence = [t for s in segments for t in s.ids]
    ar_run, ar_logits = executor.autoregressive(sequence)
    assert run.forwards == 2 + 2 and ar_run.forwards == len(sequence) == run.tokens
    assert rel_diff(cad_logits, ar_logits) < 1e-4
    assert executor.cache.get_seq_length() == len(executor.prompt_ids) + len(sequence)


def test_speculative_decoding_covers_every_gold_token_and_logs_its_forwards(rewriter):
    gold = encode("alpha\nbeta\nBETA\ngamma\n")
    run = rewriter.speculative(gold, pld(rewriter, 8), 8)
    assert run.tokens == len(gold) and 1 <= run.forwards < len(gold)
    # every gold token ended in the cache exactly once
    assert rewriter.cache.get_seq_length() == len(rewriter.prompt_ids) + len(gold)
    # the log: q = pending + draft, emitted = accepted + 1, so the context before forward i is prompt + sum(emitted[:i])
    assert len(run.new_tokens) == len(run.emitted) == run.forwards == len(run.accepted)
    assert list(run.emitted) == [a + 1 for a in run.accepted] and sum(run.emitted) == len(gold)
    assert all(q >= e for q, e in zip(run.new_tokens, run.emitted)) and run.draft_seconds >= 0


def test_the_logs_of_ar_and_a_program_say_what_the_cache_holds(executor):
    segments = program_segments(Program((Copy(1, 2), Gen("X\n"), Copy(3, 3))), SOURCE, None, encode)
    ar, _ = executor.autoregressive([1, 2, 3])
    assert ar.new_tokens == ar.emitted == (1, 1, 1)
    ideal, _ = executor.copy_as_decode(segments)
    assert ideal.new_tokens == (len(segments[0].ids), 1, 1, len(segments[2].ids)) == ideal.emitted
    decoded, _ = executor.copy_as_decode(segments, directives=True)
    assert sum(decoded.emitted) == executor.cache.get_seq_length() - len(executor.prompt_ids)
    assert len(decoded.new_tokens) == decoded.forwards


def test_the_prompt_prefill_is_timed_on_a_fresh_cache_and_runs_start_from_it(rewriter):
    before = rewriter.prompt_logits.clone()
    seconds = rewriter.time_prompt()
    assert seconds > 0 and rewriter.cache.get_seq_length() == len(rewriter.prompt_ids)
    assert rel_diff(before, rewriter.prompt_logits) < 1e-5
    run = rewriter.speculative(encode(SOURCE), pld(rewriter, 10), 10)
    assert rewriter.cache.get_seq_length() == len(rewriter.prompt_ids) + run.tokens


def test_a_drafter_that_overruns_its_cap_is_refused(rewriter):
    class Greedy:
        def extend(self, tokens):
            pass

        def draft(self, k):
            return [1] * (k + 2)

    # the draft is cut to the gold's end first; a longer gold shows the overrun
    with pytest.raises(ValueError, match="for a cap of 2"):
        rewriter.speculative(encode("abcdefgh"), Greedy(), 2)


def test_pld_drafts_from_the_unnumbered_prompt_across_line_ends(rewriter, executor):
    """The output copies two whole lines: drafting from the rewrite prompt (plain source), one forward
    accepts a 10-token draft that runs through a line end. Drafting from the numbered program prompt,
    every draft stops at `\n2: `, so more forwards are needed (review F3, D8)."""
    gold = encode(SOURCE)
    run = rewriter.speculative(gold, pld(rewriter, 10), 10)
    assert run.tokens == len(gold) and len(run.accepted) == run.forwards
    assert max(run.accepted) == 10  # a full draft accepted, crossing "\n" inside it
    assert sum(run.accepted) + run.forwards == len(gold)  # each forward also commits its pending token
    numbered_run = executor.speculative(gold, pld(executor, 10), 10)
    assert max(numbered_run.accepted) < 10 and numbered_run.forwards > run.forwards
    assert run.tokens_per_forward > numbered_run.tokens_per_forward


def test_acceptance_histogram_counts_each_forward_once():
    assert acceptance_histogram((0, 10, 3, 0), 10) == [2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1]
    assert acceptance_histogram((), 2) == [0, 0, 0]
    with pytest.raises(ValueError, match="outside 0..2"):
        acceptance_histogram((3,), 2)
    assert Run(1.0, 4, 10).tokens_per_forward == 2.5 and Run(0.0, 0, 0).tokens_per_forward is None


def test_pld_policies_differ_on_a_crafted_gold(rewriter):
    """Gold repeats a block whose line `ab` has two continuations; from the second repeat on, the
    trailing n-gram `\nab` matches both: latest drafts the nearer (right) one, earliest the first
    (wrong) one, so earliest needs more forwards for the same gold."""
    gold = encode("ab1\ncd2\nab3\ncd4\nab3\ncd4\n")
    context = rewriter.prompt_ids + encode("ab1\ncd2\nab3\ncd4\nab")
    assert bytes(lookup_draft(context, 8, 3, "latest")) == b"3\ncd4\nab"
    assert bytes(lookup_draft(context, 8, 3, "earliest")) == b"1\ncd2\nab"
    forwards = {policy: rewriter.speculative(gold, pld(rewriter, 8, 3, policy), 8).forwards
                for policy in ("latest", "earliest")}
    assert forwards["latest"] < forwards["earliest"] < len(gold)
    assert rewriter.cache.get_seq_length() == len(rewriter.prompt_ids) + len(gold)


def test_segments_carry_their_directive_tokens():
    program = Program((Copy(1, 2), Gen("a <gen> b\n"), Copy(3, 3)))
    segments = program_segments(program, SOURCE, None, encode)
    assert bytes(segments[0].open_ids).decode() == render_op(Copy(1, 2)) == '<copy lines="1-2"/>'
    gen = segments[1]
    assert bytes(gen.open_ids).decode() == "<gen>" and bytes(gen.close_ids).decode() == "</gen>"
    assert bytes(gen.ids).decode() == "a <gen> b\n" and bytes(gen.emitted).decode() == escape("a <gen> b\n")
    # the escape's extra tokens count as directive tokens, as in analysis.coverage.spans
    assert gen.directive_tokens == len("<gen></gen>") + len(escape("a <gen> b\n")) - len("a <gen> b\n")
    assert segments[2].close_ids == () and segments[2].directive_tokens == len('<copy lines="3-3"/>')


def test_overhead_run_decodes_exactly_the_directive_tokens(executor):
    """Audit M1: every directive token is decoded but each copy tag's last token, which rides with the copy's
    prefill (a forward per token the program produces): two copies, two forwards fewer than directive tokens."""
    program = Program((Copy(1, 2), Gen("X\n"), Copy(3, 3)))
    segments = program_segments(program, SOURCE, None, encode)
    ideal, _ = executor.copy_as_decode(segments)
    overhead, _ = executor.copy_as_decode(segments, directives=True)
    directive = sum(s.directive_tokens for s in segments)
    assert directive == len(render_op(Copy(1, 2))) + len("<gen></gen>") + len(render_op(Copy(3, 3)))
    assert overhead.forwards - ideal.forwards == directive - 2
    assert overhead.new_tokens[len(render_op(Copy(1, 2))) - 1] == 1 + len(segments[0].ids)  # `>` with the copy
    assert overhead.tokens == ideal.tokens == sum(len(s.ids) for s in segments)
    # the cache holds the prompt, every directive token and every output token, once each
    assert executor.cache.get_seq_length() == len(executor.prompt_ids) + ideal.tokens + directive


@pytest.mark.slow
def test_measure_case_runs_in_the_interleaved_order_and_summarises(executor, rewriter):
    import polars as pl

    from analysis.rivals.families.suffix import DEFAULTS
    from analysis.rivals.methods import parse_method
    from analysis.rivals.settings import DraftSettings
    from kernels_profile.e2e.methods import losslessness, measure_case
    from kernels_profile.e2e.settings import MethodPlan
    from kernels_profile.e2e.summary import speedup_summary
    from kernels_profile.measure.interleave import interleaved_order

    gold = encode("alpha\nbeta\nBETA\ngamma\n")
    program = Program((Copy(1, 2), Gen("BETA\n"), Copy(3, 3)))
    segments = {"line": program_segments(program, SOURCE, None, encode),
                "token": program_segments(program, SOURCE, None, encode)}
    plan = MethodPlan(tuple(parse_method(n) for n in ("ar", "pld-latest-k8", "pld-earliest-k8", "copy-line-ideal", "copy-token-ideal",
                                                      "copy-line-decoded")), DraftSettings(3, DEFAULTS, ()))
    executors = {"rewrite": rewriter, "program": executor}
    records = measure_case(executors, gold, segments, plan, repeats=3, order_seed="0/tiny/C/1")
    order = interleaved_order(plan.names(), 3, "0/tiny/C/1")
    assert [[r["method"] for r in records if r["repeat"] == k] for k in range(3)] == order
    assert all(order[r["repeat"]][r["order_index"]] == r["method"] for r in records)
    assert all(r["seconds"] > 0 and r["tokens"] == len(gold) and r["prompt_seconds"] > 0 for r in records)
    # each method on its own prompt: AR and PLD on the rewrite prompt, the programs on the numbered one
    prompts = {r["method"]: r["prompt_tokens"] for r in records}
    assert prompts["ar"] == prompts["pld-latest-k8"] == len(rewriter.prompt_ids)
    assert prompts["copy-line-ideal"] == len(executor.prompt_ids) != prompts["ar"]
    check = losslessness(executor, segments["line"], tolerance=1e-4)
    assert check["ok"] and check["logits_rel_diff"] < 1e-4
    frame = pl.DataFrame(records, schema_overrides={"accept_hist": pl.List(pl.Int64)}).with_columns(
        model=pl.lit("tiny"), corpus=pl.lit("C"), case_id=pl.lit("C/1"), gold_tokens=pl.lit(len(gold)),
        predicted_seconds=pl.lit(None, dtype=pl.Float64), predicted_ar_seconds=pl.lit(None, dtype=pl.Float64),
        predicted=pl.lit(None, dtype=pl.Float64), extrapolated_spans=pl.lit(0), lossless_ok=pl.lit(True))
    summary = speedup_summary(frame)
    ar = summary.filter(pl.col("method") == "ar").row(0, named=True)
    assert ar["speedup_total"] == pytest.approx(1.0)
    line = summary.filter(pl.col("method") == "copy-line-ideal").row(0, named=True)
    assert line["forwards"] < ar["forwards"] and line["pairs"] == 3


def test_a_model_whose_vocabulary_is_smaller_than_its_tokenizer_is_refused(executor):
    from kernels_profile.runtime.models import ModelError, check_vocabulary, load_hf_tokenizer

    with pytest.raises(ModelError, match="tiny-qwen2: its vocabulary .* smaller than its tokenizer"):
        check_vocabulary(executor.lm, load_hf_tokenizer("tiny-qwen2"))


def test_suffix_decoding_drafts_across_line_ends_and_covers_the_gold(rewriter):
    """The suffix tree over the rewrite prompt: copying two whole lines takes few forwards, each draft at
    most as long as its match (max_spec_factor 1.0), every gold token committed once."""
    gold = encode(SOURCE)
    run = rewriter.speculative(gold, SuffixDecoder(rewriter.prompt_ids), 64)
    assert run.tokens == len(gold) and sum(run.emitted) == len(gold) and run.forwards < len(gold) / 2
    assert rewriter.cache.get_seq_length() == len(rewriter.prompt_ids) + len(gold)


def test_pld_verification_keeps_a_logit_per_verified_position(executor, monkeypatch):
    """A real verifier compares the model's argmax at every draft position: the forward must compute
    len(draft) + 1 logits, not 1 (which under-costed PLD)."""
    calls = []
    forward = executor._forward

    def recording(ids, **kwargs):
        calls.append((len(ids), kwargs.get("logits_to_keep")))
        return forward(ids, **kwargs)

    monkeypatch.setattr(executor, "_forward", recording)
    run = executor.speculative(encode(SOURCE), pld(executor, 10), 10)
    assert len(calls) == run.forwards and any(n > 1 for n, _ in calls)
    assert all(keep == n for n, keep in calls)
