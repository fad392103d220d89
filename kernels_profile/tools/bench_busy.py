"""The busy-machine benchmark: the same kernel profile and e2e run on a quiet machine and beside a busy
loop pinned to one core, compared as ratios measured within a pair.

- kernel: per (model, context, N, AR loop) the median over repeat pairs of T_ar / T_prefill within
  one AR/prefill pair, at N = 8, 128, 512; passes if |busy / quiet - 1| <= 0.15.
- e2e: per model x corpus and over every case, the median over cases and repeats of AR seconds /
  line-program (`copy-line-ideal`) seconds within one repeat of one case; passes if |change| <= 0.20.

How to run it (the lead runs it; each run takes the time of `copydecode kernels profile` plus
`copydecode e2e`). The quiet run is this repository's own data/ after `dvc repro` on a quiet machine;
the busy run is a copy measured beside the loop:

    QUIET=$PWD; BUSY=$(mktemp -d)/repo
    cp -a "$QUIET" "$BUSY"                          # the repository with its data/ (corpora, programs)
    rm -rf "$BUSY/data/kernels" "$BUSY/data/e2e"    # measure again: no checkpoint is reused
    taskset -c 0 python3 -c 'while True: pass' & LOOP=$!
    (cd "$BUSY" && copydecode kernels profile && copydecode e2e)
    kill $LOOP
    copydecode bench busy "$QUIET" "$BUSY"     # [--out STEM], default reports/kernels/benchmark_busy

Arguments: QUIET_DIR BUSY_DIR [--out STEM]; each DIR is a repository root holding
data/kernels/raw.parquet and data/e2e/measurements.parquet with their .environment.json sidecars.
Writes STEM.md (both runs' environments with their contention verdicts, the two tables, PASS or
FAIL per row) and STEM.json (the same figures, machine-readable), each atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from analysis.errors import ParamsError
from analysis.pipeline.io import markdown_table, read_parquet, write_json, write_text
from analysis.latency.tables import speedup_table
from analysis.latency.model import GROUP
from analysis.layout import BUSY_BENCHMARK, E2E_MEASUREMENTS, KERNELS_RAW
from analysis.rivals.families.ar import AR as BASELINE
from analysis.rivals.families.copy import IDEAL
from analysis.rivals.methods import Method, canonical
from kernels_profile.e2e.summary import per_pair_ratios
from kernels_profile.measure.sidecar import environment_path

FORMAT = "copydecode.busybench/1"
DEFAULT_STEM = BUSY_BENCHMARK
KERNEL_NS = (8, 128, 512)
KERNEL_TOLERANCE = 0.15   # a kernel ratio passes when the busy run's is within 15% of the quiet run's
E2E_TOLERANCE = 0.20      # an e2e line-program ratio passes within 20% of the quiet run's
LINE_PROGRAM = Method("copy", level="line", directives=IDEAL).name
KEYS = [*GROUP, "context", "n", "baseline"]
E2E_KEYS = ["model", "corpus"]
ALL = "all"               # the model and corpus label of the row over every case


@dataclass(frozen=True)
class BenchRun:
    """One run's timings and sidecars, read from a repository root."""

    root: Path
    kernels: pl.DataFrame
    kernels_env: dict[str, Any] | None
    e2e: pl.DataFrame
    e2e_env: dict[str, Any] | None


def _sidecar(path: Path) -> dict[str, Any] | None:
    sidecar = environment_path(path)
    return json.loads(sidecar.read_text()) if sidecar.is_file() else None


def read_run(root: Path) -> BenchRun:
    root = Path(root)
    kernels = read_parquet(root / KERNELS_RAW, f"copydecode kernels profile (in {root})", ParamsError)
    e2e = read_parquet(root / E2E_MEASUREMENTS, f"copydecode e2e (in {root})", ParamsError)
    return BenchRun(root, kernels, _sidecar(root / KERNELS_RAW), e2e, _sidecar(root / E2E_MEASUREMENTS))


# ---------------------------------------------------------------- the comparisons

def _same_rows(quiet: pl.DataFrame, busy: pl.DataFrame, keys: list[str], what: str) -> None:
    """Two runs of one grid hold the same rows; a row in one only is an error, never dropped."""
    only = {"quiet": quiet.select(keys).join(busy.select(keys), on=keys, how="anti"),
            "busy": busy.select(keys).join(quiet.select(keys), on=keys, how="anti")}
    missing = {name: frame.head(5).to_dicts() for name, frame in only.items() if frame.height}
    if missing:
        raise ParamsError(f"busybench: the two runs measured different {what}; rows in one run only: {missing}")


def _judge(table: pl.DataFrame, tolerance: float) -> pl.DataFrame:
    return table.with_columns(change=pl.col("busy") / pl.col("quiet") - 1).with_columns(
        passed=pl.col("change").abs() <= tolerance)


def compare(quiet: pl.DataFrame, busy: pl.DataFrame, ns=KERNEL_NS) -> pl.DataFrame:
    """Per (model, context, N, AR loop): each run's per-pair median ratio, busy/quiet - 1, pass."""
    def side(raw: pl.DataFrame, name: str) -> pl.DataFrame:
        table = speedup_table(raw).filter(pl.col("n").is_in(list(ns)))
        absent = sorted(set(ns) - set(table["n"].to_list()))
        if absent:
            raise ParamsError(f"busybench: the {name} kernel profile has no N = {absent} (it needs N = {list(ns)})")
        return table.select(*KEYS, pl.col("speedup").alias(name), pl.col("speedup_q25").alias(f"{name}_q25"),
                            pl.col("speedup_q75").alias(f"{name}_q75"), pl.col("repeats").alias(f"{name}_pairs"))

    q, b = side(quiet, "quiet"), side(busy, "busy")
    _same_rows(q, b, KEYS, "kernel points")
    return _judge(q.join(b, on=KEYS).sort(KEYS), KERNEL_TOLERANCE)


def line_program_ratios(measurements: pl.DataFrame) -> pl.DataFrame:
    """AR seconds / line-program seconds within one repeat of one case (model, corpus, case_id,
    repeat, ratio), by kernels_profile.e2e.summary's own pairing (measurements with the old e2e names read too)."""
    measurements = canonical(measurements)
    methods = set(measurements["method"].to_list())
    if not {BASELINE, LINE_PROGRAM} <= methods:
        raise ParamsError(f"busybench: e2e measurements need methods {BASELINE!r} and {LINE_PROGRAM!r}, "
                          f"got {sorted(methods)}")
    pairs = per_pair_ratios(measurements)
    return pairs.filter(pl.col("method") == LINE_PROGRAM).select("model", "corpus", "case_id", "repeat", "ratio")


def e2e_medians(measurements: pl.DataFrame) -> pl.DataFrame:
    """Median line-program ratio per model x corpus, and one row over every case (model = corpus = all)."""
    pairs = line_program_ratios(measurements)
    agg = {"ratio": pl.col("ratio").median(), "cases": pl.col("case_id").n_unique(), "pairs": pl.len()}
    per_group = pairs.group_by(E2E_KEYS).agg(**agg).sort(E2E_KEYS)
    overall = pairs.select(pl.lit(ALL).alias("model"), pl.lit(ALL).alias("corpus"), *[e.alias(k) for k, e in agg.items()])
    return pl.concat([per_group, overall.cast(per_group.schema)])


def compare_e2e(quiet: pl.DataFrame, busy: pl.DataFrame) -> pl.DataFrame:
    """Per model x corpus (and over all): each run's median line-program ratio, busy/quiet - 1, pass."""
    q, b = e2e_medians(quiet), e2e_medians(busy)
    cases = {name: frame.filter(pl.col("model") != ALL) for name, frame in (("quiet", q), ("busy", b))}
    _same_rows(cases["quiet"], cases["busy"], E2E_KEYS, "e2e model x corpus groups")
    q = q.rename({"ratio": "quiet", "cases": "quiet_cases", "pairs": "quiet_pairs"})
    b = b.rename({"ratio": "busy", "cases": "busy_cases", "pairs": "busy_pairs"})
    return _judge(q.join(b, on=E2E_KEYS, maintain_order="left"), E2E_TOLERANCE)


# ---------------------------------------------------------------- the environments

def kernels_environment(run: BenchRun) -> dict[str, Any]:
    """Threads, noisy, contention of a kernel profile (None where its sidecar predates them)."""
    env = run.kernels_env or {}
    threads = env.get("threads")
    if threads is None and "threads" in run.kernels.columns:
        threads = sorted({int(t) for t in run.kernels["threads"].drop_nulls().to_list()})
    return {"sidecar": env != {}, "threads": threads, "noisy": env.get("noisy"), "contended": env.get("contended"),
            "other_busy_cores": env.get("other_busy_cores"), "noisy_reasons": env.get("noisy_reasons"),
            "max_pair_drift": env.get("max_pair_drift"), "load1": env.get("load1"),
            "cpu_model": (env.get("machine") or {}).get("cpu_model")}


def e2e_environment(run: BenchRun) -> dict[str, Any]:
    env = run.e2e_env or {}
    contention = env.get("contention") or {}
    return {"sidecar": env != {}, "threads": env.get("threads", (env.get("machine") or {}).get("torch_threads")),
            "noisy": env.get("noisy"), "contended": env.get("contended"),
            "other_busy_cores": contention.get("other_busy_cores"), "noisy_reasons": env.get("noisy_reasons"),
            "reference_drift": (env.get("drift") or {}).get("drift"),
            "cpu_model": (env.get("machine") or {}).get("cpu_model")}


def _max_abs(table: pl.DataFrame) -> float:
    return float(table["change"].abs().max())


def shown_root(root: Path) -> str:
    """A run's folder as the committed report names it: relative to the current folder when inside it, else
    its name only; never the machine's absolute path."""
    import os

    here, folder = Path.cwd().resolve(), Path(root).resolve()
    if folder == here or here in folder.parents:
        return os.path.relpath(folder, here)
    return f"{folder.name} (a folder outside this checkout)"


def benchmark(quiet: BenchRun, busy: BenchRun) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]:
    """The machine-readable result and the two tables it summarises."""
    kernel, e2e_table = compare(quiet.kernels, busy.kernels), compare_e2e(quiet.e2e, busy.e2e)
    result = {
        "format": FORMAT,
        "kernel": {"ns": list(KERNEL_NS), "tolerance": KERNEL_TOLERANCE, "max_abs_change": _max_abs(kernel),
                   "passed": bool(kernel["passed"].all()), "rows": kernel.to_dicts()},
        "e2e": {"method": LINE_PROGRAM, "baseline": BASELINE, "tolerance": E2E_TOLERANCE,
                "max_abs_change": _max_abs(e2e_table), "passed": bool(e2e_table["passed"].all()),
                "rows": e2e_table.to_dicts()},
        "runs": {name: {"root": shown_root(run.root), "kernels": kernels_environment(run), "e2e": e2e_environment(run)}
                 for name, run in (("quiet", quiet), ("busy", busy))},
    }
    result["passed"] = result["kernel"]["passed"] and result["e2e"]["passed"]
    return result, kernel, e2e_table


# ---------------------------------------------------------------- the report

def _verdict(flag: bool) -> str:
    return "PASS" if flag else "FAIL"


def _environment_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for name, run in result["runs"].items():
        for part in ("kernels", "e2e"):
            env = run[part]
            if not env["sidecar"]:
                lines.append(f"- {name} {part} (`{run['root']}`): no environment sidecar recorded; threads {env['threads']}")
                continue
            reasons = "; ".join(env["noisy_reasons"] or []) or "none"
            lines.append(f"- {name} {part} (`{run['root']}`): threads {env['threads']}, other processes' busy cores "
                         f"{env['other_busy_cores']}, contended {env['contended']}, noisy {env['noisy']} "
                         f"(reasons: {reasons}), CPU {env['cpu_model']}")
    return lines


def _table(table: pl.DataFrame) -> str:
    return markdown_table(table.with_columns(result=pl.col("passed").map_elements(_verdict, return_dtype=pl.String))
                          .drop("passed"), digits=3)


def markdown(result: dict[str, Any], kernel: pl.DataFrame, e2e_table: pl.DataFrame) -> str:
    k, e = result["kernel"], result["e2e"]
    return "\n".join([
        "# Ratios on a quiet machine vs beside a busy loop pinned to one core",
        "",
        f"Overall: **{_verdict(result['passed'])}** (kernel {_verdict(k['passed'])}, e2e {_verdict(e['passed'])}). "
        "`change` = busy / quiet - 1.",
        "",
        *_environment_lines(result),
        "",
        f"## Kernel: per-pair median T_ar / T_prefill at N = {', '.join(map(str, k['ns']))} "
        f"(IQR over repeat pairs); pass if |change| <= {k['tolerance']:.0%}",
        "",
        f"Largest |change|: {k['max_abs_change']:.1%}.",
        "",
        _table(kernel),
        "",
        f"## End to end: median over cases and repeats of AR / line-program ({e['method']}) seconds within one "
        f"repeat; pass if |change| <= {e['tolerance']:.0%}",
        "",
        f"Largest |change|: {e['max_abs_change']:.1%}.",
        "",
        _table(e2e_table),
        "",
    ])


def write_benchmark(quiet_root: Path, busy_root: Path, stem: Path = DEFAULT_STEM) -> dict[str, Any]:
    result, kernel, e2e_table = benchmark(read_run(quiet_root), read_run(busy_root))
    stem = Path(stem)
    write_json(result, stem.with_name(stem.name + ".json"))
    write_text(markdown(result, kernel, e2e_table), stem.with_name(stem.name + ".md"))
    return result


@dataclass(frozen=True)
class BusySettings:
    quiet: Path    # repository root of the quiet run
    busy: Path     # ... and of the run beside the busy loop
    out: Path      # report path without suffix (--out STEM)


# `copydecode bench busy`: its help line and what it reads and writes (the CLI's --help)
HELP = ("quiet-vs-busy spread of the kernel and e2e per-pair ratios of two runs -> "
        "reports/kernels/benchmark_busy.{md,json}")
READS_WRITES = ("reads QUIET_DIR's and BUSY_DIR's data/kernels and data/e2e; writes "
                "reports/kernels/benchmark_busy.md and .json (or --out STEM)")
READS_PARAMS = False  # the two runs carry their own settings: --params and --set are refused, not ignored
OWN_OUT = "names the report's path without suffix (STEM)"  # a one-off output root is refused


def add_arguments(parser) -> None:
    """`bench busy`'s own options (settings(params, quiet, busy, out)); `out` is `--out`, read by the CLI as raw_out
    (`--stem`, its old name, is still taken)."""
    parser.add_argument("quiet", metavar="QUIET_DIR", help="repository root of the quiet run (data/kernels, data/e2e)")
    parser.add_argument("busy", metavar="BUSY_DIR", help="repository root of the run beside the busy loop")
    parser.add_argument("--out", "--stem", default=argparse.SUPPRESS, dest="raw_out", metavar="STEM",
                        help="the report's path without suffix, its .md and .json written beside (default "
                             "reports/kernels/benchmark_busy)")


def settings(params: dict, quiet: str, busy: str, out: str | None = None) -> BusySettings:
    """`copydecode bench busy QUIET_DIR BUSY_DIR [--out STEM]`: no params (the two runs carry
    their own settings)."""
    return BusySettings(Path(quiet), Path(busy), Path(out) if out else DEFAULT_STEM)


def run(s: BusySettings) -> dict[str, Any]:
    """Compare the two runs; a missing run or a mismatch is a ParamsError naming it."""
    result = write_benchmark(s.quiet, s.busy, s.out)
    print(f"{s.out}.md / .json: kernel max |change| {result['kernel']['max_abs_change']:.1%}, "
          f"e2e max |change| {result['e2e']['max_abs_change']:.1%}, {_verdict(result['passed'])}", file=sys.stderr)
    return {"report": f"{s.out}.md", "passed": result["passed"],
            "kernel_max_abs_change": result["kernel"]["max_abs_change"],
            "e2e_max_abs_change": result["e2e"]["max_abs_change"]}
