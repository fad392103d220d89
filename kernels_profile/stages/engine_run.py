"""`copydecode engine run`: a measured run in a real serving engine (docs/engine.md).

It drives that engine as an external process
(kernels_profile.engine.session, .process; the driver kernels_profile/engine/driver.py runs in the engine venv,
isolated) over the seeded requests at every load, and writes the run folder: run record, per-request records,
one results JSON per run, the step log. Neither is a pipeline stage: the default `dvc repro` reads the frozen
run (`copydecode engine summary`).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from analysis.engine.methods import run_methods
from analysis.engine.requests import DrawSettings
from analysis.errors import ParamsError
from analysis.layout import CASES
from analysis.pipeline.confine import confined
from analysis.pipeline.io import write_json
from analysis.pipeline.params import get, get_or, number, positive_int
from analysis.pipeline.runrecord import RUN_JSON, run_record
from kernels_profile.engine.session import EngineRunSettings, collect, run_all
from kernels_profile.engine.setup import read_marker, read_model_marker
from kernels_profile.measure.machine import machine_info

FROZEN = Path("reports/engine/frozen")


def settings_of(params: dict, out: str | None) -> EngineRunSettings:
    run = "engine.run"
    engine_args = {"dtype": get(params, f"{run}.dtype", str), "max_model_len": positive_int(params, f"{run}.max_model_len"),
                   "max_num_batched_tokens": positive_int(params, f"{run}.max_num_batched_tokens"),
                   "max_num_seqs": positive_int(params, f"{run}.max_num_seqs"),
                   "block_size": positive_int(params, f"{run}.block_size"), "seed": positive_int(params, f"{run}.seed", 0),
                   "enable_prefix_caching": True, "enforce_eager": bool(get(params, f"{run}.enforce_eager", bool))}
    concurrency = tuple(int(c) for c in get(params, f"{run}.concurrency", list))
    if not concurrency or any(isinstance(c, bool) or c < 1 for c in concurrency):
        raise ParamsError(f"params: {run}.concurrency must be a non-empty list of integers >= 1, got {concurrency!r}")
    ks = tuple(int(k) for k in get(params, f"{run}.ngram_ks", list))
    frozen_name = get(params, "engine.frozen_run", str)
    return EngineRunSettings(
        venv=Path(get(params, "engine.venv", str)), model_dir=Path(get(params, "engine.model_dir", str)),
        out=confined(out if out is not None else FROZEN / frozen_name, "engine run --out"), cases=CASES,
        draw=DrawSettings(positive_int(params, f"{run}.seed", 0), positive_int(params, f"{run}.short_per_corpus", 0),
                          positive_int(params, f"{run}.long_per_corpus", 0), get(params, f"{run}.framing", str),
                          positive_int(params, f"{run}.max_source_lines")),
        max_tokens=positive_int(params, f"{run}.max_tokens"), concurrency=concurrency,
        repeats=positive_int(params, f"{run}.repeats"), warmup_requests=positive_int(params, f"{run}.warmup_requests", 0),
        ngram_ks=ks, lookup_min=positive_int(params, f"{run}.prompt_lookup_min"),
        lookup_max=positive_int(params, f"{run}.prompt_lookup_max"), copy=bool(get_or(params, f"{run}.copy", True, bool)),
        suffix=bool(get_or(params, f"{run}.suffix", True, bool)), engine_args=engine_args,
        kv_cache_gib=number(params, f"{run}.kv_cache_gib", lo=0.1), threads=positive_int(params, f"{run}.threads"),
        driver_timeout_s=number(params, f"{run}.driver_timeout_s", lo=60))


# ---------------------------------------------------------------- engine run

HELP = ("drive vLLM (its own venv, an external process) over seeded corpus requests: AR, vLLM ngram at each k, "
        "suffix decoding, Copy-as-Decode emulated; closed loop at each concurrency, with repeats")
READS_WRITES = ("reads data/corpora/cases.parquet, params engine, the engine venv and model folder; writes the run "
                    "folder (--out, default reports/engine/frozen/<engine.frozen_run>): run.json, requests.json, "
                    "gold.json, plans.json, requests.jsonl, results/<run>.json, steps.jsonl, raw/ (git-ignored)")


def add_arguments(parser) -> None:
    parser.add_argument("--out", dest="run_out", default=None, metavar="DIR",
                        help="the run folder (default reports/engine/frozen/<engine.frozen_run>); a rerun resumes it")
    parser.add_argument("--collect-only", action="store_true",
                        help="rebuild the records, results and step log from the finished runs in DIR/raw only")


def suffix_reason(marker: dict, wanted: bool) -> str | None:
    """Why suffix decoding is not run (None: it is)."""
    if not wanted:
        return "not asked (params engine.run.suffix: false)"
    suffix = marker.get("suffix") or {}
    if not suffix.get("installed"):
        return suffix.get("reason") or "suffix decoding's package is not installed in the engine venv"
    return None


def relative(path: Path) -> str:
    """A path as the run record writes it: relative to the project, never naming this machine's folders."""
    path = Path(path)
    return str(path.relative_to(Path.cwd())) if path.is_absolute() and path.is_relative_to(Path.cwd()) else str(path)


def _first_started(raw_dir: Path, now: datetime) -> datetime:
    """When this run folder's run began (kept in raw/started.json across resumes and interrupts)."""
    path = raw_dir / "started.json"
    if path.is_file():
        return datetime.fromisoformat(json.loads(path.read_text())["started"])
    write_json({"started": now.isoformat(timespec="seconds")}, path)
    return now


def _last_finished(raw_dir: Path) -> datetime | None:
    done = [p.stat().st_mtime for p in raw_dir.glob("*.done")]
    return datetime.fromtimestamp(max(done), timezone.utc) if done else None


def command(args) -> int:
    s = settings_of(args.config.params, args.run_out)
    marker = read_marker(s.venv)
    model = read_model_marker(s.model_dir)
    raw_dir = s.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    started = _first_started(raw_dir, datetime.now(timezone.utc).replace(microsecond=0))
    why_not_suffix = suffix_reason(marker, s.suffix)
    if not args.collect_only:
        run_all(s, why_not_suffix)
    methods = run_methods(s.ngram_ks, s.suffix and why_not_suffix is None, s.copy)
    machine = machine_info()
    counts = collect(s.out, methods, s.concurrency, s.repeats, machine)
    ended = _last_finished(raw_dir) or datetime.now(timezone.utc)
    drawn = json.loads((s.out / "requests.json").read_text())
    record = run_record("copydecode engine run" + (f" --out {args.run_out}" if args.run_out else ""), started,
                        (ended - started).total_seconds(), machine,
                        engine={k: v for k, v in marker.items() if k != "python"}, model=model,
                        settings={k: (relative(v) if isinstance(v, Path) else v) for k, v in vars(s).items() if k != "draw"},
                        draw=vars(s.draw), draw_notes=drawn.get("notes", []), requests=len(drawn["requests"]),
                        methods=[m.name for m in methods], suffix_not_run=why_not_suffix,
                        python=str(s.venv / "bin" / "python"), **counts)
    record["ended"] = ended.isoformat(timespec="seconds")  # the last finished run, also when collected later
    write_json(record, s.out / RUN_JSON)
    print(f"copydecode engine run: {counts['runs']} of {counts['runs_expected']} runs, {counts['request_records']} "
          f"request records, same text {counts['same_text_share']}; {s.out}", file=sys.stderr)
    return 0 if counts["runs"] == counts["runs_expected"] else 1
