"""Every `copydecode` command and the module that runs it: the registry the console script
(`analysis.cli`) builds its parser from and `copydecode depgraph` maps dvc.yaml's commands with.

Names only: no command module is imported here. Each module owns the rest (vLLM's `add_cli_args`/`main`):
`HELP` (its line in `copydecode --help`), `READS_WRITES` (what `copydecode COMMAND --help` says it reads
and writes), optionally `DESCRIPTION` (a whole --help text of its own), `add_arguments(parser)` (its own
options), `OWN_OUT` (its own `--out` names an output, so a one-off output root is refused) and
`READS_PARAMS = False` (it reads no params: `--params` and `--set`, which every command takes, are refused by
name instead of being ignored).

- A stage or benchmark builds typed settings from the params and its options, `settings(params, **options)`
  (the options are the parameters after `params`: `settings_options`), and runs on them alone,
  `run(settings) -> metrics`.
- A maintenance command runs `command(args) -> exit status`; one that reads params finds them in `args.config`
  (the `--params` file with every `--set` applied, by the CLI).

A new stage is one entry in STAGES (and, where it applies, in OUTPUT_SETS, CORPUS_SETS, CHART_STAGES).
A command of two words is a subcommand of a GROUPS entry; `kernels profile --batched` is a variant of
`kernels profile` (its module adds the flag to that parser).
"""

from __future__ import annotations

import inspect

# pipeline stages (each one dvc.yaml stage): command -> module
STAGES: dict[str, str] = {
    "corpora": "analysis.stages.corpora",
    "programs": "analysis.stages.programs",
    "roundtrip": "analysis.stages.roundtrip",
    "spans": "analysis.stages.spans",
    "bounds": "analysis.stages.bounds",
    "optimal": "analysis.stages.optimal",
    "perturb": "analysis.stages.perturb",
    "formats": "analysis.stages.formats",
    "forcing": "analysis.stages.forcing",
    "rivals": "analysis.stages.rivals",
    "headline": "analysis.stages.headline",
    "percase": "analysis.stages.percase",
    "reports": "analysis.stages.reports",
    "decode": "kernels_profile.stages.decode",
    "e2e": "kernels_profile.stages.e2e",
    "pilot": "kernels_profile.stages.pilot",
    "kernels profile": "kernels_profile.stages.profile",
    "kernels fit": "kernels_profile.stages.fit",
    "kernels profile --batched": "kernels_profile.stages.batched",
    "serving simulate": "analysis.stages.serving",
    "serving replay": "kernels_profile.stages.replay",
    "engine summary": "analysis.stages.engine",
}

# benchmarks and tools on the settings layer that are not pipeline stages (no dvc.yaml stage)
TOOLS: dict[str, str] = {
    "bench throughput": "analysis.tools.bench",
    "bench busy": "kernels_profile.tools.bench_busy",
    "compare": "analysis.tools.compare",
    "bench mask": "kernels_profile.tools.bench_mask",
}

# maintenance commands (no dvc.yaml stage): modules with add_arguments(parser) and command(args)
MAINTENANCE: dict[str, str] = {
    "readme": "analysis.tools.readme",
    "moves": "analysis.tools.moves",
    "depgraph": "analysis.tools.depgraph",
    "grammar": "analysis.tools.grammar",
    "report": "analysis.tools.report",
    "experiments": "analysis.tools.experiments",
    "pilot-sweep": "kernels_profile.tools.pilot_sweep",
    "engine setup": "kernels_profile.stages.engine_setup",
    "engine run": "kernels_profile.stages.engine_run",
}

# the first word of a two-word command: (help, description)
GROUPS: dict[str, tuple[str, str]] = {
    "kernels": ("model timing: profile and fit",
                "Model timing: `kernels profile` times AR steps against one parallel prefill; `kernels fit` fits "
                "the latency model to those timings."),
    "serving": ("batched serving: the continuous-batching simulation and its replay check",
                "Batched serving: `serving simulate` runs the corpora's edits through a continuous-batching "
                "scheduler priced by the step-cost model; `serving replay` times a sample of its steps as real "
                "batched forwards."),
    "engine": ("a real serving engine (vLLM) as an external process: setup, a measured run, its summary",
               "A real serving engine: `engine setup` makes vLLM's own venv and model folder, `engine run` drives it "
               "over the corpora's requests (AR, prompt lookup, suffix decoding, Copy-as-Decode emulated) and writes a "
               "run folder, `engine summary` reads the frozen run and checks the simulator against it (docs/engine.md)."),
    "bench": ("benchmarks outside the pipeline",
              "Benchmarks that are not pipeline stages (no dvc.yaml stage); each writes its own report."),
}

# Stages whose outputs are replaced as one set (analysis.pipeline.io.output_set). Not roundtrip (its failure
# report is written before it exits non-zero), reports (papermill writes its own files) or the model
# stages (their checkpoints must land as they finish, for resuming; `serving replay` writes its tables as one
# set itself, after its checkpoints).
OUTPUT_SETS = ("corpora", "programs", "spans", "bounds", "optimal", "perturb", "formats", "forcing", "rivals", "percase",
               "kernels fit", "serving simulate")
# Stages whose corpus the CLI records (analysis.pipeline.digest.record_corpus) for headline's, reports' and the
# README's stale checks, from the declared outputs they wrote: every stage downstream of the cases table in
# dvc.yaml (tests/pipeline/test_stale_records.py walks it), but headline and reports, which judge them. The round
# trip records its own, beside its report, which it writes also when it fails.
CORPUS_SETS = ("corpora", "programs", "spans", "bounds", "optimal", "perturb", "formats", "forcing", "rivals", "percase",
               "serving simulate", "serving replay", "decode", "e2e", "pilot")
# stages that draw charts (vl-convert): refused up front under an address-space limit V8 cannot start in
CHART_STAGES = ("spans", "bounds", "perturb", "rivals", "kernels fit", "e2e", "pilot", "reports", "engine summary")


def settings_options(module) -> tuple[str, ...]:
    """The command-line options a stage or benchmark's settings take: `settings(params, **options)`'s
    parameters after `params` (`params_path` is the params file read, for the reports' provenance)."""
    return tuple(inspect.signature(module.settings).parameters)[1:]
