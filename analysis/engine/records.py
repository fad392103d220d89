"""The engine run's records: the driver's raw files read as data and checked, each request's record, and each
run's results JSON (the shape of `vllm bench serve --save-result`).

The driver (kernels_profile/engine/driver.py) writes per run `<run_id>.requests.json` and `<run_id>.steps.json`.
They are data from another process: every field is checked for its type and range before use, a file over
MAX_FILE_BYTES is refused before it is parsed, and every refusal names the file, the record and the field.

A request's record (REQUEST_FIELDS, one JSON line per request and run):
* `prompt_tokens` (the first engine request's prompt), `output_tokens` (the tokens this method's engine requests
  generated: for Copy-as-Decode the program tokens it decoded), `gold_tokens` (the engine's own greedy output:
  the same count for every method, the unit of TPOT and throughput), `engine_requests`, `prefilled_tokens`
  (prompt tokens the engine computed: not served from the prefix cache), `cached_tokens`;
* times in seconds from the run's start: `ttft_s` (arrival to the first token delivered), `e2e_s` (arrival to
  the last), `tpot_s` ((e2e - ttft) / (gold_tokens - 1)), `itl_s` (the gaps between successive deliveries);
* `drafted_tokens` and `accepted_tokens` (speculative methods: the draft tokens the scheduler scheduled for the
  request, and those its verify accepted: tokens delivered by that step less one);
* `same_text`: the method produced exactly the gold (AR and prompt lookup: the same token ids; Copy-as-Decode:
  each engine request produced exactly the program tokens forced on it, whose program resolves to the gold).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analysis.engine.requests import EngineRunError

MAX_FILE_BYTES = 256 * 1024 * 1024  # a driver file larger than this is refused before it is parsed
PERCENTILES = (50, 90, 99)
REQUEST_FIELDS = ("run_id", "method", "concurrency", "repeat", "rid", "case_id", "corpus", "length", "prompt_tokens",
                  "output_tokens", "gold_tokens", "engine_requests", "prefilled_tokens", "cached_tokens", "arrival_s",
                  "ttft_s", "e2e_s", "tpot_s", "itl_s", "drafted_tokens", "accepted_tokens", "same_text")
RESULT_SCHEMA = "copydecode.engine_result/1"


@dataclass(frozen=True)
class RunKey:
    run_id: str
    method: str
    concurrency: int
    repeat: int


def read_json(path: Path, what: str) -> dict:
    path = Path(path)
    if not path.is_file():
        raise EngineRunError(f"{path}: no {what}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise EngineRunError(f"{path}: {path.stat().st_size} bytes, over the {MAX_FILE_BYTES}-byte limit of a {what}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineRunError(f"{path}: not a readable {what} ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise EngineRunError(f"{path}: a {what} is a JSON object, got {type(data).__name__}")
    return data


def _number(value: object, where: str, lo: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < lo:
        raise EngineRunError(f"{where}: expected a finite number >= {lo:g}, got {value!r}")
    return float(value)


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EngineRunError(f"{where}: expected a non-negative integer, got {value!r}")
    return value


def _list(value: object, where: str) -> list:
    if not isinstance(value, list):
        raise EngineRunError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def check_raw_request(raw: object, where: str, rids: Sequence[str]) -> dict:
    """One driver record, checked (the module docstring): a dict with the fields the records are built from."""
    if not isinstance(raw, dict):
        raise EngineRunError(f"{where}: a request record is an object, got {type(raw).__name__}")
    if raw.get("rid") not in rids:
        raise EngineRunError(f"{where}: request {raw.get('rid')!r} is not one of the run's requests")
    arrival = _number(raw.get("arrival"), f"{where}.arrival")
    if raw.get("finish") is None:
        raise EngineRunError(f"{where}: request {raw['rid']} never finished")
    finish = _number(raw.get("finish"), f"{where}.finish", arrival)
    deliveries = _list(raw.get("deliveries"), f"{where}.deliveries")
    if not deliveries:
        raise EngineRunError(f"{where}: request {raw['rid']} delivered no token")
    last = arrival
    for i, d in enumerate(deliveries):
        if not isinstance(d, list) or len(d) != 3:
            raise EngineRunError(f"{where}.deliveries[{i}]: expected [time, tokens, step], got {d!r}")
        last = _number(d[0], f"{where}.deliveries[{i}].time", last)
        _count(d[1], f"{where}.deliveries[{i}].tokens")
        _count(d[2], f"{where}.deliveries[{i}].step")
    if last > finish + 1e-6:
        raise EngineRunError(f"{where}: a delivery at {last} s is after the request's finish {finish} s")
    for i, t in enumerate(_list(raw.get("output_ids"), f"{where}.output_ids")):
        _count(t, f"{where}.output_ids[{i}]")
    stages = _list(raw.get("stages"), f"{where}.stages")
    if not stages:
        raise EngineRunError(f"{where}: no engine request")
    for i, s in enumerate(stages):
        if not isinstance(s, dict):
            raise EngineRunError(f"{where}.stages[{i}]: expected an object")
        for name in ("prompt_tokens", "cached_tokens", "output_tokens"):
            _count(s.get(name), f"{where}.stages[{i}].{name}")
    if not isinstance(raw.get("text", ""), str):
        raise EngineRunError(f"{where}.text: expected a string")
    return raw


def check_steps(data: dict, where: str) -> list[dict]:
    """The driver's step log, checked: per step its start, seconds and rows [request key, q, context, drafts]."""
    steps = _list(data.get("steps"), f"{where}.steps")
    for i, st in enumerate(steps):
        if not isinstance(st, dict):
            raise EngineRunError(f"{where}.steps[{i}]: expected an object")
        _number(st.get("t"), f"{where}.steps[{i}].t")
        _number(st.get("s"), f"{where}.steps[{i}].s")
        rows = st.get("rows")
        if rows is None:
            continue
        for j, row in enumerate(_list(rows, f"{where}.steps[{i}].rows")):
            if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)):
                raise EngineRunError(f"{where}.steps[{i}].rows[{j}]: expected [key, q, context, drafts], got {row!r}")
            if _count(row[1], f"{where}.steps[{i}].rows[{j}].q") < 1:
                raise EngineRunError(f"{where}.steps[{i}].rows[{j}]: a scheduled request with no new token")
            _count(row[2], f"{where}.steps[{i}].rows[{j}].context")
            _count(row[3], f"{where}.steps[{i}].rows[{j}].drafts")
    return steps


def drafts_of(raw: dict, steps: list[dict]) -> tuple[int, int]:
    """(drafted, accepted) tokens of one request: its rows' draft counts, and per step that drafted for it the
    tokens that step delivered less the one every forward yields."""
    drafted_at = {}
    for i, st in enumerate(steps):
        for key, _q, _c, d in st.get("rows") or ():
            if key == raw["key"] and d:
                drafted_at[i] = drafted_at.get(i, 0) + d
    accepted = sum(min(n - 1, drafted_at[step]) for _t, n, step in raw["deliveries"] if step in drafted_at and n > 1)
    return sum(drafted_at.values()), accepted


def same_output(kind: str, raw: dict, gold: Mapping, plan: Mapping | None) -> bool:
    """Whether the request produced exactly the gold (the module docstring)."""
    if kind == "copy":
        forced = [t for stage in plan["chain"] for t in stage["forced_ids"]]
        produced = [s["output_tokens"] for s in raw["stages"]]
        return raw["output_ids"] == forced and produced == [len(s["forced_ids"]) for s in plan["chain"]]
    return raw["output_ids"] == list(gold["ids"]) + ([gold["end_id"]] if gold.get("ended") else [])


def request_record(key: RunKey, kind: str, raw: dict, request: Mapping, gold: Mapping, plan: Mapping | None,
                   steps: list[dict]) -> dict:
    """One request's record (REQUEST_FIELDS) from its checked raw record."""
    times = [d[0] for d in raw["deliveries"]]
    arrival = raw["arrival"]
    ttft, e2e = times[0] - arrival, raw["finish"] - arrival
    n_gold = len(gold["ids"])
    drafted, accepted = drafts_of(raw, steps)
    stages = raw["stages"]
    return {"run_id": key.run_id, "method": key.method, "concurrency": key.concurrency, "repeat": key.repeat,
            "rid": raw["rid"], "case_id": request["case_id"], "corpus": request["corpus"], "length": request["length"],
            "prompt_tokens": stages[0]["prompt_tokens"], "output_tokens": len(raw["output_ids"]), "gold_tokens": n_gold,
            "engine_requests": len(stages), "prefilled_tokens": sum(s["prompt_tokens"] - s["cached_tokens"] for s in stages),
            "cached_tokens": sum(s["cached_tokens"] for s in stages), "arrival_s": round(arrival, 6),
            "ttft_s": round(ttft, 6), "e2e_s": round(e2e, 6),
            "tpot_s": round((e2e - ttft) / (n_gold - 1), 6) if n_gold > 1 else None,
            "itl_s": [round(b - a, 4) for a, b in zip(times, times[1:])],
            "drafted_tokens": drafted, "accepted_tokens": accepted, "same_text": same_output(kind, raw, gold, plan)}


def check_request_record(record: object, where: str) -> dict:
    """A per-request record as the frozen run holds it: every REQUEST_FIELDS field, typed."""
    if not isinstance(record, dict):
        raise EngineRunError(f"{where}: a request record is an object")
    missing = [f for f in REQUEST_FIELDS if f not in record]
    if missing:
        raise EngineRunError(f"{where}: missing fields {missing}")
    for name in ("concurrency", "prompt_tokens", "output_tokens", "gold_tokens", "engine_requests", "prefilled_tokens",
                 "cached_tokens", "drafted_tokens", "accepted_tokens", "repeat"):
        _count(record[name], f"{where}.{name}")
    if record["concurrency"] < 1 or record["gold_tokens"] < 1:
        raise EngineRunError(f"{where}: concurrency and gold_tokens must be >= 1")
    for name in ("arrival_s", "ttft_s", "e2e_s"):
        _number(record[name], f"{where}.{name}")
    if record["tpot_s"] is not None:
        _number(record["tpot_s"], f"{where}.tpot_s")
    if record["ttft_s"] > record["e2e_s"] + 1e-6:
        raise EngineRunError(f"{where}: ttft_s {record['ttft_s']} is after e2e_s {record['e2e_s']}")
    for i, v in enumerate(_list(record["itl_s"], f"{where}.itl_s")):
        _number(v, f"{where}.itl_s[{i}]")
    if not isinstance(record["same_text"], bool):
        raise EngineRunError(f"{where}.same_text: expected true or false")
    for name in ("run_id", "method", "rid", "case_id", "corpus", "length"):
        if not isinstance(record[name], str):
            raise EngineRunError(f"{where}.{name}: expected a string")
    return record


def _stats(values: Sequence[float], name: str, scale: float = 1000.0) -> dict:
    """mean, median, std and the PERCENTILES of `values` in ms (vllm bench serve's keys: mean_ttft_ms, ...)."""
    if not values:
        return {f"{k}_{name}_ms": None for k in ("mean", "median", "std", *(f"p{p}" for p in PERCENTILES))}
    v = np.asarray(values, dtype=float) * scale
    out = {f"mean_{name}_ms": float(v.mean()), f"median_{name}_ms": float(np.median(v)), f"std_{name}_ms": float(v.std())}
    out.update({f"p{p}_{name}_ms": float(np.percentile(v, p)) for p in PERCENTILES})
    return out


def run_result(key: RunKey, records: list[dict], facts: Mapping) -> dict:
    """One run's results, in the shape of `vllm bench serve --save-result` (its metric names and ms units),
    with the run's method, load, engine facts and the machine's load beside them."""
    if not records:
        raise EngineRunError(f"run {key.run_id}: no request records")
    duration = max(r["arrival_s"] + r["e2e_s"] for r in records)
    gold = sum(r["gold_tokens"] for r in records)
    drafted = sum(r["drafted_tokens"] for r in records)
    accepted = sum(r["accepted_tokens"] for r in records)
    return {"schema": RESULT_SCHEMA, "run_id": key.run_id, "method": key.method, "max_concurrency": key.concurrency,
            "repeat": key.repeat, "num_prompts": len(records), "completed": len(records), "duration": duration,
            "total_input_tokens": sum(r["prompt_tokens"] for r in records),
            "total_output_tokens": sum(r["output_tokens"] for r in records), "total_gold_tokens": gold,
            "request_throughput": len(records) / duration, "output_throughput": gold / duration,
            "total_token_throughput": (gold + sum(r["prompt_tokens"] for r in records)) / duration,
            **_stats([r["ttft_s"] for r in records], "ttft"),
            **_stats([r["tpot_s"] for r in records if r["tpot_s"] is not None], "tpot"),
            **_stats([v for r in records for v in r["itl_s"]], "itl"),
            **_stats([r["e2e_s"] for r in records], "e2el"),
            "spec_decode": {"draft_tokens": drafted, "accepted_tokens": accepted,
                            "acceptance_rate": accepted / drafted if drafted else None},
            "same_text_share": sum(r["same_text"] for r in records) / len(records),
            "percentile_metrics": "ttft,tpot,itl,e2el", "metric_percentiles": ",".join(map(str, PERCENTILES)),
            **dict(facts)}
