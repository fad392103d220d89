"""`copydecode bench mask [--programs N] [--lines N] [--models M ...] [--json FILE]`: the decode stage's
mask benchmark (kernels_profile.maskbench) outside the pipeline, on the settings of params
decode.mask_benchmark (read by the decode stage's settings), each overridable on the command line.
Prints the summary table (stderr) and returns each vocabulary's mask-apply costs."""

from __future__ import annotations

import sys

import polars as pl

from analysis.config import Config
from analysis.io import write_json
from kernels_profile import maskbench
from kernels_profile.stages.decode import settings


def run(cfg: Config, args) -> dict:
    s = settings(cfg.params)
    models = tuple(args.models) if args.models else s.mask_models
    programs = args.programs if args.programs is not None else s.mask_programs
    lines = args.lines if args.lines is not None else s.mask_lines
    results = maskbench.run_models(models, maskbench.line_programs(programs, lines), lines,
                                   apply_repeats=s.mask_apply_repeats)
    with pl.Config(tbl_cols=-1, tbl_width_chars=200, float_precision=1):
        print(pl.DataFrame(maskbench.summary_rows(results)), file=sys.stderr)
    if args.json:
        write_json({"results": results}, args.json)
    return {r["vocabulary"]: r["apply"] for r in results}
