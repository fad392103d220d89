"""One engine run (`copydecode engine run`): requests drawn, prompts built, the driver run once per method and
repeat, the gold and the Copy-as-Decode plans made from the engine's own output, and the driver's raw files
turned into checked records.

Order: repeat 0 starts with AR, whose concurrency-1 run is the gold; every other method (and every later
repeat, in a seeded order of methods) then runs with the same requests, at every load. Each (method, repeat)
is one driver process (one engine start: vLLM's speculative config is an engine setting), which runs the
loads in turn. The driver writes a run's files and its `.done` marker last; a rerun skips finished runs, so an
interrupted run resumes where it stopped and loses no finished run.

Files under OUT (the frozen run; `raw/` is the driver's own output, git-ignored):
    run.json            the run record (analysis.pipeline.runrecord) with the settings, engine, machine and loads
    requests.json       the drawn requests and their prompt token ids (rewrite and program prompts)
    gold.json           per request the engine's greedy output ids and text (AR, concurrency 1, repeat 0)
    plans.json          per request the Copy-as-Decode program and its chain of engine requests
    requests.jsonl      one record per request and run (analysis.engine.records.REQUEST_FIELDS)
    results/<run>.json  one results JSON per run (`vllm bench serve --save-result`'s shape)
    steps.jsonl         per run, every engine step's shape and seconds (the step-cost fit's points)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from analysis.corpora.cases import read_cases
from analysis.engine.methods import COPY, EngineMethod, parse_engine_method, run_id, run_methods
from analysis.engine.plan import copy_plan
from analysis.engine.records import RunKey, check_raw_request, check_steps, read_json, request_record, run_result
from analysis.engine.requests import DrawSettings, EngineRequest, EngineRunError, closed_loop_order, draw_requests
from analysis.engine.steps import step_rows
from analysis.pipeline.io import write_json, write_text
from kernels_profile.engine.process import driver_env, echo, run_driver
from kernels_profile.engine.setup import venv_python
from kernels_profile.runtime.hf import PLAIN_REWRITE_TEMPLATE, PROGRAM_TEMPLATE, ModelTokenizer, prompt_ids

DRIVER = Path(__file__).with_name("driver.py")
JOB_SCHEMA = "copydecode.engine_job/1"


@dataclass(frozen=True)
class EngineRunSettings:
    venv: Path
    model_dir: Path
    out: Path
    cases: Path
    draw: DrawSettings
    max_tokens: int
    concurrency: tuple[int, ...]
    repeats: int
    warmup_requests: int
    ngram_ks: tuple[int, ...]
    lookup_min: int
    lookup_max: int
    copy: bool
    suffix: bool
    engine_args: dict
    kv_cache_gib: float
    threads: int
    driver_timeout_s: float


def prompts(requests: list[EngineRequest], model_dir: Path, max_model_len: int, max_tokens: int):
    """Per request its rewrite and program prompt ids, the tokenizer's encode and its end-of-sequence id."""
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model_dir))
    tok = ModelTokenizer.from_hf(hf, (hf.eos_token_id,))
    out = {}
    for r in requests:
        rewrite = prompt_ids(tok, PLAIN_REWRITE_TEMPLATE, r.source, r.instruction)
        program = prompt_ids(tok, PROGRAM_TEMPLATE, r.source, r.instruction)
        longest = len(program) + 2 * len(hf.encode(r.source, add_special_tokens=False)) + 4 * max_tokens
        if max(len(rewrite), len(program)) + max_tokens > max_model_len or longest > max_model_len:
            raise EngineRunError(f"request {r.rid} (case {r.case_id}): a {len(program)}-token program prompt and its chain "
                                 f"may pass engine.run.max_model_len ({max_model_len}); lower engine.run.max_source_lines")
        out[r.rid] = {"rewrite_prompt_ids": rewrite, "program_prompt_ids": program}
    return out, (lambda text: hf.encode(text, add_special_tokens=False)), int(hf.eos_token_id)


def job_requests(method: EngineMethod, requests: list[EngineRequest], prompt_ids: dict, gold: dict | None,
                 plans: dict | None, max_tokens: int) -> dict:
    out = {}
    for r in requests:
        if method.family == COPY:
            out[r.rid] = {"prompt_ids": prompt_ids[r.rid]["program_prompt_ids"], "chain": plans[r.rid]["chain"]}
        else:
            out[r.rid] = {"prompt_ids": prompt_ids[r.rid]["rewrite_prompt_ids"], "max_tokens": max_tokens}
    return out


def gold_from(raw_dir: Path, end_id: int, rids: list[str]) -> dict:
    """The engine's greedy output per request: AR at concurrency 1 in repeat 0 (the module docstring)."""
    data = read_json(raw_dir / f"{run_id(EngineMethod('ar'), 1, 0)}.requests.json", "driver requests file")
    gold = {}
    for i, raw in enumerate(data.get("records", [])):
        raw = check_raw_request(raw, f"gold record {i}", rids)
        ids = list(raw["output_ids"])
        ended = raw["stages"][-1].get("finish_reason") == "stop"
        if ended and ids and ids[-1] == end_id:
            ids = ids[:-1]
        if not ids:
            raise EngineRunError(f"request {raw['rid']}: the engine's greedy output is empty; it cannot be a gold")
        gold[raw["rid"]] = {"ids": ids, "text": raw["text"], "ended": ended, "end_id": end_id}
    missing = sorted(set(rids) - set(gold))
    if missing:
        raise EngineRunError(f"the gold run lacks requests {missing}")
    return gold


def method_order(methods: list[EngineMethod], repeat: int, seed: int) -> list[EngineMethod]:
    """Repeat 0: AR first (its run is the gold); later repeats in a seeded order of every method."""
    if repeat == 0:
        return methods
    rng = np.random.default_rng(np.random.SeedSequence([seed, repeat, *b"methods"]))
    return [methods[i] for i in rng.permutation(len(methods))]


def run_all(s: EngineRunSettings, suffix_reason: str | None, progress: Callable[[str], None] = echo) -> dict:
    """The whole run (module docstring); returns the facts the run record holds."""
    raw_dir = s.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    requests, notes = draw_requests(read_cases(s.cases), s.draw)
    rids = [r.rid for r in requests]
    prompt_ids, encode, end_id = prompts(requests, s.model_dir, s.engine_args["max_model_len"], s.max_tokens)
    write_json({"requests": [{**{k: v for k, v in asdict(r).items() if k not in ("source", "instruction")},
                              **prompt_ids[r.rid]} for r in requests], "notes": notes}, s.out / "requests.json")
    methods = run_methods(s.ngram_ks, s.suffix and suffix_reason is None, s.copy)
    python, env = venv_python(s.venv), driver_env(s.kv_cache_gib, s.threads)
    gold_run = raw_dir / f"{run_id(EngineMethod('ar'), 1, 0)}.done"
    gold = gold_from(raw_dir, end_id, rids) if gold_run.is_file() else None
    if gold is not None:
        write_json(gold, s.out / "gold.json")
    plans = None
    for repeat in range(s.repeats):
        for method in method_order(methods, repeat, s.draw.seed):
            if method.family == COPY and plans is None:
                plans = make_plans(requests, gold, encode, end_id)
                write_json(plans, s.out / "plans.json")
            runs = [{"run_id": run_id(method, c, repeat), "concurrency": c,
                     "order": closed_loop_order(rids, s.draw.seed, f"c{c}-r{repeat}")} for c in s.concurrency]
            if all((raw_dir / f"{r['run_id']}.done").is_file() for r in runs):
                continue
            job = {"schema": JOB_SCHEMA, "model": str(s.model_dir.resolve()), "engine_args": s.engine_args,
                   "method": {"name": method.name, "kind": method.kind,
                              "speculative_config": method.speculative_config(s.lookup_min, s.lookup_max)},
                   "requests": job_requests(method, requests, prompt_ids, gold, plans, s.max_tokens),
                   "warmup": rids[:s.warmup_requests], "warmup_tokens": 4, "runs": runs}
            job_path = raw_dir / f"{method.name}-r{repeat}.job.json"
            write_text(json.dumps(job), job_path)
            progress(f"repeat {repeat + 1}/{s.repeats}: {method.label} at concurrency {list(s.concurrency)}")
            started = datetime.now(timezone.utc).isoformat(timespec="seconds")
            load = run_driver(python, DRIVER.resolve(), job_path.resolve(), raw_dir.resolve(), env, s.driver_timeout_s,
                              raw_dir / "driver.log")
            write_json({"started": started, **load}, raw_dir / f"{method.name}-r{repeat}.load.json")
            if gold is None:
                gold = gold_from(raw_dir, end_id, rids)
                write_json(gold, s.out / "gold.json")
    return {"requests": len(requests), "notes": notes, "methods": [m.name for m in methods], "suffix": suffix_reason}



def make_plans(requests: list[EngineRequest], gold: dict, encode, end_id: int) -> dict:
    return {r.rid: copy_plan(r.source, gold[r.rid]["text"], encode, end_id, gold[r.rid]["ended"]).to_record()
            for r in requests}


def _done_runs(raw_dir: Path) -> list[str]:
    return sorted(p.name[:-len(".done")] for p in raw_dir.glob("*.done") if p.name != "warmup.done")


def collect(out: Path, methods: list[EngineMethod], concurrency: tuple[int, ...], repeats: int,
            machine: dict) -> dict:
    """The driver's raw files of every finished run, checked and turned into the frozen run's records, results
    and step shapes (module docstring); returns counts for the run record."""
    raw_dir = out / "raw"
    requests = {r["rid"]: r for r in read_json(out / "requests.json", "requests file")["requests"]}
    gold = read_json(out / "gold.json", "gold file")
    plans = read_json(out / "plans.json", "plans file") if (out / "plans.json").is_file() else None
    lines, step_lines, results = [], [], {}
    expected = {run_id(m, c, r) for m in methods for c in concurrency for r in range(repeats)}
    for name in sorted(expected & set(_done_runs(raw_dir))):
        stem, _, rep = name.rpartition("-r")
        method_name, _, conc = stem.rpartition("-c")
        method = parse_engine_method(method_name)
        key = RunKey(name, method.name, int(conc), int(rep))
        data = read_json(raw_dir / f"{name}.requests.json", "driver requests file")
        steps = check_steps(read_json(raw_dir / f"{name}.steps.json", "driver steps file"), f"{name}.steps.json")
        records = [request_record(key, method.kind, check_raw_request(raw, f"{name}.requests.json record {i}", list(requests)),
                                  requests[raw["rid"]], gold[raw["rid"]], None if plans is None else plans.get(raw["rid"]),
                                  steps)
                   for i, raw in enumerate(data.get("records", []))]
        engine = read_json(raw_dir / f"{method.name}.engine.json", "engine facts file")
        load_file = raw_dir / f"{method.name}-r{key.repeat}.load.json"
        load = read_json(load_file, "load file") if load_file.is_file() else {"unmeasured": "no load file"}
        facts = {"date": load.get("started"), "backend": "vllm", "engine_version": engine.get("engine_version"),
                 "model_id": "SmolLM2-135M-Instruct", "speculative_config": engine.get("speculative_config"),
                 "engine_args": engine.get("engine_args"), "torch_version": engine.get("torch_version"),
                 "idle_steps": read_json(raw_dir / f"{name}.steps.json", "driver steps file").get("idle_steps"),
                 "forward_seconds": round(sum(st["s"] for st in steps), 3),
                 "machine": machine, "load": load}
        results[name] = run_result(key, records, facts)
        write_json(results[name], out / "results" / f"{name}.json")
        lines.extend(records)
        step_lines.append({"run_id": name, "method": method.name, "concurrency": key.concurrency, "repeat": key.repeat,
                           "steps": step_rows(steps)})
    write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines), out / "requests.jsonl")
    write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in step_lines), out / "steps.jsonl")
    return {"runs": len(results), "runs_expected": len(expected), "request_records": len(lines),
            "same_text_share": (sum(r["same_text"] for r in lines) / len(lines)) if lines else None}
