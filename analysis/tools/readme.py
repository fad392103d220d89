"""`copydecode readme`: the one step after `dvc repro` and outside it. It gathers each stage's untracked
run time (data/timings/<stage>.json) into the tracked reports/timings.json, then rewrites the README's
Results block from the stage outputs (analysis.present.readme renders it). README.md and
reports/timings.json are tracked source files that no stage declares or writes; see that module's
docstring for why.

    copydecode readme [ROOT]             # gather ROOT/data/timings into ROOT/reports/timings.json,
                                         # then rewrite the block in ROOT/README.md (default ROOT: .)
    copydecode readme --check            # maintainers: is the block up to date with this workspace? (writes nothing)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import ParamsError, StaleInputError
from analysis.layout import TIMINGS, TIMINGS_REPORT
from analysis.pipeline.io import dvc_stage_names, write_json, write_text
from analysis.present.index import stale_pages_reasons
from analysis.present.readme import END, README, START, results_block, stale_lines


def write_readme_results(root: Path = Path(".")) -> Path:
    """Rewrite the README's results block from the stage outputs (the rest of the README is kept); refused
    while a stage's outputs were built from another cases table than the one on disk (its corpus record)."""
    stale = stale_pages_reasons(Path(root))
    if stale:  # the block would quote figures of two corpora side by side
        raise StaleInputError(f"the Results block reads outputs built from another corpus: {'; '.join(stale.values())}")
    path = Path(root) / README
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamsError(f"cannot read {path}: {exc}") from exc
    start = text.find(START)
    end = text.find(END)
    if start < 0 or end < start:
        raise ParamsError(f"{path} has no {START} ... {END} block to fill")
    tail = text[end + len(END):]
    updated = text[:start] + results_block(Path(root)) + tail.removeprefix("\n")
    if updated != text:
        write_text(updated, path)
    return path


@dataclass(frozen=True)
class RunTimes:
    """The run-time files under data/timings: each dvc.yaml stage's, and the one-off runs' (a preset, an own-model
    profile: not stages, so never in the README's pipeline time)."""

    stages: dict[str, dict]
    missing: tuple[str, ...]   # dvc.yaml stages with no run time here
    one_off: tuple[str, ...]


def run_times(root: Path = Path(".")) -> RunTimes:
    root = Path(root)
    found = {p.stem: p for p in sorted((root / TIMINGS).glob("*.json"))}
    stages = dvc_stage_names()
    return RunTimes({s: json.loads(found[s].read_text()) for s in stages if s in found},
                    tuple(s for s in stages if s not in found), tuple(n for n in found if n not in stages))


def gather_timings(root: Path = Path(".")) -> Path | None:
    """Copy each stage's untracked run time (data/timings/<stage>.json) into the committed
    reports/timings.json that the block reads; None (and nothing written) when no stage has run here.
    Refused, naming them, when some stages have no run time: the block would publish part of a pipeline's
    time as the whole (an ad-hoc run of a few stages, not a `dvc repro`)."""
    root = Path(root)
    times = run_times(root)
    if not times.stages:
        return None
    if times.missing:
        raise ParamsError(f"no run time under {root / TIMINGS} for {len(times.missing)} of "
                          f"{len(times.stages) + len(times.missing)} stages ({', '.join(times.missing)}): the README's "
                          "stage-time line would publish part of the pipeline as its whole time; run `dvc repro` (or "
                          f"those stages) first, or pass --keep-timings to write the block with {TIMINGS_REPORT} "
                          "as it is")
    write_json(times.stages, root / TIMINGS_REPORT)
    return root / TIMINGS_REPORT


# `copydecode readme`: its help line and what it reads and writes (the CLI's --help)
HELP = ("after `dvc repro`: gather reports/timings.json, then rewrite README.md's Results block (--check: list its "
        "stale lines, write nothing)")
READS_WRITES = "reads data/timings and the committed stage outputs; it writes reports/timings.json and README.md"
READS_PARAMS = False  # the Results block quotes the outputs, which record their own settings: --set is refused


def add_arguments(parser) -> None:
    """`copydecode readme`'s options."""
    parser.add_argument("root", nargs="?", default=".", metavar="ROOT",
                        help="the workspace whose outputs and README.md are read (default: .)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing: list the block's lines that differ from ROOT's outputs (exit 1)")
    parser.add_argument("--keep-timings", dest="keep_timings", action="store_true",
                        help=f"leave {TIMINGS_REPORT} as it is (after running only some stages, whose run times "
                             "would make a partial total); without it, missing stage run times are an error")


def command(args) -> int:
    """The step after `dvc repro`: reports/timings.json, then the README's Results block.
    `--check` writes nothing: it lists the block's lines that differ from this workspace's outputs (exit 1).
    A CopyDecodeError propagates (the CLI reports it by name, exit 2)."""
    root = Path(args.root)
    if args.check:
        try:
            text = (root / README).read_text(encoding="utf-8")
        except OSError as exc:
            raise ParamsError(f"cannot read {root / README}: {exc}") from exc
        stale = stale_lines(text, root)
        print("\n".join(stale) if stale else f"{root / README}: the Results block matches this workspace's outputs")
        return 1 if stale else 0
    timings = None if args.keep_timings else gather_timings(root)
    readme = write_readme_results(root)
    kept = "--keep-timings" if args.keep_timings else f"no run times under {root / TIMINGS}"
    print(timings if timings else f"{root / TIMINGS_REPORT} kept ({kept})")
    one_off = run_times(root).one_off
    if timings and one_off:
        print(f"not gathered (one-off runs, not dvc.yaml stages): {', '.join(one_off)}")
    print(readme)
    return 0
