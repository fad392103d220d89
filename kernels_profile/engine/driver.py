"""The engine driver: the one program that runs inside the serving engine's own environment.

`copydecode engine run` executes this file with the engine venv's interpreter in isolated mode
(`python -I driver.py JOB OUT`): no project module, no run folder and no working directory is on its import
path, and it imports nothing of the project. Everything it needs comes in one JSON job file (plain data:
token ids, counts, engine arguments from a fixed list), and everything it measures goes out as JSON files,
each written to a temporary name and renamed into place (a killed driver leaves no half-written file).

One job is one engine (one method: its speculative config is an engine setting) serving one or more closed-loop
runs. Per run: the prefix cache is reset, the first `concurrency` requests of `order` are submitted, and each
finished request is replaced at once by the next (no think time) until all are done. The engine is stepped
here (`LLMEngine.step`, in process), so every step is timed where it happens, and the scheduler's own output of
that step (the tokens it scheduled per request, each request's cached context, its draft tokens) is logged
beside it: the step-cost model is fitted to these steps.

A request is either one engine request (`ar`, `spec`: greedy, up to `max_tokens`), or, for the Copy-as-Decode
emulation (`copy`), a chain of engine requests: stage 0 is the prompt with its forced program tokens; stage i>0
re-submits the prompt and everything in the cache so far plus the copied source tokens (`append_ids`), so that
the prefix cache serves the cached part and the engine prefills only the copied tokens (and the rest of a
partly filled cache block), and then decodes its forced tokens. The forced tokens are imposed by a structured-
output grammar of exact token ids (llguidance's `<[id]>` terminals): one decode step per token, as a native
decoder pays.

Outputs in OUT: `<run_id>.requests.json` (one record per request: arrival, token deliveries as [time, tokens,
step index], output ids and text, per stage its prompt, cached and output tokens) and `<run_id>.steps.json` (per step: start, seconds and the scheduled shape), then
`<run_id>.done` last. A run whose `.done` exists is skipped (resume).
"""

import json
import os
import sys
import time

SCHEMA = "copydecode.engine_job/1"
ENGINE_ARGS = ("dtype", "max_model_len", "max_num_batched_tokens", "max_num_seqs", "block_size", "seed",
               "enable_prefix_caching", "enforce_eager", "gpu_memory_utilization", "kv_cache_memory_bytes")


def fail(message):
    print(f"engine driver: error: {message}", file=sys.stderr)
    sys.exit(2)


def write_atomic(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_job(path):
    with open(path, encoding="utf-8") as handle:
        job = json.load(handle)
    if not isinstance(job, dict) or job.get("schema") != SCHEMA:
        fail(f"{path}: not a {SCHEMA} job")
    unknown = sorted(set(job.get("engine_args", {})) - set(ENGINE_ARGS))
    if unknown:
        fail(f"{path}: engine_args {unknown} are not among {list(ENGINE_ARGS)}")
    return job


class StepLog:
    """The scheduler's output of each step, recorded by wrapping the scheduler's `schedule` (in process)."""

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.pending = None
        self.ok = scheduler is not None
        if self.ok:
            original = scheduler.schedule

            def schedule(*args, **kwargs):
                out = original(*args, **kwargs)
                self.pending = self.shape(out)
                return out

            scheduler.schedule = schedule

    def shape(self, out):
        """(request id, new tokens, cached context, draft tokens) per scheduled request."""
        requests = self.scheduler.requests
        spec = getattr(out, "scheduled_spec_decode_tokens", {}) or {}
        rows = []
        for rid, q in out.num_scheduled_tokens.items():
            req = requests.get(rid)
            context = req.num_computed_tokens if req is not None else -1
            rows.append((rid, int(q), int(context), len(spec.get(rid, ()))))
        return rows

    def take(self):
        rows, self.pending = self.pending, None
        return rows


def scheduler_of(engine):
    """The in-process scheduler (VLLM_ENABLE_V1_MULTIPROCESSING=0), or None where this vLLM hides it."""
    core = getattr(engine, "engine_core", None)
    core = getattr(core, "engine_core", core)
    return getattr(core, "scheduler", None)


def forced_params(SamplingParams, StructuredOutputsParams, RequestOutputKind, ids, max_tokens):
    """Greedy sampling; with `ids`, the output forced to exactly those token ids."""
    kwargs = {"temperature": 0.0, "max_tokens": max_tokens, "output_kind": RequestOutputKind.DELTA}
    if ids is not None:
        grammar = "start: " + " ".join(f"<[{int(i)}]>" for i in ids)
        kwargs["structured_outputs"] = StructuredOutputsParams(grammar=grammar)
        kwargs["max_tokens"] = len(ids)
        kwargs["ignore_eos"] = True
    return SamplingParams(**kwargs)


class Runner:
    def __init__(self, job, engine, log, make_params):
        self.job, self.engine, self.log, self.make_params = job, engine, log, make_params
        self.requests = job["requests"]
        self.kind = job["method"]["kind"]

    def submit(self, state, now):
        """Add the next engine request of `state` (its first, or the next stage of a copy chain)."""
        spec = self.requests[state["rid"]]
        stage = state["stage"]
        if self.kind == "copy":
            chain = spec["chain"]
            prompt = state["cache"] + list(chain[stage]["append_ids"])
            params = self.make_params(chain[stage]["forced_ids"], None)
        else:
            prompt = list(spec["prompt_ids"])
            params = self.make_params(None, int(spec["max_tokens"]))
        state["prompt"] = prompt
        engine_id = f"{state['key']}#{stage}"
        state["engine_ids"].append(engine_id)
        state["stages"].append({"prompt_tokens": len(prompt), "submitted": now})
        internal = self.engine.add_request(engine_id, {"prompt_token_ids": prompt}, params)
        return engine_id, internal

    def run(self, run):
        engine, t0 = self.engine, time.perf_counter()
        order, concurrency = list(run["order"]), int(run["concurrency"])
        states, by_engine_id, steps, idle = {}, {}, [], 0
        queue = list(order)

        def start_next(now):
            rid = queue.pop(0)
            key = f"{run['run_id']}/{len(states)}"
            state = {"rid": rid, "key": key, "stage": 0, "cache": [], "engine_ids": [], "stages": [],
                     "arrival": now, "deliveries": [], "output_ids": [], "finish": None}
            states[key] = state
            if self.kind == "copy":
                state["cache"] = list(self.requests[rid]["prompt_ids"])
            for name in self.submit(state, now):  # outputs name the id given; the scheduler its own
                by_engine_id[name] = state

        for _ in range(min(concurrency, len(queue))):
            start_next(0.0)
        while engine.has_unfinished_requests():
            cpu0, started = time.process_time(), time.perf_counter() - t0
            outputs = engine.step()
            ended, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            shape = self.log.take() if self.log.ok else None
            if shape == []:  # nothing scheduled (a grammar still compiling): no forward ran
                idle += 1
            else:
                steps.append({"t": round(started, 6), "s": round(ended - started, 6), "cpu_s": round(cpu, 6),
                              "rows": None if shape is None else
                              [[by_engine_id[r[0]]["key"] if r[0] in by_engine_id else r[0], *r[1:]] for r in shape]})
            for out in outputs:
                state = by_engine_id.get(out.request_id)
                if state is None:
                    continue
                new = [int(t) for o in out.outputs for t in o.token_ids]
                state["text"] = state.get("text", "") + "".join(o.text or "" for o in out.outputs)
                if new:
                    state["deliveries"].append([round(ended, 6), len(new), len(steps) - 1])
                    state["output_ids"].extend(new)
                    state.setdefault("stage_ids", {}).setdefault(state["stage"], []).extend(new)
                if not out.finished:
                    continue
                stage = state["stages"][-1]
                stage["cached_tokens"] = int(getattr(out, "num_cached_tokens", None) or 0)
                stage["finish_reason"] = str(out.outputs[0].finish_reason) if out.outputs else None
                produced = state.get("stage_ids", {}).get(state["stage"], [])
                stage["output_tokens"] = len(produced)
                nxt = state["stage"] + 1
                if self.kind == "copy" and nxt < len(self.requests[state["rid"]]["chain"]):
                    state["cache"] = state["prompt"] + produced
                    state["stage"] = nxt
                    for name in self.submit(state, ended):
                        by_engine_id[name] = state
                    continue
                state["finish"] = ended
                if queue:
                    start_next(ended)
        records = [{"key": s["key"], "rid": s["rid"], "arrival": s["arrival"], "finish": s["finish"],
                    "deliveries": s["deliveries"], "output_ids": s["output_ids"], "text": s.get("text", ""),
                    "stages": s["stages"],
                    "engine_ids": s["engine_ids"]} for s in states.values()]
        return records, {"steps": steps, "idle_steps": idle}


def engine_facts(vllm, engine_args, method):
    import platform

    import torch
    return {"engine": "vllm", "engine_version": getattr(vllm, "__version__", "unknown"),
            "torch_version": torch.__version__, "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), "engine_args": engine_args,
            "speculative_config": method.get("speculative_config"),
            "multiprocessing": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")}


def main(job_path, out_dir):
    job = read_job(job_path)
    os.makedirs(out_dir, exist_ok=True)
    todo = [r for r in job["runs"] if not os.path.exists(os.path.join(out_dir, f"{r['run_id']}.done"))]
    if not todo:
        print("engine driver: every run of this job is done")
        return 0
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    method = job["method"]
    args = dict(job["engine_args"])
    if method.get("speculative_config"):
        args["speculative_config"] = method["speculative_config"]
    if method["kind"] == "copy":
        args["structured_outputs_config"] = {"backend": "guidance"}
    loaded = time.perf_counter()
    llm = LLM(model=job["model"], skip_tokenizer_init=False, **args)
    load_s = time.perf_counter() - loaded
    engine = llm.llm_engine
    log = StepLog(scheduler_of(engine))

    def make_params(ids, max_tokens):
        return forced_params(SamplingParams, StructuredOutputsParams, RequestOutputKind, ids, max_tokens)

    runner = Runner(job, engine, log, make_params)
    facts = {**engine_facts(vllm, args, method), "load_s": round(load_s, 3), "step_log": log.ok}
    write_atomic(os.path.join(out_dir, f"{method['name']}.engine.json"), facts)
    warm = job.get("warmup", [])
    if warm:  # not recorded: first steps pay one-off costs (allocation, kernel selection); a few tokens each
        warmup = Runner({**job, "method": {**method, "kind": "ar"},
                         "requests": {rid: {"prompt_ids": job["requests"][rid]["prompt_ids"],
                                            "max_tokens": int(job.get("warmup_tokens", 4))} for rid in warm}},
                        engine, log, make_params)
        warmup.run({"run_id": "warmup", "concurrency": len(warm), "order": warm})
    for run in todo:
        llm.reset_prefix_cache()
        records, steps = runner.run(run)
        base = os.path.join(out_dir, run["run_id"])
        write_atomic(f"{base}.requests.json", {"run_id": run["run_id"], "records": records})
        write_atomic(f"{base}.steps.json", {"run_id": run["run_id"], **steps})
        write_atomic(f"{base}.done", {"run_id": run["run_id"], "requests": len(records), "steps": len(steps["steps"])})
        print(f"engine driver: {run['run_id']} done ({len(records)} requests, {len(steps['steps'])} steps)", flush=True)
    return 0


if __name__ == "__main__":  # vLLM spawns processes: the guard keeps them from rerunning the job
    if len(sys.argv) != 3:
        fail("usage: python -I driver.py JOB.json OUT_DIR")
    sys.exit(main(sys.argv[1], sys.argv[2]))
