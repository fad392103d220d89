"""`copydecode bench mask [--programs N] [--lines N] [--models M ...] [--out FILE]`: the decode stage's
mask benchmark (kernels_profile.decode.maskbench) outside the pipeline, on the settings of params
decode.mask_benchmark, each overridable on the command line. Prints the summary table (stderr) and
returns each vocabulary's mask-apply costs."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import polars as pl

from analysis.pipeline.io import write_json
from analysis.pipeline.params import choices, positive_int
from kernels_profile.decode import maskbench
from kernels_profile.runtime.models import known_models

GROUP = "decode.mask_benchmark"


@dataclass(frozen=True)
class MaskBenchSettings:
    models: tuple[str, ...]     # vocabularies walked beside llguidance
    programs: int               # line-level oracle programs whose states are walked
    lines: int                  # the grammar's line limit
    apply_repeats: int
    threads: int                # torch threads while a mask is applied
    out: str | None             # also write the full results here (--out FILE, JSON)


# `copydecode bench mask`: its help line and what it reads and writes (the CLI's --help)
HELP = "grammar-mask cost per step, this suite's FSM beside llguidance (params decode.mask_benchmark)"
READS_WRITES = ("reads data/programs/programs.parquet, params decode.mask_benchmark and its models' tokenizers; "
                "writes a summary table to the terminal (stderr) and, with --out FILE, the full results (JSON)")
OWN_OUT = "names the results file (JSON)"  # a one-off output root is refused


def add_arguments(parser) -> None:
    """`bench mask`'s own options (settings(params, programs, lines, models, out)); `out` is `--out`, read by the
    CLI as raw_out (`--json`, its old name, is still taken)."""
    parser.add_argument("--programs", type=int, default=None, help="line programs (default: params)")
    parser.add_argument("--lines", type=int, default=None, help="source lines the copies range over (default: params)")
    parser.add_argument("--models", nargs="+", default=None, help="vocabularies (default: params)")
    parser.add_argument("--out", "--json", default=argparse.SUPPRESS, dest="raw_out", metavar="FILE",
                        help="also write the full results here (JSON)")


def settings(params: dict, programs: int | None = None, lines: int | None = None,
             models: list[str] | None = None, out: str | None = None) -> MaskBenchSettings:
    """params decode.mask_benchmark, validated; the command line's values replace the params'."""
    over = {"programs": programs, "lines": lines, "models": list(models) if models else None}
    p = {"decode": {"mask_benchmark": {**params.get("decode", {}).get("mask_benchmark", {}),
                                       **{k: v for k, v in over.items() if v is not None}}}}
    return MaskBenchSettings(models=choices(p, f"{GROUP}.models", tuple(known_models())),
                             programs=positive_int(p, f"{GROUP}.programs"), lines=positive_int(p, f"{GROUP}.lines"),
                             apply_repeats=positive_int(p, f"{GROUP}.apply_repeats"),
                             threads=positive_int(p, f"{GROUP}.threads"), out=out)


def run(s: MaskBenchSettings) -> dict:
    results = maskbench.run_models(s.models, maskbench.line_programs(s.programs, s.lines), s.lines,
                                   apply_repeats=s.apply_repeats, threads=s.threads,
                                   cases=maskbench.line_cases(s.programs, s.lines))
    with pl.Config(tbl_cols=-1, tbl_width_chars=200, float_precision=1):
        print(pl.DataFrame(maskbench.summary_rows(results)), file=sys.stderr)
    if s.out:
        write_json({"results": results}, s.out)
    return {r["vocabulary"]: r["apply"] for r in results}
