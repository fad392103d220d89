"""A frozen engine run read back (`reports/engine/frozen/<run>/`, written by `copydecode engine run`): every file
is data, checked before use (sizes bounded, records validated field by field), and a missing or malformed file
is a named error (analysis.engine.records).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.engine.compare import SimulationInputs
from analysis.engine.methods import parse_engine_method
from analysis.engine.records import MAX_FILE_BYTES, RESULT_SCHEMA, check_request_record, read_json
from analysis.engine.requests import EngineRunError
from analysis.engine.steps import STEP_FIELDS, step_frame
from analysis.pipeline.confine import safe_name
from analysis.pipeline.runrecord import RUN_JSON, lacking
from analysis.serving.scheduler import EngineConfig

FROZEN = Path("reports/engine/frozen")


@dataclass(frozen=True)
class FrozenRun:
    folder: Path
    record: dict
    requests: list[dict]
    gold: dict
    plans: dict | None
    records: pl.DataFrame
    results: list[dict]
    steps: pl.DataFrame


def frozen_folder(name: str, root: Path = FROZEN) -> Path:
    return Path(root) / safe_name(name, "engine.frozen_run")


def _jsonl(path: Path, what: str) -> list[dict]:
    if not path.is_file():
        raise EngineRunError(f"{path}: no {what}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise EngineRunError(f"{path}: over the {MAX_FILE_BYTES}-byte limit of a {what}")
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError as exc:
            raise EngineRunError(f"{path}:{i}: not a JSON line ({exc})") from None
    return out


def _ids(value: object, where: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        raise EngineRunError(f"{where}: expected a list of token ids")
    return value


def _check_result(result: dict, where: str) -> dict:
    if result.get("schema") != RESULT_SCHEMA:
        raise EngineRunError(f"{where}: not a {RESULT_SCHEMA} results file")
    for name in ("output_throughput", "p50_ttft_ms", "duration", "same_text_share"):
        value = result.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise EngineRunError(f"{where}.{name}: expected a non-negative number, got {value!r}")
    parse_engine_method(result.get("method"))
    return result


def read_frozen(folder: Path) -> FrozenRun:
    folder = Path(folder)
    if not folder.is_dir():
        raise EngineRunError(f"{folder}: no frozen engine run (`copydecode engine run` writes one; docs/engine.md)")
    record = read_json(folder / RUN_JSON, "run record")
    if lacking(record):
        raise EngineRunError(f"{folder / RUN_JSON}: lacks {lacking(record)}")
    requests = read_json(folder / "requests.json", "requests file").get("requests")
    if not isinstance(requests, list) or not requests:
        raise EngineRunError(f"{folder / 'requests.json'}: no requests")
    for i, r in enumerate(requests):
        for name in ("rewrite_prompt_ids", "program_prompt_ids"):
            _ids(r.get(name), f"requests.json[{i}].{name}")
    gold = read_json(folder / "gold.json", "gold file")
    for rid, g in gold.items():
        _ids(g.get("ids") if isinstance(g, dict) else None, f"gold.json[{rid}].ids")
    plans = read_json(folder / "plans.json", "plans file") if (folder / "plans.json").is_file() else None
    rows = [check_request_record(r, f"requests.jsonl line {i + 1}") for i, r in
            enumerate(_jsonl(folder / "requests.jsonl", "request records file"))]
    if not rows:
        raise EngineRunError(f"{folder / 'requests.jsonl'}: no request record")
    results = [_check_result(read_json(p, "results file"), p.name) for p in sorted((folder / "results").glob("*.json"))]
    if not results:
        raise EngineRunError(f"{folder / 'results'}: no results file")
    step_lines = _jsonl(folder / "steps.jsonl", "step log")
    for i, line in enumerate(step_lines):
        if not isinstance(line.get("steps"), list) or any(not isinstance(s, list) or len(s) != len(STEP_FIELDS)
                                                          for s in line["steps"]):
            raise EngineRunError(f"steps.jsonl line {i + 1}: each step is {list(STEP_FIELDS)}")
    frame = pl.DataFrame(rows).drop("itl_s")
    return FrozenRun(folder, record, requests, gold, plans, frame, results, step_frame(step_lines))


def simulation_inputs(run: FrozenRun) -> SimulationInputs:
    settings, engine_args = run.record["settings"], run.record["settings"]["engine_args"]
    end_ids = {g.get("end_id") for g in run.gold.values()}
    if len(end_ids) != 1:
        raise EngineRunError(f"{run.folder / 'gold.json'}: requests name different end-of-sequence ids {end_ids}")
    return SimulationInputs(
        rids=tuple(r["rid"] for r in run.requests),
        rewrite_prompts={r["rid"]: r["rewrite_prompt_ids"] for r in run.requests},
        program_prompts={r["rid"]: r["program_prompt_ids"] for r in run.requests},
        gold={rid: g["ids"] for rid, g in run.gold.items()}, plans=run.plans, end_id=int(end_ids.pop()),
        lookup_min=int(settings["lookup_min"]), lookup_max=int(settings["lookup_max"]),
        seed=int(run.record["draw"]["seed"]),
        config=EngineConfig(int(engine_args["max_num_batched_tokens"]), int(engine_args["max_num_seqs"])).validate())
