"""The real engine, smallest run: vLLM's CPU build from its own venv (params engine.venv, made by `copydecode engine
setup`) serves one request by AR and by the Copy-as-Decode chain through the real driver. Skipped where the venv
or the model folder is absent (CI never installs vLLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures import ROOT, params_with

from kernels_profile.engine import process, session
from kernels_profile.engine.setup import EngineSetupError, read_marker, read_model_marker, venv_python

pytestmark = pytest.mark.engine
PARAMS = params_with()
VENV, MODEL = ROOT / PARAMS["engine"]["venv"], ROOT / PARAMS["engine"]["model_dir"]


def engine_ready() -> bool:
    try:
        read_marker(VENV)
        read_model_marker(MODEL)
    except EngineSetupError:
        return False
    return True


@pytest.mark.skipif(not engine_ready(), reason="no engine venv and model folder (`copydecode engine setup`)")
def test_the_real_engine_serves_ar_and_a_forced_copy_chain(tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODEL))
    prompt = tok.apply_chat_template([{"role": "user", "content": "Repeat: a = 1"}], add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    forced, copied = tok.encode("x = 2\n", add_special_tokens=False), tok.encode("a = 1\n", add_special_tokens=False)
    run = PARAMS["engine"]["run"]
    args = {k: run[k] for k in ("dtype", "max_num_batched_tokens", "max_num_seqs", "block_size", "enforce_eager")}
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, kind, spec in (("ar", "ar", {"prompt_ids": prompt, "max_tokens": 3}),
                             ("copy", "copy", {"prompt_ids": prompt, "chain": [
                                 {"append_ids": [], "forced_ids": forced},
                                 {"append_ids": copied, "forced_ids": [tok.eos_token_id]}]})):
        job = raw / f"{name}.job.json"
        job.write_text(json.dumps({"schema": session.JOB_SCHEMA, "model": str(MODEL), "method": {
            "name": name, "kind": kind, "speculative_config": None}, "engine_args": {**args, "max_model_len": 1024},
            "requests": {"r0": spec}, "runs": [{"run_id": f"{name}-c1-r0", "concurrency": 1, "order": ["r0"]}]}))
        process.run_driver(venv_python(VENV), session.DRIVER, job, raw, process.driver_env(1, 2), 900, raw / "log")
        record = json.loads((raw / f"{name}-c1-r0.requests.json").read_text())["records"][0]
        steps = json.loads((raw / f"{name}-c1-r0.steps.json").read_text())["steps"]
        assert all(len(s["rows"]) == 1 for s in steps)  # one request in flight, every step's shape logged
        if kind == "ar":
            assert len(record["output_ids"]) == 3 and record["stages"][0]["prompt_tokens"] == len(prompt)
        else:  # exactly the forced tokens; the copy's prompt served from the prefix cache
            assert record["output_ids"] == forced + [tok.eos_token_id]
            assert record["stages"][1]["cached_tokens"] > 0
            assert record["stages"][1]["prompt_tokens"] == len(prompt) + len(forced) + len(copied)
