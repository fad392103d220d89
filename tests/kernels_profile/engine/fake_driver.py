"""A fake engine driver for the tests: the real driver's job in, its files out, no engine.

Run as the real one is (`python -I fake_driver.py JOB OUT`). Virtual time: every step costs
C0 + CT * (tokens scheduled) seconds, every in-flight request is scheduled each step (continuous batching without
a token budget). AR and speculative requests emit one token per step (their drafts are all rejected, so q = 1);
a greedy output is the prompt's last `max_tokens` ids reversed, then the end id 2. A copy chain's stage prefills
its appended tokens in its first step and then emits its forced ids, one per step.
"""

import json
import os
import sys

C0, CT = 0.05, 0.0005
END = 2


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def outputs_of(kind, spec):
    if kind == "copy":
        return [list(s["forced_ids"]) for s in spec["chain"]]
    return [list(reversed(spec["prompt_ids"]))[:spec["max_tokens"] - 1] + [END]]


def run(job, run_spec):
    kind, requests = job["method"]["kind"], job["requests"]
    queue, live, done, steps, now = list(run_spec["order"]), [], [], [], 0.0

    def admit(at):
        rid = queue.pop(0)
        spec = requests[rid]
        live.append({"key": f"{run_spec['run_id']}/{len(done) + len(live)}", "rid": rid, "arrival": at, "stage": 0,
                     "outs": outputs_of(kind, spec), "pos": 0, "need": len(spec["prompt_ids"]), "context": 0,
                     "deliveries": [], "output_ids": [], "stages": [], "finish": None,
                     "chain": spec.get("chain"), "prompt": len(spec["prompt_ids"])})
        live[-1]["stages"].append({"prompt_tokens": live[-1]["prompt"], "cached_tokens": 0, "output_tokens": 0})

    for _ in range(min(run_spec["concurrency"], len(queue))):
        admit(0.0)
    while live:
        rows = [[r["key"], r["need"] or 1, r["context"], 0] for r in live]
        seconds = C0 + CT * sum(row[1] for row in rows)
        steps.append({"t": now, "s": seconds, "cpu_s": seconds, "rows": rows})
        now += seconds
        for r in list(live):
            r["context"] += r["need"] or 1
            r["need"] = 0
            token = r["outs"][r["stage"]][r["pos"]]
            r["pos"] += 1
            r["output_ids"].append(token)
            r["deliveries"].append([now, 1, len(steps) - 1])
            r["stages"][-1]["output_tokens"] += 1
            if r["pos"] < len(r["outs"][r["stage"]]):
                continue
            r["stages"][-1]["finish_reason"] = "stop" if token == END else "length"
            if r["stage"] + 1 < len(r["outs"]):
                r["stage"] += 1
                r["pos"] = 0
                append = len(r["chain"][r["stage"]]["append_ids"])
                r["need"] = append
                r["stages"].append({"prompt_tokens": r["context"] + append, "cached_tokens": r["context"],
                                    "output_tokens": 0})
                continue
            r["finish"] = now
            live.remove(r)
            done.append(r)
            if queue:
                admit(now)
    records = [{k: r[k] for k in ("key", "rid", "arrival", "finish", "deliveries", "output_ids", "stages")}
               | {"text": "", "engine_ids": []} for r in done]
    return records, steps


def main(job_path, out):
    with open(job_path) as handle:
        job = json.load(handle)
    write(os.path.join(out, f"{job['method']['name']}.engine.json"),
          {"engine": "fake", "engine_version": "0.0-fake", "engine_args": job["engine_args"],
           "speculative_config": job["method"]["speculative_config"]})
    for spec in job["runs"]:
        base = os.path.join(out, spec["run_id"])
        if os.path.exists(base + ".done"):
            continue
        records, steps = run(job, spec)
        write(base + ".requests.json", {"run_id": spec["run_id"], "records": records})
        write(base + ".steps.json", {"run_id": spec["run_id"], "steps": steps, "idle_steps": 0})
        write(base + ".done", {"run_id": spec["run_id"]})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
