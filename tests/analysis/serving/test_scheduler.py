"""The vLLM-V1-style scheduler on hand-checkable requests: chunked prefill, decode first, atomic verifies, the
token budget and the closed and open loops."""

import pytest
from fixtures import step_cost_model

from analysis.errors import ParamsError
from analysis.serving.forwards import Trace
from analysis.serving.scheduler import EngineConfig, simulate


def trace(method="ar", prompt=10, new=(1, 1, 1), emitted=(1, 1, 1), case="c"):
    return Trace(case, "corpus", method, prompt, sum(emitted), tuple(new), tuple(emitted))


UNIT = step_cost_model(c0=1.0, c_seq=0.0, c_w=0.0, t_star=1.0, c_kv=0.0, c_a=0.0)  # every step costs 1 s


def test_a_prompt_longer_than_the_budget_is_chunked_and_each_forward_is_a_step():
    run = simulate(EngineConfig(4, 2), UNIT, lambda i: trace(), None, 1, 1, keep_steps=True)
    qs = [s[0] for s in run.log.shapes]
    contexts = [s[1] for s in run.log.shapes]
    assert qs == [(4,), (4,), (2,), (1,), (1,), (1,)]  # 10 prompt tokens in chunks of 4, then 3 decodes
    assert contexts == [(0,), (4,), (8,), (10,), (11,), (12,)]
    r = run.requests[0]
    assert r.first == 4.0 and r.finish == 6.0 and r.emitted == 3


def test_running_requests_go_first_and_a_newcomer_gets_what_is_left_of_the_budget():
    traces = [trace(prompt=2, new=(1,) * 4, emitted=(1,) * 4, case="a"), trace(prompt=5, case="b")]
    run = simulate(EngineConfig(4, 2), UNIT, lambda i: traces[i], [0.0, 1.5], None, 2, keep_steps=True)
    shapes = [s[0] for s in run.log.shapes]
    # a prefills (2), a decodes alone, then b arrives: a's decode first, b's prompt gets 3 of the 4 tokens
    assert shapes[:4] == [(2,), (1,), (1, 3), (1, 2)]


def test_a_verify_forward_is_atomic_and_a_copy_is_split():
    verify = trace("spec", prompt=1, new=(5, 5), emitted=(3, 2))
    copy = trace("copy", prompt=1, new=(5, 5), emitted=(5, 5))
    run = simulate(EngineConfig(4, 1), UNIT, lambda i: copy, None, 1, 1, keep_steps=True)
    assert [s[0] for s in run.log.shapes] == [(1,), (4,), (1,), (4,), (1,)]
    with pytest.raises(ParamsError, match="exceeds serving.engine.max_num_batched_tokens"):
        simulate(EngineConfig(4, 1), UNIT, lambda i: verify, None, 1, 1, atomic_methods=frozenset({"spec"}))
    run = simulate(EngineConfig(8, 1), UNIT, lambda i: verify, None, 1, 1, atomic_methods=frozenset({"spec"}),
                   keep_steps=True)
    assert [s[0] for s in run.log.shapes] == [(1,), (5,), (5,)]
    assert [s[1] for s in run.log.shapes] == [(0,), (1,), (4,)]  # rejected drafts are cropped: 1 + 3 emitted


def test_the_closed_loop_keeps_its_concurrency_and_serves_every_request():
    run = simulate(EngineConfig(64, 8), UNIT, lambda i: trace(case=str(i)), None, 4, 10)
    assert len(run.requests) == 10 and all(r.finish is not None for r in run.requests)
    arrivals = sorted(r.arrival for r in run.requests)
    assert arrivals[:4] == [0.0] * 4  # four at once, the rest as earlier ones finish
    assert run.seqs_scheduled / run.steps > 2.5


def test_step_prices_follow_the_model_and_extrapolation_is_counted():
    model = step_cost_model(c0=0.01, c_seq=0.0, c_w=0.0, t_star=1.0, c_kv=0.001, c_a=0.0)
    run = simulate(EngineConfig(16, 2), model, lambda i: trace(prompt=3, new=(1,), emitted=(1,)), None, 1, 1,
                   keep_steps=True)
    assert [round(s[3], 6) for s in run.log.shapes] == [0.01, 0.013]
    wide = simulate(EngineConfig(2048, 64), step_cost_model(), lambda i: trace(prompt=1500), None, 32, 32)
    assert wide.extrapolated_steps > 0  # prompts of 1,500 tokens in 32 sequences leave the fitted range


@pytest.mark.parametrize("budget, seqs, message", [(4, 8, "below one step's decode tokens"), (0, 1, ">= 1"),
                                                   (8, True, ">= 1")])
def test_bad_engine_limits_are_named(budget, seqs, message):
    with pytest.raises(ParamsError, match=message):
        EngineConfig(budget, seqs).validate()


def test_concurrency_zero_and_an_ambiguous_workload_are_refused():
    with pytest.raises(ParamsError, match="concurrency must be >= 1"):
        simulate(EngineConfig(8, 2), UNIT, lambda i: trace(), None, 0, 1)
    with pytest.raises(ParamsError, match="either arrival times"):
        simulate(EngineConfig(8, 2), UNIT, lambda i: trace(), [0.0], 1, 1)
