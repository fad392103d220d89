"""The engine driver's raw files read as data: checked field by field, turned into per-request records and a
results JSON shaped like `vllm bench serve --save-result` (analysis.engine.records)."""

from __future__ import annotations

import json

import pytest

from analysis.engine.records import (REQUEST_FIELDS, RunKey, check_raw_request, check_request_record, check_steps,
                                     drafts_of, read_json, request_record, run_result, same_output)
from analysis.engine.requests import EngineRunError

REQUEST = {"rid": "r0", "case_id": "c0", "corpus": "A", "length": "short"}
GOLD = {"ids": [5, 6, 7, 8, 9], "text": "abcde", "ended": True, "end_id": 2}


def raw(**changes) -> dict:
    base = {"key": "run/0", "rid": "r0", "arrival": 1.0, "finish": 3.0,
            "deliveries": [[1.5, 1, 0], [2.0, 3, 1], [3.0, 2, 2]], "output_ids": [5, 6, 7, 8, 9, 2], "text": "abcde",
            "stages": [{"prompt_tokens": 40, "cached_tokens": 0, "output_tokens": 6, "finish_reason": "stop"}]}
    return {**base, **changes}


STEPS = [{"t": 0.0, "s": 0.5, "rows": [["run/0", 40, 0, 0]]},
         {"t": 1.5, "s": 0.5, "rows": [["run/0", 4, 41, 3], ["other", 1, 9, 0]]},
         {"t": 2.0, "s": 1.0, "rows": [["run/0", 3, 44, 2]]}]


def test_a_request_record_holds_vllm_bench_s_per_request_figures():
    rec = request_record(RunKey("ngram-k5-c1-r0", "ngram-k5", 1, 0), "spec", check_raw_request(raw(), "x", ["r0"]),
                         REQUEST, GOLD, None, check_steps({"steps": STEPS}, "steps"))
    assert set(rec) == set(REQUEST_FIELDS)
    assert rec["ttft_s"] == pytest.approx(0.5) and rec["e2e_s"] == pytest.approx(2.0)
    assert rec["tpot_s"] == pytest.approx(1.5 / 4)          # (e2e - ttft) over the gold tokens after the first
    assert rec["itl_s"] == [0.5, 1.0]
    assert (rec["drafted_tokens"], rec["accepted_tokens"]) == (5, 3)  # 3 drafted, 2 of them taken; then 2 drafted, 1 taken
    assert rec["same_text"] and rec["gold_tokens"] == 5 and rec["output_tokens"] == 6
    assert check_request_record(rec, "line 1") is rec


def test_a_different_output_is_not_the_same_text():
    assert not same_output("ar", raw(output_ids=[5, 6, 7, 8, 1, 2]), GOLD, None)
    plan = {"chain": [{"append_ids": [], "forced_ids": [5, 6]}, {"append_ids": [1, 1], "forced_ids": [7, 2]}]}
    stages = [{"prompt_tokens": 3, "cached_tokens": 0, "output_tokens": 2},
              {"prompt_tokens": 7, "cached_tokens": 0, "output_tokens": 2}]
    assert same_output("copy", raw(output_ids=[5, 6, 7, 2], stages=stages), GOLD, plan)
    assert not same_output("copy", raw(output_ids=[5, 6, 7, 3], stages=stages), GOLD, plan)


@pytest.mark.parametrize("changes, expect", [
    ({"rid": "r9"}, "not one of the run's requests"),
    ({"finish": None}, "never finished"),
    ({"finish": 0.5}, "finish: expected a finite number >= 1"),
    ({"deliveries": []}, "delivered no token"),
    ({"deliveries": [[2.0, 1, 0], [1.8, 1, 1]]}, "deliveries[1].time"),
    ({"deliveries": [[1.5, -1, 0]]}, "deliveries[0].tokens"),
    ({"deliveries": [[9.0, 1, 0]]}, "after the request's finish"),
    ({"output_ids": [1, "x"]}, "output_ids[1]"),
    ({"stages": [{"prompt_tokens": 1}]}, "stages[0].cached_tokens"),
    ({"arrival": float("nan")}, "arrival: expected a finite number"),
])
def test_a_bad_driver_record_is_a_named_error(changes, expect):
    with pytest.raises(EngineRunError, match="x") as info:
        check_raw_request(raw(**changes), "x", ["r0"])
    assert expect in str(info.value)


def test_a_bad_step_log_and_an_oversized_or_broken_file_are_named_errors(tmp_path):
    with pytest.raises(EngineRunError, match=r"rows\[0\]: a scheduled request with no new token"):
        check_steps({"steps": [{"t": 0, "s": 1, "rows": [["k", 0, 1, 0]]}]}, "s")
    with pytest.raises(EngineRunError, match="expected \\[key, q, context, drafts\\]"):
        check_steps({"steps": [{"t": 0, "s": 1, "rows": [[1, 1, 1]]}]}, "s")
    (tmp_path / "a.json").write_text("[1, 2]")
    with pytest.raises(EngineRunError, match="a JSON object"):
        read_json(tmp_path / "a.json", "x")
    (tmp_path / "b.json").write_text("{")
    with pytest.raises(EngineRunError, match="not a readable x"):
        read_json(tmp_path / "b.json", "x")


def test_drafts_count_only_the_steps_that_drafted_for_the_request():
    assert drafts_of(raw(), STEPS) == (5, 3)
    assert drafts_of(raw(key="nobody"), STEPS) == (0, 0)


def test_the_results_json_is_shaped_like_vllm_bench_serve_save_result():
    steps = check_steps({"steps": STEPS}, "steps")
    key = RunKey("ar-c4-r1", "ar", 4, 1)
    recs = [request_record(key, "ar", check_raw_request(raw(arrival=a, finish=a + 2,
                                                            deliveries=[[a + 0.5, 1, 0], [a + 2, 5, 1]]), "x", ["r0"]),
                           REQUEST, GOLD, None, steps) for a in (0.0, 1.0, 2.0)]
    result = run_result(key, recs, {"engine_version": "0.0"})
    assert result["max_concurrency"] == 4 and result["completed"] == 3 and result["duration"] == pytest.approx(4.0)
    assert result["output_throughput"] == pytest.approx(15 / 4.0)  # gold tokens over the makespan
    for name in ("ttft", "tpot", "itl", "e2el"):
        assert {f"mean_{name}_ms", f"median_{name}_ms", f"p50_{name}_ms", f"p90_{name}_ms", f"p99_{name}_ms"} <= set(result)
    assert result["p50_ttft_ms"] == pytest.approx(500.0) and result["engine_version"] == "0.0"
    json.dumps(result)  # plain data
    with pytest.raises(EngineRunError, match="no request records"):
        run_result(key, [], {})
