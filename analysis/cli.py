"""`copydecode`: one subcommand per pipeline stage (each is one dvc.yaml stage)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from analysis.errors import CopyDecodeError
from analysis.params import DEFAULT_PARAMS, load_params


def _analysis(name: str) -> Callable:
    def run(args):
        from analysis import stages

        return getattr(stages, name)(load_params(args.params))

    return run


def _results(name: str) -> Callable:
    def run(args):
        from analysis import results

        return getattr(results, name)(load_params(args.params))

    return run


def _reports(args):
    from analysis.reports import run_reports

    return run_reports(load_params(args.params))


def _e2e(args):
    from kernels_profile.e2e import run_e2e

    return run_e2e(load_params(args.params), args)


def _kernels(name: str) -> Callable:
    def run(args):
        # torch is imported only by the commands that run a model
        from kernels_profile import stages

        return getattr(stages, name)(load_params(args.params), args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="copydecode", description=__doc__)
    parser.add_argument("--params", default=str(DEFAULT_PARAMS), help="params file (default: params.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    for command, func, text in (
        ("corpora", _analysis("run_corpora"), "build data/corpora/cases.parquet"),
        ("programs", _analysis("run_programs"), "write line- and token-level oracle programs"),
        ("roundtrip", _analysis("run_roundtrip"), "check resolve(oracle) == target for every case"),
        ("spans", _analysis("run_spans"), "span table, coverage with bootstrap CIs, histograms"),
        ("bounds", _results("run_bounds"), "closed-form speedup bounds with bootstrap CIs"),
        ("perturb", _results("run_perturb"), "EM under off-by-one span noise"),
        ("formats", _results("run_formats"), "edit-format token cost and token-boundary splices"),
        ("reports", _reports, "render the papermill reports into reports/ (html, notebooks, index)"),
    ):
        sub.add_parser(command, help=text).set_defaults(func=func)
    kernels = sub.add_parser("kernels", help="model timing: profile and fit").add_subparsers(dest="kcommand", required=True)
    profile = kernels.add_parser("profile", help="time AR steps vs one parallel prefill")
    profile.add_argument("--preset", default=None, help="a preset from params kernels.presets (e.g. paper-gpu)")
    profile.add_argument("--out", default=None, help="raw timings parquet (default: the preset's or params')")
    profile.set_defaults(func=_kernels("run_profile"))
    fit = kernels.add_parser("fit", help="fit the latency model to the raw timings")
    fit.set_defaults(func=_kernels("run_fit"))
    e2e = sub.add_parser("e2e", help="measured end to end: AR vs PLD vs Copy-as-Decode, constrained decoding")
    e2e.set_defaults(func=_e2e)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.func(args)
    except CopyDecodeError as exc:
        print(f"copydecode {args.command}: error: {exc}", file=sys.stderr)
        return 2
    if result is not None:
        print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
