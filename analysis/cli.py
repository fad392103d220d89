"""`copydecode`: one subcommand per pipeline stage (each is one dvc.yaml stage).

STAGES maps each subcommand to the module that runs it; a stage module's `run(cfg, args)` returns
its metrics. Modules are imported on use, so torch is loaded only by the commands that run a model.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from analysis.config import Config
from analysis.errors import CopyDecodeError
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


def _add_stage(sub, command: str) -> argparse.ArgumentParser:
    module, text = STAGES[command]
    parser = sub.add_parser(command.split()[-1], help=text)
    parser.set_defaults(stage=command, module=module)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copydecode", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(DEFAULT_PARAMS), help="params file (default: params.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in STAGES:
        if " " not in command:
            stage = _add_stage(sub, command)
            if command == "corpora":
                stage.add_argument("--pairs", action="append", metavar="FILE",
                                   help="also read this edit-pairs file (JSON Lines or Parquet; fields source, target)")
                stage.add_argument("--repo", action="append", metavar="PATH",
                                   help="also mine this git repository or bundle for one-file commits")
            if command == "decode":
                stage.add_argument("--case-id", dest="case_id", help="the case to decode (default: params decode.case_id)")
                stage.add_argument("--model", help="the model (default: params decode.model)")
                stage.add_argument("--framing", help="the framing of a multi-framing corpus (default: params)")
            if command == "pilot":
                stage.add_argument("--preset", default=None, help="a preset from params pilot.presets (e.g. pilot-gpu)")
    kernels = sub.add_parser("kernels", help="model timing: profile and fit").add_subparsers(dest="kcommand", required=True)
    profile = _add_stage(kernels, "kernels profile")
    profile.add_argument("--preset", default=None, help="a preset from params kernels.presets (e.g. paper-gpu)")
    profile.add_argument("--out", default=None, help="raw timings parquet (default: the preset's or params')")
    _add_stage(kernels, "kernels fit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = Config.load(args.params)
        result = importlib.import_module(args.module).run(cfg, args)
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
