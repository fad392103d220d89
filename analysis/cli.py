"""`copydecode`: one subcommand per pipeline stage (each is one dvc.yaml stage), plus the tools.

`analysis.pipeline.commands` lists every command and the module that runs it (STAGES, TOOLS,
MAINTENANCE); each module owns its help text (`HELP`, `READS_WRITES`) and its options
(`add_arguments(parser)`). A stage's or benchmark's `run(settings)` returns its metrics, and the CLI builds
those settings from the params and the module's options (`settings(params, **options)`); a maintenance
command runs `command(args) -> exit status`. This is the project's one console script and its one
`__main__`. No command module imports torch at module level: torch is loaded only by the commands that run
a model. `--params`, `--out` and `--set KEY=VALUE` may come before or after the subcommand; every command
takes `--params` and `--set`, and one that reads no params (its module's `READS_PARAMS = False`) refuses them
with an error that says so rather than ignoring them; `--version` prints the installed version.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import tomllib
from contextlib import nullcontext
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed
from pathlib import Path

from analysis.errors import CopyDecodeError
from analysis.pipeline.commands import (CHART_STAGES, CORPUS_SETS, GROUPS, MAINTENANCE, OUTPUT_SETS, STAGES, TOOLS,
                                        settings_options)
from analysis.pipeline.config import Config
from analysis.pipeline.confine import check_output_root
from analysis.pipeline.console import (error_text, interrupted_workers, interruptible, os_error_text,
                                       summary_lines)
from analysis.pipeline.digest import record_corpus
from analysis.pipeline.io import (check_address_space, declared_outputs, finish_pending, output_set, recorded_writes,
                                  run_lock, sweep_temporaries)
from analysis.pipeline.oneoff import discard_unused_root, enter_out_root, record_params
from analysis.pipeline.params import DEFAULT_PARAMS, SHOWN_CHARS, apply_overrides, did_you_mean
from analysis.pipeline.safepath import safe_imports

SET_HELP = ("override one setting for this run only, e.g. --set kernel.latency_form=quadratic (VALUE is YAML: "
            "--set 'perturb.rates=[0.0, 1.0]'); repeatable; params.yaml is not written. The key must exist in the "
            "params file; the stage validates the value")

OUT_HELP = ("a one-off output root: data/ and reports/ are written under DIR instead of the current folder "
            "(paths in the params file and on the command line are still read from where you are)")


def _common(parser: argparse.ArgumentParser, top: bool, out: bool = True, overrides: bool = True) -> None:
    """--params, --set and --out, accepted before the subcommand (top) and after it (the subcommand's value
    wins; --set values of both places apply, the later last)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    parser.add_argument("--params", default=default(str(DEFAULT_PARAMS)), help="params file (default: params.yaml)")
    if overrides:
        parser.add_argument("--set", action="append", metavar="KEY=VALUE", dest="overrides" if top else "overrides_after",
                            default=[] if top else argparse.SUPPRESS, help=SET_HELP)
    if out:
        parser.add_argument("--out", default=default(None), metavar="DIR", help=OUT_HELP)


def _add_command(sub, command: str, module_name: str, kind: str) -> argparse.ArgumentParser:
    """The subcommand's parser, from its module: help, description, the common options, its own options."""
    module = importlib.import_module(module_name)
    text = f"{module.HELP}. It {module.READS_WRITES}" if kind == "maintenance" else module.HELP
    description = getattr(module, "DESCRIPTION", None) or (
        text[0].upper() + text[1:] + ("." if kind == "maintenance" else f". It {module.READS_WRITES}."))
    parser = sub.add_parser(command.split()[-1], help=text, description=description)
    parser.set_defaults(stage=command, module=module_name, **({"maintenance": True} if kind == "maintenance" else {}))
    # a stage's --out is a one-off output root, unless its own --out names its output (OWN_OUT); every command
    # takes --params and --set: a command that reads no params refuses them by name (READS_PARAMS, main)
    _common(parser, top=False, out=kind == "stage" and not hasattr(module, "OWN_OUT"))
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser)
    return parser


def version() -> str:
    """The installed distribution's version (pyproject.toml's when run from a checkout that is not installed)."""
    try:
        return installed("copydecode")
    except PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"] if pyproject.is_file() else "unknown"


class Parser(argparse.ArgumentParser):
    """argparse with a suggestion for a mistyped stage or subcommand (`corpra`: did you mean 'corpora'?)."""

    command_parsers: dict[str, argparse.ArgumentParser] = {}  # build_parser's: each command's own parser

    def error(self, message: str):
        match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if match:
            message += did_you_mean(match.group(1), re.findall(r"'([^']*)'", match.group(2)))
        super().error(message)

    def parse_args(self, args=None, namespace=None):
        """An unknown option is reported by the command it was given to, with that command's usage and the
        option it is closest to (`bounds --outt`: did you mean '--out'?), not by the top-level usage."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self.command_parsers.get(getattr(parsed, "stage", None), self)
            options = [o for action in command._actions for o in action.option_strings]
            first = next((e.split("=", 1)[0] for e in extras if e.startswith("-")), extras[0])
            command.error(f"unrecognized arguments: {' '.join(extras)}{did_you_mean(first, options)}")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    """The console script's parser: every command of the registry, in its order; a two-word command under
    its GROUPS entry; `kernels profile --batched` as a flag its module adds to `kernels profile`."""
    parser = Parser(
        prog="copydecode", description=__doc__.splitlines()[0],
        epilog="Each stage reads params.yaml (--params FILE) and the outputs of the stages before it, and writes "
               "under data/ and reports/ (--out DIR: under DIR); `copydecode STAGE --help` lists them.")
    parser.add_argument("--version", action="version", version=f"copydecode {version()}")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="STAGE", required=True,
                                title="stages", description="run `copydecode STAGE --help` for what a stage reads and writes")
    kinds = {**{c: "stage" for c in STAGES}, **{c: "tool" for c in TOOLS}, **{c: "maintenance" for c in MAINTENANCE}}
    modules = {**STAGES, **TOOLS, **MAINTENANCE}
    groups, parsers = {}, {}
    for command, kind in kinds.items():
        words = command.split()
        if words[-1].startswith("--"):  # a variant: its flag and what it reads and writes join the command's parser
            base, variant = parsers[" ".join(words[:-1])], importlib.import_module(modules[command])
            base.description += f" With {words[-1]} it {variant.READS_WRITES}."
            variant.add_arguments(base)
            continue
        if len(words) > 1 and words[0] not in groups:
            children = [c.split()[1] for c in kinds if c.split()[0] == words[0] and not c.split()[-1].startswith("--")]
            help_, description = GROUPS[words[0]]
            groups[words[0]] = sub.add_parser(words[0], help=help_, description=description).add_subparsers(
                dest=f"{words[0][0]}command", metavar="{" + ",".join(children) + "}", required=True)
        parsers[command] = _add_command(groups[words[0]] if len(words) > 1 else sub, command, modules[command], kind)
    parser.command_parsers = parsers
    return parser


def _variant(args: argparse.Namespace) -> None:
    """`kernels profile --batched` is its own stage: the variant whose flag is set."""
    for command, module in STAGES.items():
        base, _, flag = command.rpartition(" --")
        if flag and base == args.stage and getattr(args, flag.replace("-", "_"), False):
            args.stage, args.module = command, module


def stage_settings(module, args: argparse.Namespace, cfg: Config):
    """The settings of a stage or benchmark, built from the params and its command-line options."""
    options = {name: cfg.path if name == "params_path" else getattr(args, name, None)
               for name in settings_options(module)}
    return module.settings(cfg.params, **options)


def run_stage(module, args: argparse.Namespace, cfg: Config):
    """The stage's settings built here, from the params and its command-line options, then its run."""
    return module.run(stage_settings(module, args, cfg))


def overrides_text(overrides: list[str]) -> str:
    """The --set values for the run's echo, each cut as error messages cut a quoted value (a 40 KB value
    printed a 40 KB line)."""
    return ", ".join(o if len(o) <= SHOWN_CHARS else f"{o[:SHOWN_CHARS]}... ({len(o):,} characters)" for o in overrides)


def _overrides(args: argparse.Namespace) -> list[str]:
    """--set values given before and after the subcommand, the later last."""
    return [*getattr(args, "overrides", []), *getattr(args, "overrides_after", [])]


def params_refusal(args: argparse.Namespace, module) -> str | None:
    """The named error for --set or --params on a command that reads no params (its module's READS_PARAMS is
    False): either would be ignored. None where the command reads params or neither was given."""
    if getattr(module, "READS_PARAMS", True):
        return None
    given = [*(["--set"] if _overrides(args) else []),
             *(["--params"] if Path(getattr(args, "params", DEFAULT_PARAMS)) != Path(DEFAULT_PARAMS) else [])]
    if not given:
        return None
    return (f"`{args.stage}` reads no params (it {module.READS_WRITES}): {' and '.join(given)} would be ignored; "
            "drop " + ("them" if len(given) > 1 else "it"))


def run_maintenance(args: argparse.Namespace) -> int:
    """A MAINTENANCE command: its module's `command(args)`, a CopyDecodeError reported by name (exit 2). A command
    that reads params (READS_PARAMS) finds them in `args.config`: the --params file with every --set applied."""
    if args.out is not None:
        print(f"copydecode {args.stage}: error: --out (a one-off output root) is not supported here", file=sys.stderr)
        return 2
    module = importlib.import_module(args.module)
    refused = params_refusal(args, module)
    if refused is not None:
        print(f"copydecode {args.stage}: error: {refused}", file=sys.stderr)
        return 2
    try:
        if getattr(module, "READS_PARAMS", True):
            args.config = Config.load(args.params)
            if _overrides(args):
                args.config = Config(apply_overrides(args.config.params, _overrides(args)), args.config.path)
                print(f"copydecode {args.stage}: this run overrides {overrides_text(_overrides(args))} (not written to "
                      f"{args.config.path})", file=sys.stderr)
        return module.command(args)
    except CopyDecodeError as exc:
        print(f"copydecode {args.stage}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"copydecode {args.stage}: interrupted", file=sys.stderr)
        return 130


def _exists(path: str) -> bool:
    """Whether `path` exists; a name the file system cannot hold (a component over 255 bytes) does not, and
    `enter_out_root` names it."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def _discard(new_root: Path | None) -> None:
    if new_root is not None:
        discard_unused_root(new_root)


def main(argv: list[str] | None = None) -> int:
    # first thing: neither this process nor any it starts (workers, clusters, report kernels) imports from
    # the working folder, which a one-off run moves into (analysis.pipeline.safepath)
    with safe_imports():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    _variant(args)
    interruptible()
    if getattr(args, "maintenance", False):
        return run_maintenance(args)
    refused = params_refusal(args, importlib.import_module(args.module))
    if refused is not None:
        print(f"copydecode {args.stage}: error: {refused}", file=sys.stderr)
        return 2
    own_out = getattr(importlib.import_module(args.module), "OWN_OUT", None)
    if args.stage == "compare":  # it writes no run root: a top-level --out is its output folder, like `compare --out`
        if getattr(args, "compare_out", None) is None:
            args.compare_out = args.out
        root = None
    elif own_out is not None:  # its own --out names its output, kept as `out` for the stage
        if args.out is not None:
            print(f"copydecode {args.stage}: error: --out before the subcommand (a one-off output root) is not "
                  f"supported here; `{args.stage} --out` {own_out}", file=sys.stderr)
            return 2
        args.out = getattr(args, "raw_out", None)
        root = None
    else:
        root = args.out
    overrides = _overrides(args)
    # a one-off root this run creates is removed again if the stage fails before writing an output
    new_root = Path(root).absolute() if root is not None and not _exists(root) else None
    try:
        # a command that reads no params runs anywhere: no params.yaml is needed where it is run from
        reads_params = getattr(importlib.import_module(args.module), "READS_PARAMS", True)
        cfg = Config.load(args.params) if reads_params else Config({}, Path(args.params))
        if overrides:
            cfg = Config(apply_overrides(cfg.params, overrides), cfg.path)
            print(f"copydecode {args.stage}: this run overrides {overrides_text(overrides)} (not written to {cfg.path})",
                  file=sys.stderr)
        if root is not None:
            effective = cfg.params
            cfg = enter_out_root(root, cfg, args)
            changed = record_params(effective, args.stage, overrides)
            if changed:
                print(f"copydecode {args.stage}: warning: this run's params differ from the ones an earlier run in "
                      f"{root} recorded ({', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}); outputs already "
                      "there were built from the earlier params; give each setting its own --out folder to compare "
                      "them (copydecode compare DIR1 DIR2)", file=sys.stderr)
        if args.stage in CHART_STAGES:
            check_address_space()  # before the stage's work, not at its first chart
        check_output_root()  # no symlinked output folder, no link out of the root, before the lock
        with run_lock(args.stage):  # one run per output root; a killed run's leftovers are finished or swept
            for stage in finish_pending():
                print(f"copydecode: completed the output set of an interrupted `{stage}` run", file=sys.stderr)
            sweep_temporaries()
            module = importlib.import_module(args.module)
            with recorded_writes() as wrote, output_set(args.stage) if args.stage in OUTPUT_SETS else nullcontext():
                result = run_stage(module, args, cfg)
            written = declared_outputs(args.stage, wrote)
            if args.stage in CORPUS_SETS and written:  # which corpus these outputs were built from (headline, reports)
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
        _discard(new_root)  # a crash leaves no new empty --out folder either
        if named is None:
            raise
        print(f"copydecode {args.stage}: error: {named}", file=sys.stderr)
        return 2
    if result is not None:
        print("\n".join(summary_lines(args.stage, result, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
