"""`copydecode`: one subcommand per pipeline stage (each is one dvc.yaml stage), plus the tools.

STAGES maps each subcommand to the module that runs it; a stage module's `run(settings)` returns its
metrics, and the CLI builds those settings (SETTINGS_OPTIONS: the command-line options each takes). MAINTENANCE maps the commands outside the pipeline that are not benchmarks (`readme`,
`moves`, `depgraph`, `grammar`, `pilot-sweep`) to modules that own their options (`add_arguments(parser)`) and run
them (`command(args) -> exit status`); this is the project's one console script and its one
`__main__`. Modules are imported on use, so torch is loaded only by the commands that run a model.
`--params`, `--out` and `--set KEY=VALUE` may come before or after the subcommand; `--version` prints
the installed version.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path
from contextlib import nullcontext

from analysis.pipeline.config import Config
from analysis.errors import CopyDecodeError
from analysis.pipeline.confine import check_output_root
from analysis.pipeline.digest import record_corpus
from analysis.pipeline.io import finish_pending, output_set, run_lock, sweep_temporaries
from analysis.pipeline.params import DEFAULT_PARAMS, _dotted_keys, apply_overrides, did_you_mean  # noqa: F401 (tests read _dotted_keys here)

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
    "forcing": ("analysis.stages.forcing", "llguidance under each source's forced-span grammar: does it fast-forward "
                                          "every copy of every line-level oracle program?"),
    "rivals": ("analysis.stages.rivals", "Copy-as-Decode against prompt lookup, suffix decoding and edit formats: "
                                         "each method's forwards per case, priced under every kernel source"),
    "headline": ("analysis.stages.headline", "headline metrics for `dvc metrics show`: a few dozen figures, one small file per measure"),
    "percase": ("analysis.stages.percase", "copy the run's per-case tables into reports/percase/ (committed), with "
                                           "samples.jsonl: one line per case and method"),
    "reports": ("analysis.stages.reports", "render the papermill reports into reports/ (html, notebooks, index)"),
    "kernels profile": ("kernels_profile.stages.profile", "time AR steps vs one parallel prefill"),
    "kernels fit": ("kernels_profile.stages.fit", "fit the latency model to the raw timings"),
    "kernels profile --batched": ("kernels_profile.stages.batched", "time batched engine steps (B sequences, q new "
                                  "tokens each at context c) and fit the step-cost model"),
    "serving simulate": ("analysis.stages.serving", "continuous-batching simulation of the corpora's edits per method, "
                                                    "priced by the step-cost model"),
    "serving replay": ("kernels_profile.stages.replay", "replay simulated steps as real batched forwards and compare "
                                                        "measured with predicted step time"),
    "decode": ("kernels_profile.stages.decode", "the Copy-as-Decode decoder on one case (--case-id, --model)"),
    "e2e": ("kernels_profile.stages.e2e", "measured end to end: AR vs PLD vs Copy-as-Decode, constrained decoding"),
    "pilot": ("kernels_profile.stages.pilot", "fine-tuning pilot: LoRA adapters that write programs (or rewrites), EM and wall-clock"),
}

# Every stage and benchmark: its module builds its typed settings from the params dict and these
# command-line options (`settings(params, **options)`) and runs on them alone (`run(settings)`).
# `params_path` is the params file read (for the reports' provenance), not an option.
SETTINGS_OPTIONS: dict[str, tuple[str, ...]] = {
    "kernels profile": ("preset", "out", "model", "device", "dtype", "contexts", "ns", "weights"),
    "kernels fit": (),
    "kernels profile --batched": ("preset", "out", "device", "model", "dtype", "contexts", "ns", "weights"),
    "serving simulate": (),
    "serving replay": (),
    "decode": ("case_id", "model", "framing"),
    "e2e": ("preset", "out"),
    "pilot": ("preset",),
    "corpora": ("pairs", "repo", "only", "language", "name"),
    "programs": (),
    "roundtrip": (),
    "spans": (),
    "bounds": (),
    "optimal": (),
    "perturb": (),
    "formats": (),
    "forcing": (),
    "rivals": (),
    "headline": (),
    "percase": (),
    "reports": ("params_path",),
    "bench throughput": ("cases", "jobs", "backend", "bench_out", "memory_sizes"),
    "compare": ("a", "b", "repo", "compare_out", "resamples"),
    "bench busy": ("quiet", "busy", "stem"),
    "bench mask": ("programs", "lines", "models", "json"),
}

# commands that are not pipeline stages (no dvc.yaml stage): command -> (module, help)
TOOLS: dict[str, tuple[str, str]] = {
    "bench throughput": ("analysis.tools.bench", "cases/s of programs + spans + optimal with 1 and 2 workers, "
                                           "peak memory, 1M-case estimate -> reports/bench/throughput.{json,md}"),
    "bench busy": ("kernels_profile.stages.bench_busy", "quiet-vs-busy spread of the kernel and e2e per-pair ratios of two "
                                                "runs -> reports/kernels/benchmark_busy.{md,json}"),
    "compare": ("analysis.tools.compare", "two runs' headline figures paired on one value per shared case: B - A, "
                                          "the relative change, a paired bootstrap CI (a sign test for exact match) and "
                                          "the params that differ -> runs/compare/A-vs-B/compare.{md,html,json}"),
    "bench mask": ("kernels_profile.stages.bench_mask", "grammar-mask cost per step, this suite's FSM beside llguidance "
                                                "(params decode.mask_benchmark)"),
}

# maintenance commands (no dvc.yaml stage): command -> (module with add_arguments and command, help)
MAINTENANCE: dict[str, tuple[str, str]] = {
    "readme": ("analysis.present.readme", "after `dvc repro`: gather reports/timings.json, then rewrite README.md's Results "
                                  "block (--check: list its stale lines, write nothing). It reads data/timings and the "
                                  "committed stage outputs; it writes reports/timings.json and README.md"),
    "moves": ("analysis.oracle.moves", "what the diff-based line oracle leaves out (moved lines). It reads the cases and "
                                "programs; it writes reports/tables/line_moves.*"),
    "depgraph": ("analysis.tools.depgraph", "rewrite every dvc.yaml stage's code deps (*.py) from the import graph. It reads "
                                      "the package sources; it writes dvc.yaml"),
    "grammar": ("analysis.tools.grammar", "the program grammar of one source for a structured-output engine: "
                                          "symbolic or forced spans, in llguidance Lark, GBNF (xgrammar) or a "
                                          "regex (outlines-core); see docs/grammar.md. It reads "
                                          "data/corpora/cases.parquet (--case-id) or --source FILE; it writes "
                                          "stdout or --out FILE"),
    "report": ("analysis.tools.report", "render one report page as the reports stage does, from this folder's outputs "
                                        "(--corpus C, -p KEY=VALUE). It reads params reports.parameters and the "
                                        "outputs the report reads; it writes runs/report/NAME[-CORPUS].html "
                                        "(or --html OUT) and, with --notebook FILE, the executed notebook"),
    "pilot-sweep": ("kernels_profile.pilot.sweep", "the pilot's training-settings sweep, an interrupted run's "
                                                    "checkpoint curve, decoded range errors, or freezing a preset run. "
                                                    "It reads params pilot and the pilot's checkpoints; it writes "
                                                    "under the job's output folder"),
}

# What each stage reads and writes, for its --help (paths as in analysis.layout).
READS_WRITES: dict[str, str] = {
    "corpora": "reads the corpora in params `corpora` (and --pairs/--repo); writes data/corpora/cases.parquet, "
               "data/corpora/probeedit_edits.parquet, data/corpora/commits/, reports/tables/commit_repositories.{csv,md}, "
               "reports/metrics/corpora.json",
    "programs": "reads data/corpora/cases.parquet; writes data/programs/programs.parquet",
    "roundtrip": "reads cases and programs; writes reports/metrics/roundtrip.json",
    "spans": "reads cases and programs; writes data/spans/*.parquet, reports/tables/coverage.*, "
             "reports/tables/span_histogram.*, reports/tables/line_boundaries_inside_tokens.*, "
             "reports/figures/span_histogram_*.{png,svg}, reports/metrics/coverage.json",
    "bounds": "reads data/spans/spans.parquet and reports/kernels/latency_model.json; writes "
              "data/bounds/case_costs.parquet, reports/tables/bounds*.*, reports/figures/bounds.{png,svg}, "
              "reports/metrics/bounds.json",
    "optimal": "reads cases, programs and the latency model; writes reports/tables/optimal.*, "
               "reports/tables/min_copy_sweep.*, reports/metrics/optimal.json",
    "perturb": "reads cases and programs; writes data/perturb/results.parquet, reports/tables/perturbation*.*, "
               "reports/figures/perturbation.{png,svg}, reports/metrics/perturbation.json",
    "formats": "reads cases and programs; writes reports/tables/edit_formats.*, reports/tables/token_boundaries.*, "
               "reports/metrics/formats.json",
    "forcing": "reads cases and programs; writes data/grammar/forcing_spans.parquet, "
               "reports/tables/grammar_forcing.*, reports/metrics/grammar_forcing.json",
    "rivals": "reads cases, programs and reports/kernels/latency_model.json (params rivals, bounds); writes "
              "data/rivals/forwards.parquet, data/rivals/percase.parquet, reports/tables/rivals*.*, "
              "reports/figures/rivals.{png,svg}, reports/metrics/rivals.json",
    "percase": "reads the per-case outputs under data/ (cases, programs, spans, coverage, case costs, perturbation, "
               "e2e measurements, pilot records; any may be absent); writes reports/percase/*.parquet, "
               "reports/percase/samples.jsonl and reports/percase/manifest.json",
    "reports": "reads every stage's tables and metrics; writes reports/html/, reports/notebooks/, reports/index.html, "
               "reports/metrics/headline.json, reports/claims.json",
    "headline": "reads reports/tables (coverage, bounds, kernel_speedup, perturbation, e2e_pooled, pilot_em) and "
                "reports/metrics/roundtrip.json; writes metrics/*.json",
    "kernels profile": "reads params kernels.profile (or --preset) and the model's config or weights; writes "
                       "data/kernels/raw.parquet and data/kernels/raw.environment.json (or --out FILE and its sidecar)",
    "kernels profile --batched": "reads params kernels.batched (or --preset from kernels.batched_presets), the model's "
                                 "weights and the frozen batch-1 files of kernels.batched.batch1_sources; writes "
                                 "data/kernels/batched.parquet and data/kernels/batched.environment.json, "
                                 "reports/kernels/step_cost.json, reports/tables/step_cost_*.*, "
                                 "reports/metrics/step_cost.json",
    "serving simulate": "reads data/rivals/forwards.parquet and reports/kernels/step_cost.json (params serving); writes "
                        "data/serving/*.parquet, reports/tables/serving*.*, reports/metrics/serving.json",
    "serving replay": "reads data/serving/steps.parquet, reports/kernels/step_cost.json and the model's weights (params "
                      "serving.replay); writes data/serving/replay.parquet, data/serving/replay.environment.json, "
                      "reports/tables/serving_replay.*, reports/tables/serving_replay_summary.*, "
                      "reports/metrics/serving_replay.json",
    "kernels fit": "reads the raw timing files of params kernels.fit.raw (this run's and the frozen H200 runs); "
                   "writes reports/kernels/latency_model.json, reports/tables/kernel_*.*, "
                   "reports/tables/latency_holdout.*, reports/figures/kernel_speedup*.{png,svg}, "
                   "reports/metrics/kernels.json",
    "decode": "reads data/corpora/cases.parquet, data/programs/programs.parquet and the model's weights; writes "
              "reports/tables/mask_benchmark.*, reports/metrics/decode.json",
    "e2e": "reads cases, programs and the models' weights (params e2e); writes data/e2e/measurements.parquet, "
           "data/e2e/measurements.environment.json, reports/tables/e2e_*.*, reports/figures/e2e_speedup.{png,svg}, "
           "reports/metrics/e2e.json",
    "pilot": "reads data/corpora/cases.parquet, the pinned stdlib and the model's weights (params pilot); writes "
             "data/pilot/*.parquet and checkpoints, reports/tables/pilot_*.*, reports/figures/pilot_*.{png,svg}, "
             "reports/pilot/range_errors.*, reports/metrics/pilot.json",
}

# What each tool reads and writes, for its --help.
TOOL_READS_WRITES: dict[str, str] = {
    "bench throughput": "reads the git bundles of params corpora.commits (synthetic cases) and params bench, parallel; "
                        "writes reports/bench/throughput.json and throughput.md",
    "bench busy": "reads QUIET_DIR's and BUSY_DIR's data/kernels and data/e2e; writes "
                  "reports/kernels/benchmark_busy.md and .json (or --stem)",
    "bench mask": "reads data/programs/programs.parquet, params decode.mask_benchmark and its models' tokenizers; "
                  "writes a summary table to the terminal (stderr) and, with --json FILE, the full results",
}

# Stages whose outputs are replaced as one set (analysis.pipeline.io.output_set). Not roundtrip (its failure
# report is written before it exits non-zero), reports (papermill writes its own files) or the model
# stages (their checkpoints must land as they finish, for resuming).
OUTPUT_SETS = ("corpora", "programs", "spans", "bounds", "optimal", "perturb", "formats", "forcing", "rivals", "percase",
               "kernels fit")
# Stages whose corpus the CLI records (analysis.pipeline.digest.record_corpus) for headline's and reports' stale
# checks, from what their output set wrote: the per-case stages (not kernels fit: its outputs do not depend
# on the cases). The round trip records its own, beside its report, which it writes also when it fails.
CORPUS_SETS = ("corpora", "programs", "spans", "bounds", "optimal", "perturb", "formats", "forcing", "rivals", "percase")

SET_HELP = ("override one setting for this run only, e.g. --set kernel.latency_form=quadratic (VALUE is YAML: "
            "--set 'perturb.rates=[0.0, 1.0]'); repeatable; params.yaml is not written. The key must exist in the "
            "params file; the stage validates the value")

OUT_HELP = ("a one-off output root: data/ and reports/ are written under DIR instead of the current folder "
            "(paths in the params file and on the command line are still read from where you are)")


# stages that draw charts (vl-convert): refused up front under an address-space limit V8 cannot start in (L4)
CHART_STAGES = ("spans", "bounds", "perturb", "kernels fit", "e2e", "pilot", "reports")

# stages whose own --out names their output (a one-off output root is refused there)
OWN_OUT = {"kernels profile": "names the raw timings file", "kernels profile --batched": "names the raw timings file",
           "e2e": "names a preset run's folder"}


def _common(parser: argparse.ArgumentParser, top: bool, out: bool = True) -> None:
    """--params, --set and --out, accepted before the subcommand (top) and after it (the subcommand's value
    wins; --set values of both places apply, the later last)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    parser.add_argument("--params", default=default(str(DEFAULT_PARAMS)), help="params file (default: params.yaml)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides" if top else "overrides_after",
                        default=[] if top else argparse.SUPPRESS, help=SET_HELP)
    if out:
        parser.add_argument("--out", default=default(None), metavar="DIR", help=OUT_HELP)


def _add_stage(sub, command: str) -> argparse.ArgumentParser:
    module, text = STAGES[command]
    description = text[0].upper() + text[1:] + "."
    if command in READS_WRITES:
        description += f" It {READS_WRITES[command]}."
    parser = sub.add_parser(command.split()[-1], help=text, description=description)
    parser.set_defaults(stage=command, module=module)
    # `kernels profile --out` names the raw timings file, `e2e --out` a preset run's folder
    _common(parser, top=False, out=command not in OWN_OUT)
    return parser


def _add_corpora_options(stage: argparse.ArgumentParser) -> None:
    stage.add_argument("--pairs", action="append", metavar="FILE",
                       help="also read this edit-pairs file (JSON Lines or Parquet; fields source, target)")
    stage.add_argument("--repo", action="append", metavar="PATH",
                       help="also mine this git repository or bundle for one-file commits (language: --language)")
    stage.add_argument("--only", nargs="?", const=True, default=False, metavar="KIND,...",
                       help="build only the --pairs/--repo inputs, none of the corpora configured in params; with "
                            "KIND,... also those configured kinds (humanevalpack, probeedit, commits, pairs, datasets), "
                            "e.g. --only datasets builds just params corpora.datasets")
    stage.add_argument("--language", default=None,
                       help="language of the --repo inputs (python, js, ...; default python) and of --pairs "
                            "records without a language field")
    stage.add_argument("--name", default=None,
                       help="corpus name of the one --pairs or --repo input (default: from the file or folder name)")


def version() -> str:
    """The installed distribution's version (pyproject.toml's when run from a checkout that is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("copydecode")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"] if pyproject.is_file() else "unknown"


class Parser(argparse.ArgumentParser):
    """argparse with a suggestion for a mistyped stage or subcommand (`corpra`: did you mean 'corpora'?)."""

    def error(self, message: str):
        match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if match:
            message += did_you_mean(match.group(1), re.findall(r"'([^']*)'", match.group(2)))
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="copydecode", description=__doc__.splitlines()[0],
        epilog="Each stage reads params.yaml (--params FILE) and the outputs of the stages before it, and writes "
               "under data/ and reports/ (--out DIR: under DIR); `copydecode STAGE --help` lists them.")
    parser.add_argument("--version", action="version", version=f"copydecode {version()}")
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
            if command == "e2e":
                stage.add_argument("--preset", default=None, help="a preset from params e2e.presets (e.g. e2e-wide)")
                stage.add_argument("--out", default=argparse.SUPPRESS, dest="raw_out", metavar="DIR",
                                   help="with --preset: the run's folder (default data/e2e/<preset>); a one-off "
                                        "output root is not supported here")
    kernels_parser = sub.add_parser("kernels", help="model timing: profile and fit",
                                    description="Model timing: `kernels profile` times AR steps against one parallel "
                                                "prefill; `kernels fit` fits the latency model to those timings.")
    kernels = kernels_parser.add_subparsers(dest="kcommand", metavar="{profile,fit}", required=True)
    profile = _add_stage(kernels, "kernels profile")
    profile.description += f" With --batched it {READS_WRITES['kernels profile --batched']}."
    profile.add_argument("--preset", default=None, help="a preset from params kernels.presets (e.g. paper-gpu)")
    profile.add_argument("--out", default=argparse.SUPPRESS, dest="raw_out", metavar="FILE",
                         help="raw timings parquet (default: the preset's or params'); a one-off output root is not "
                              "supported here")
    profile.add_argument("--model", default=None, metavar="HF_ID_OR_DIR",
                         help="any transformers causal LM: a folder with a config.json or a hub id (no registry "
                              "entry); the run becomes the kernel source <model>-<device>, written to "
                              "data/kernels/<model>-<device>.parquet (add it to params kernels.fit.raw to fit it)")
    profile.add_argument("--device", default=None, choices=("cpu", "cuda"), help="default: params")
    profile.add_argument("--dtype", default=None, choices=("bfloat16", "float32", "float16"), help="default: params")
    profile.add_argument("--contexts", default=None, nargs="+", metavar="C",
                         help="KV-cache lengths, e.g. --contexts 256 2048 (default: params)")
    profile.add_argument("--ns", default=None, nargs="+", metavar="N",
                         help="copy lengths N, e.g. --ns 1 8 64 512 (default: params)")
    profile.add_argument("--weights", default=None, choices=("random", "real"),
                         help="random: weights drawn for the model's config (timing does not depend on them); "
                              "real: the model's own weights (from_pretrained) (default: params)")
    importlib.import_module(STAGES["kernels profile --batched"][0]).add_arguments(profile)
    _add_stage(kernels, "kernels fit")
    serving = sub.add_parser("serving", help="batched serving: the continuous-batching simulation and its replay check",
                             description="Batched serving: `serving simulate` runs the corpora's edits through a "
                                         "continuous-batching scheduler priced by the step-cost model; `serving replay` "
                                         "times a sample of its steps as real batched forwards.")
    serving_commands = serving.add_subparsers(dest="scommand", metavar="{simulate,replay}", required=True)
    _add_stage(serving_commands, "serving simulate")
    _add_stage(serving_commands, "serving replay")
    bench = sub.add_parser("bench", help="benchmarks outside the pipeline",
                           description="Benchmarks that are not pipeline stages (no dvc.yaml stage); each writes "
                                       "its own report.").add_subparsers(dest="bcommand", metavar="{throughput,busy,mask}",
                                                                         required=True)
    throughput = bench.add_parser("throughput", help=TOOLS["bench throughput"][1],
                                  description="Throughput of the per-case stages: " + TOOLS["bench throughput"][1]
                                              + f". It {TOOL_READS_WRITES['bench throughput']}.")
    throughput.set_defaults(stage="bench throughput", module=TOOLS["bench throughput"][0])
    throughput.add_argument("--cases", type=int, default=None,
                            help="synthetic cases (default: params bench.cases, 20,000 as shipped)")
    throughput.add_argument("--jobs", default=None, help="worker counts to time, comma-separated (default: params "
                                                          "bench.jobs, 1,2 as shipped)")
    throughput.add_argument("--backend", default=None,
                            help="joblib backends, comma-separated: 1 worker once, more workers with each "
                                 "(default: params bench.backends)")
    throughput.add_argument("--memory-sizes", default=None, dest="memory_sizes",
                            help="case counts whose peak memory is measured in a fresh process, comma-separated, "
                                 "or none (default: params bench.memory_sizes)")
    throughput.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
    throughput.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides_after",
                            default=argparse.SUPPRESS, help=SET_HELP)
    throughput.add_argument("--out", default=argparse.SUPPRESS, dest="bench_out", metavar="DIR",
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
    _add_compare(sub)
    for command in MAINTENANCE:
        _add_maintenance(sub, command)
    return parser


def _add_maintenance(sub, command: str) -> argparse.ArgumentParser:
    module, text = MAINTENANCE[command]
    parser = sub.add_parser(command, help=text, description=text[0].upper() + text[1:] + ".")
    parser.set_defaults(stage=command, module=module, maintenance=True)
    parser.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
    owner = importlib.import_module(module)
    if getattr(owner, "ACCEPTS_SET", False):
        parser.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides_after",
                            default=argparse.SUPPRESS, help=SET_HELP)
    owner.add_arguments(parser)
    return parser


def _add_compare(sub) -> None:
    from analysis.tools.compare import add_arguments

    compare = sub.add_parser(
        "compare", help=TOOLS["compare"][1],
        description="Compare two runs: " + TOOLS["compare"][1] + ". A run is a folder (its data/ outputs, else its "
                    "committed per-case tables under reports/percase/), a git revision or a `dvc exp` name (its "
                    "committed reports/percase/ tables, else its data/ outputs from the dvc cache; no checkout). It "
                    "reads those per-case tables and params files of A and B and params `compare` and `headline`; "
                    "it writes the comparison to the terminal and to DIR/compare.md, compare.html and compare.json. "
                    "See docs/compare.md.")
    compare.set_defaults(stage="compare", module=TOOLS["compare"][0])
    add_arguments(compare)
    compare.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
    compare.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides_after",
                         default=argparse.SUPPRESS, help=SET_HELP)


def _add_tool(sub, command: str) -> argparse.ArgumentParser:
    module, text = TOOLS[command]
    description = text[0].upper() + text[1:] + f". It {TOOL_READS_WRITES[command]}."
    parser = sub.add_parser(command.split()[-1], help=text, description=description)
    parser.set_defaults(stage=command, module=module)
    parser.add_argument("--params", default=argparse.SUPPRESS, help="params file (default: params.yaml)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides_after", default=argparse.SUPPRESS,
                        help=SET_HELP)
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
    module = importlib.import_module(args.module)
    if getattr(args, "overrides", []) and not getattr(module, "APPLIES_OVERRIDES", False):  # else ignored (L7)
        print(f"copydecode {args.stage}: error: --set is not read here (`{args.stage}` does not apply overrides: it "
              "would be ignored); drop it, or give a params file with --params", file=sys.stderr)
        return 2
    try:
        return module.command(args)
    except CopyDecodeError as exc:
        print(f"copydecode {args.stage}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"copydecode {args.stage}: interrupted", file=sys.stderr)
        return 130


def interrupted_workers(exc: BaseException) -> bool:
    """Ctrl-C reaches the parallel workers too: joblib then raises TerminatedWorkerError (exit codes
    {SIGINT(-2)}) in place of KeyboardInterrupt; it is the same interrupt (N12)."""
    return type(exc).__name__ == "TerminatedWorkerError" and "SIGINT" in str(exc)


def interruptible() -> None:
    """Ctrl-C or `kill -INT PID` on the main process interrupts the stage (exit 130, finished outputs
    kept), also when it was started in the background of a script: a shell without job control starts
    such a process with SIGINT ignored, and Python keeps an inherited SIG_IGN, so the signal was lost
    and the stage ran to the end (N12). The parallel workers need no handler: the parent stops them."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


ERROR_CHARS = 4000  # of one error message: a value quoted whole (a huge --set) would bury the reason (M11)


def error_text(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= ERROR_CHARS else f"{text[:ERROR_CHARS]}... (message cut at {ERROR_CHARS:,} characters)"


def os_error_text(exc: BaseException) -> str | None:
    """The named error for a path the file system cannot hold (L2: a component over 255 bytes; L3: a name
    that is not UTF-8, which Python holds as surrogates), else None (a real crash: raised)."""
    import errno

    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        shown = name if len(name) <= 120 else f"{name[:60]}...{name[-40:]} ({len(name.encode('utf-8', 'replace')):,} bytes)"
        return (f"a path is too long for the file system ({shown}): one name may hold at most 255 bytes; "
                "use a shorter file name, --name, or setting")
    if isinstance(exc, UnicodeEncodeError) and "surrogates not allowed" in str(exc):
        return ("a path is not valid UTF-8 (a file or folder name, or --out, made of other bytes): "
                f"{exc.object[max(exc.start - 20, 0):exc.end + 20].encode('utf-8', 'backslashreplace').decode()!r}; "
                "rename it to UTF-8")
    return None


def _discard(new_root: Path | None) -> None:
    if new_root is not None:
        from analysis.pipeline.oneoff import discard_unused_root

        discard_unused_root(new_root)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "batched", False):  # `kernels profile --batched` is its own stage
        args.stage = "kernels profile --batched"
        args.module = STAGES[args.stage][0]
    interruptible()
    if getattr(args, "maintenance", False):
        return run_maintenance(args)
    if args.stage == "compare":  # it writes no run root: a top-level --out is its output folder, like `compare --out`
        if getattr(args, "compare_out", None) is None:
            args.compare_out = args.out
        root = None
    elif args.stage in OWN_OUT:  # its own --out names its output, kept as `out` for the stage
        if args.out is not None:
            print(f"copydecode {args.stage}: error: --out before the subcommand (a one-off output root) is not "
                  f"supported here; `{args.stage} --out` {OWN_OUT[args.stage]}", file=sys.stderr)
            return 2
        args.out = getattr(args, "raw_out", None)
        root = None
    else:
        root = args.out
    overrides = [*getattr(args, "overrides", []), *getattr(args, "overrides_after", [])]
    # a one-off root this run creates is removed again if the stage fails before writing an output (N17)
    new_root = Path(root).absolute() if root is not None and not Path(root).exists() else None
    try:
        cfg = Config.load(args.params)
        if overrides:
            cfg = Config(apply_overrides(cfg.params, overrides), cfg.path)
            print(f"copydecode {args.stage}: this run overrides {', '.join(overrides)} (not written to {cfg.path})",
                  file=sys.stderr)
        if root is not None:
            from analysis.pipeline.oneoff import enter_out_root

            cfg = enter_out_root(root, cfg, args)
        if args.stage in CHART_STAGES:
            from analysis.pipeline.io import check_address_space

            check_address_space()  # before the stage's work, not at its first chart
        check_output_root()  # no symlinked output folder, no link out of the root (H3), before the lock
        with run_lock(args.stage):  # one run per output root; a killed run's leftovers are finished or swept
            for stage in finish_pending():
                print(f"copydecode: completed the output set of an interrupted `{stage}` run", file=sys.stderr)
            sweep_temporaries()
            module = importlib.import_module(args.module)
            with output_set(args.stage) if args.stage in OUTPUT_SETS else nullcontext([]) as written:
                result = run_stage(module, args, cfg)
            if args.stage in CORPUS_SETS:  # which corpus these outputs were built from (headline, reports)
                record_corpus(args.stage, written)
    except CopyDecodeError as exc:
        print(f"copydecode {args.stage}: error: {error_text(exc)}", file=sys.stderr)
        _discard(new_root)
        return 2
    except KeyboardInterrupt:
        print(f"copydecode {args.stage}: interrupted; finished outputs and checkpoints are kept", file=sys.stderr)
        return 130
    except Exception as exc:
        if interrupted_workers(exc):
            print(f"copydecode {args.stage}: interrupted; finished outputs and checkpoints are kept", file=sys.stderr)
            return 130
        named = os_error_text(exc)
        _discard(new_root)  # a crash leaves no new empty --out folder either (N17)
        if named is None:
            raise
        print(f"copydecode {args.stage}: error: {named}", file=sys.stderr)
        return 2
    if result is not None:
        print("\n".join(summary_lines(args.stage, result)))
    return 0


# result keys a person acts on next: printed in full beside the one-line summary
NEXT_STEP_KEYS = {"add_to_kernels_fit_raw": "add to params kernels.fit.raw"}


def summary_lines(stage: str, result) -> list[str]:
    """What a person reads after a stage: one line (its short figures and where the full summary went: the
    result written to data/summaries/<stage>.json) and, for a key to act on (NEXT_STEP_KEYS), one line more.
    A stage's JSON summary used to be dumped on stdout: ~1,400 of 1,600 lines of a `dvc repro` log."""
    from analysis.layout import SUMMARIES
    from analysis.pipeline.io import write_json

    path = SUMMARIES / f"{stage.replace(' ', '_')}.json"
    write_json(result if isinstance(result, dict) else {"result": result}, path)
    items = result.items() if isinstance(result, dict) else []
    short = [(k, v) for k, v in items if isinstance(v, (int, float, str)) and not isinstance(v, bool)
             and len(str(v)) <= 40 and k not in NEXT_STEP_KEYS]
    shown = ", ".join(f"{k.replace('_', ' ')} {_figure(v)}" for k, v in short[:5])
    lines = [f"copydecode {stage}: done{'; ' + shown if shown else ''} (summary: {path})"]
    lines += [f"{label}: {json.dumps(result[key], default=str)}" for key, label in NEXT_STEP_KEYS.items()
              if isinstance(result, dict) and key in result]
    return lines


def _figure(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
