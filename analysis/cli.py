"""`copydecode`: one subcommand per pipeline stage (each is one dvc.yaml stage), plus the tools.

STAGES maps each subcommand to the module that runs it; a stage module's `run(settings)` returns its
metrics, and the CLI builds those settings (SETTINGS_OPTIONS: the command-line options each takes). MAINTENANCE maps the commands outside the pipeline that are not benchmarks (`readme`,
`moves`, `depgraph`, `pilot-sweep`) to modules that own their options (`add_arguments(parser)`) and run
them (`command(args) -> exit status`); this is the project's one console script and its one
`__main__`. Modules are imported on use, so torch is loaded only by the commands that run a model.
`--params` and `--out` may come before or after the subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from contextlib import nullcontext

from analysis.config import Config
from analysis.errors import CopyDecodeError
from analysis.io import finish_pending, output_set
from analysis.params import DEFAULT_PARAMS

# subcommand -> (stage module, help)
STAGES: dict[str, tuple[str, str]] = {
    "corpora": ("analysis.stages.corpora", "build data/corpora/cases.parquet"),
    "programs": ("analysis.stages.programs", "write line- and token-level oracle programs"),
    "roundtrip": ("analysis.stages.roundtrip", "check resolve(oracle) == target for every case"),
    "spans": ("analysis.stages.spans", "span table, coverage with bootstrap CIs, histograms"),
    "bounds": ("analysis.stages.bounds", "closed-form speedup bounds with bootstrap CIs"),
    "optimal": ("analysis.stages.optimal", "cost-optimal oracle beside the coverage oracle; token min_copy sweep"),
    "perturb": ("analysis.stages.perturb", "EM under off-by-one span noise"),
    "formats": ("analysis.stages.formats", "edit-format token cost and token-boundary splices"),
    "headline": ("analysis.stages.headline", "headline metrics for `dvc metrics show`: a few dozen figures, one small file per measure"),
    "reports": ("analysis.stages.reports", "render the papermill reports into reports/ (html, notebooks, index)"),
    "kernels profile": ("kernels_profile.stages.profile", "time AR steps vs one parallel prefill"),
    "kernels fit": ("kernels_profile.stages.fit", "fit the latency model to the raw timings"),
    "decode": ("kernels_profile.stages.decode", "the Copy-as-Decode decoder on one case (--case-id, --model)"),
    "e2e": ("kernels_profile.stages.e2e", "measured end to end: AR vs PLD vs Copy-as-Decode, constrained decoding"),
    "pilot": ("kernels_profile.stages.pilot", "fine-tuning pilot: LoRA adapters that write programs (or rewrites), EM and wall-clock"),
}

# Every stage and benchmark: its module builds its typed settings from the params dict and these
# command-line options (`settings(params, **options)`) and runs on them alone (`run(settings)`).
# `params_path` is the params file read (for the reports' provenance), not an option.
SETTINGS_OPTIONS: dict[str, tuple[str, ...]] = {
    "kernels profile": ("preset", "out"),
    "kernels fit": (),
    "decode": ("case_id", "model", "framing"),
    "e2e": (),
    "pilot": ("preset",),
    "corpora": ("pairs", "repo", "only", "language", "name"),
    "programs": (),
    "roundtrip": (),
    "spans": (),
    "bounds": (),
    "optimal": (),
    "perturb": (),
    "formats": (),
    "headline": (),
    "reports": ("params_path",),
    "bench throughput": ("cases", "jobs", "backend", "bench_out"),
    "bench busy": ("quiet", "busy", "stem"),
    "bench mask": ("programs", "lines", "models", "json"),
}

# commands that are not pipeline stages (no dvc.yaml stage): command -> (module, help)
TOOLS: dict[str, tuple[str, str]] = {
    "bench throughput": ("analysis.bench", "cases/s of programs + spans + optimal with 1 and 2 workers, "
                                           "peak memory, 1M-case estimate -> reports/bench/throughput.{json,md}"),
    "bench busy": ("kernels_profile.busybench", "quiet-vs-busy spread of the kernel and e2e per-pair ratios of two "
                                                "runs -> reports/kernels/benchmark_busy.{md,json}"),
    "bench mask": ("kernels_profile.stages.bench_mask", "grammar-mask cost per step, this suite's FSM beside llguidance "
                                                "(params decode.mask_benchmark)"),
}

# maintenance commands (no dvc.yaml stage): command -> (module with add_arguments and command, help)
MAINTENANCE: dict[str, tuple[str, str]] = {
    "readme": ("analysis.readme", "after `dvc repro`: gather reports/timings.json, then rewrite README.md's Results "
                                  "block (--check: list its stale lines, write nothing)"),
    "moves": ("analysis.moves", "what the diff-based line oracle leaves out (moved lines) -> reports/tables/line_moves.*"),
    "depgraph": ("analysis.depgraph", "rewrite every dvc.yaml stage's code deps (*.py) from the import graph"),
    "pilot-sweep": ("kernels_profile.pilot_sweep", "the pilot's training-settings sweep, an interrupted run's "
                                                    "checkpoint curve, decoded range errors, or freezing a preset run"),
}

# What each stage reads and writes, for its --help (paths as in analysis.layout).
READS_WRITES: dict[str, str] = {
    "corpora": "reads the corpora in params `corpora` (and --pairs/--repo); writes data/corpora/cases.parquet, "
               "reports/metrics/corpora.json",
    "programs": "reads data/corpora/cases.parquet; writes data/programs/programs.parquet",
    "roundtrip": "reads cases and programs; writes reports/metrics/roundtrip.json",
    "spans": "reads cases and programs; writes data/spans/*.parquet, reports/tables/coverage.*, "
             "span histograms, reports/metrics/coverage.json",
    "bounds": "reads data/spans/spans.parquet and reports/kernels/latency_model.json; writes "
              "data/bounds/case_costs.parquet, reports/tables/bounds*.*, reports/metrics/bounds.json",
    "optimal": "reads cases, programs and the latency model; writes reports/tables/optimal*.*",
    "perturb": "reads cases and programs; writes data/perturb/results.parquet, reports/tables/perturbation*.*",
    "formats": "reads cases and programs; writes reports/tables/formats*.*",
    "reports": "reads every stage's tables and metrics; writes reports/html, reports/notebooks, reports/index.html",
}

# Stages whose outputs are replaced as one set (analysis.io.output_set). Not roundtrip (its failure
# report is written before it exits non-zero), reports (papermill writes its own files) or the model
# stages (their checkpoints must land as they finish, for resuming).
OUTPUT_SETS = ("corpora", "programs", "spans", "bounds", "optimal", "perturb", "formats")

OUT_HELP = ("a one-off output root: data/ and reports/ are written under DIR instead of the current folder "
            "(paths in the params file and on the command line are still read from where you are)")


def _common(parser: argparse.ArgumentParser, top: bool, out: bool = True) -> None:
    """--params and --out, accepted before the subcommand (top) and after it (the subcommand's value wins)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    parser.add_argument("--params", default=default(str(DEFAULT_PARAMS)), help="params file (default: params.yaml)")
    if out:
        parser.add_argument("--out", default=default(None), metavar="DIR", help=OUT_HELP)


def _add_stage(sub, command: str) -> argparse.ArgumentParser:
    module, text = STAGES[command]
    description = text[0].upper() + text[1:] + "."
    if command in READS_WRITES:
        description += f" It {READS_WRITES[command]}."
    parser = sub.add_parser(command.split()[-1], help=text, description=description)
    parser.set_defaults(stage=command, module=module)
    _common(parser, top=False, out=command != "kernels profile")  # its --out names the raw timings file
    return parser


def _add_corpora_options(stage: argparse.ArgumentParser) -> None:
    stage.add_argument("--pairs", action="append", metavar="FILE",
                       help="also read this edit-pairs file (JSON Lines or Parquet; fields source, target)")
    stage.add_argument("--repo", action="append", metavar="PATH",
                       help="also mine this git repository or bundle for one-file commits (language: --language)")
    stage.add_argument("--only", action="store_true",
                       help="build only the --pairs/--repo inputs, none of the corpora configured in params")
    stage.add_argument("--language", default=None,
                       help="language of the --repo inputs (python, js, ...; default python) and of --pairs "
                            "records without a language field")
    stage.add_argument("--name", default=None,
                       help="corpus name of the one --pairs or --repo input (default: from the file or folder name)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copydecode", description=__doc__.splitlines()[0])
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="STAGE", required=True,
                                title="stages", description="run `copydecode STAGE --help` for what a stage reads and writes")
    for command in STAGES:
        if " " not in command:
            stage = _add_stage(sub, command)
            if command == "corpora":
                _add_corpora_options(stage)
            if command == "decode":
                stage.add_argument("--case-id", dest="case_id", help="the case to decode (default: params decode.case_id)")
                stage.add_argument("--model", help="the model (default: params decode.model)")
                stage.add_argument("--framing", help="the framing of a multi-framing corpus (default: params)")
            if command == "pilot":
                stage.add_argument("--preset", default=None, help="a preset from params pilot.presets (e.g. pilot-gpu)")
    kernels_parser = sub.add_parser("kernels", help="model timing: profile and fit",
                                    description="Model timing: `kernels profile` times AR steps against one parallel "
                                                "prefill; `kernels fit` fits the latency model to those timings.")
    kernels = kernels_parser.add_subparsers(dest="kcommand", metavar="{profile,fit}", required=True)
    profile = _add_stage(kernels, "kernels profile")
    profile.add_argument("--preset", default=None, help="a preset from params kernels.presets (e.g. paper-gpu)")
    profile.add_argument("--out", default=argparse.SUPPRESS, dest="raw_out",
                         help="raw timings parquet (default: the preset's or params'); a one-off output root is not "
                              "supported here")
    _add_stage(kernels, "kernels fit")
    bench = sub.add_parser("bench", help="benchmarks outside the pipeline",
                           description="Benchmarks that are not pipeline stages (no dvc.yaml stage); each writes "
                                       "its own report.").add_subparsers(dest="bcommand", metavar="{throughput,busy,mask}",
                                                                         required=True)
    throughput = bench.add_parser("throughput", help=TOOLS["bench throughput"][1],
                                  description="Throughput of the per-case stages: " + TOOLS["bench throughput"][1])
    throughput.set_defaults(stage="bench throughput", module=TOOLS["bench throughput"][0])
    throughput.add_argument("--cases", type=int, default=None,
                            help="synthetic cases (default: params bench.cases, 20,000 as shipped)")
    throughput.add_argument("--jobs", default=None, help="worker counts to time, comma-separated (default: params "
                                                          "bench.jobs, 1,2 as shipped)")
    throughput.add_argument("--backend", default=None, help="joblib backend (default: params bench.backend, loky as shipped)")
    throughput.add_argument("--out", default=argparse.SUPPRESS, dest="bench_out",
                            help="output folder (default reports/bench; `copydecode --out DIR bench throughput` "
                                 "writes DIR/reports/bench)")
    busy = _add_tool(bench, "bench busy")
    busy.add_argument("quiet", metavar="QUIET_DIR", help="repository root of the quiet run (data/kernels, data/e2e)")
    busy.add_argument("busy", metavar="BUSY_DIR", help="repository root of the run beside the busy loop")
    busy.add_argument("--stem", default=None, metavar="OUT_STEM",
                      help="report path without suffix (default reports/kernels/benchmark_busy)")
    mask = _add_tool(bench, "bench mask")
    mask.add_argument("--programs", type=int, default=None, help="line programs (default: params)")
    mask.add_argument("--lines", type=int, default=None, help="source lines the copies range over (default: params)")
    mask.add_argument("--models", nargs="+", default=None, help="vocabularies (default: params)")
    mask.add_argument("--json", default=None, metavar="FILE", help="also write the full results here")
    for command in MAINTENANCE:
        _add_maintenance(sub, command)
    return parser


def _add_maintenance(sub, command: str) -> argparse.ArgumentParser:
    module, text = MAINTENANCE[command]
    parser = sub.add_parser(command, help=text, description=text[0].upper() + text[1:] + ".")
    parser.set_defaults(stage=command, module=module, maintenance=True)
    parser.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
    importlib.import_module(module).add_arguments(parser)
    return parser


def _add_tool(sub, command: str) -> argparse.ArgumentParser:
    module, text = TOOLS[command]
    parser = sub.add_parser(command.split()[-1], help=text, description=text[0].upper() + text[1:] + ".")
    parser.set_defaults(stage=command, module=module)
    parser.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
    return parser


def stage_settings(module, args: argparse.Namespace, cfg: Config):
    """The settings of a SETTINGS_OPTIONS stage, built from the params and its command-line options."""
    options = {name: cfg.path if name == "params_path" else getattr(args, name, None)
               for name in SETTINGS_OPTIONS[args.stage]}
    return module.settings(cfg.params, **options)


def run_stage(module, args: argparse.Namespace, cfg: Config):
    """The stage's settings built here, from the params and its command-line options, then its run."""
    return module.run(stage_settings(module, args, cfg))


def run_maintenance(args: argparse.Namespace) -> int:
    """A MAINTENANCE command: its module's `command(args)`, a CopyDecodeError reported by name (exit 2)."""
    if args.out is not None:
        print(f"copydecode {args.stage}: error: --out (a one-off output root) is not supported here", file=sys.stderr)
        return 2
    try:
        return importlib.import_module(args.module).command(args)
    except CopyDecodeError as exc:
        print(f"copydecode {args.stage}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"copydecode {args.stage}: interrupted", file=sys.stderr)
        return 130


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "maintenance", False):
        return run_maintenance(args)
    if args.stage == "kernels profile":  # its own --out names the raw timings file, kept as `out` for the stage
        if args.out is not None:
            print("copydecode kernels profile: error: --out before the subcommand (a one-off output root) is not "
                  "supported here; `kernels profile --out FILE` names the raw timings file", file=sys.stderr)
            return 2
        args.out = getattr(args, "raw_out", None)
        root = None
    else:
        root = args.out
    try:
        cfg = Config.load(args.params)
        if root is not None:
            from analysis.oneoff import enter_out_root

            cfg = enter_out_root(root, cfg, args)
        for stage in finish_pending():
            print(f"copydecode: completed the output set of an interrupted `{stage}` run", file=sys.stderr)
        module = importlib.import_module(args.module)
        with output_set(args.stage) if args.stage in OUTPUT_SETS else nullcontext():
            result = run_stage(module, args, cfg)
    except CopyDecodeError as exc:
        print(f"copydecode {args.stage}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"copydecode {args.stage}: interrupted; finished outputs and checkpoints are kept", file=sys.stderr)
        return 130
    if result is not None:
        print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
