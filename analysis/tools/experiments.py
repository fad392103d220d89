"""`copydecode experiments`: the experiments of `dvc exp show` as a table that fits a terminal, with no regex.

`dvc exp show` prints one column per param and per metric key (the headline grid has about 200), so at 120
columns it is a row of "…"; `--only-changed` still keeps every moved figure and the dependency hashes, and
the README used to need a hand-written `--drop` regex per question. This view turns the grid
round: one line per param or figure, one column per experiment (the workspace, the baseline commit, each
experiment), and keeps by default only

- the params that differ between the experiments shown (DVC's `--only-changed`),
- the headline figures that differ, in their `pooled` column (the kernel rows, which have none, in their
  `n008`/`n512` columns): `--column KEY` shows other columns (`hepy`, `click`, ...), `--figure PREFIX` keeps
  the rows whose name starts so (`bound_fit`), `--all` the unchanged ones too.

When the experiments do not fit `--width` (default 120) side by side, they are printed in blocks, each with
the names column, so that no line is wider. DVC's own table (`dvc exp show --json`, `--csv`) has every column.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from analysis.errors import CopyDecodeError
from analysis.layout import HEADLINE_METRICS


class ExperimentsError(CopyDecodeError):
    """`dvc exp show` could not be read (not a DVC repository, a revision it does not know)."""


# `dvc exp show`'s columns that are no param or metric
_META = ("Experiment", "rev", "typ", "Created", "parent", "State", "Executor")
_DEFAULT_COLUMNS = ("pooled",)
_KERNEL_COLUMN = re.compile(r"n\d+")  # a kernel row's N columns (n008, n512): shown where a row has no `pooled`
NAME_WIDTH = 44  # the names column at most (a longer name is cut with "…")
VALUE_WIDTH = 16  # an experiment's column at most
GAP = "  "


@dataclass(frozen=True)
class Line:
    name: str                   # a param (`kernel.latency_form`) or a figure (`bound_fit_ideal_x:pooled`)
    values: tuple[Any, ...]     # one per experiment, None where it has none
    is_param: bool


def experiment_name(row: dict) -> str:
    """The column header of one `dvc exp show` row: the experiment's name, else its revision (`workspace`, the
    baseline branch or commit)."""
    return str(row.get("Experiment") or row.get("rev") or "?")


def _figure(key: str) -> tuple[str, str] | None:
    """(row, column) of a headline metric key (`metrics/bound_fit_ideal_x.json:pooled`), None for any other."""
    path, sep, column = key.rpartition(":")
    prefix = f"{HEADLINE_METRICS.as_posix()}/"
    if not sep or not path.startswith(prefix) or not path.endswith(".json"):
        return None
    return path[len(prefix):-len(".json")], column


def _changed(values: tuple[Any, ...]) -> bool:
    """Two experiments differ (one that has no value, queued or failed, changes nothing)."""
    return len({repr(v) for v in values if v is not None}) > 1


def lines(rows: list[dict], columns: tuple[str, ...] = (), figures: tuple[str, ...] = (),
          show_all: bool = False) -> list[Line]:
    """The params, then the headline figures, of `dvc exp show`'s rows (dvc.api.exp_show), one Line each: the
    changed ones (all with `show_all`); figures in `columns` (default: `pooled`, or a kernel row's N columns
    where it has no `pooled`), only rows whose name starts with one of `figures` when any is given."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in _META and k not in keys]
    by_row: dict[str, set[str]] = {}
    for key in keys:
        figure = _figure(key)
        if figure is not None:
            by_row.setdefault(figure[0], set()).add(figure[1])
    out: list[Line] = []
    for key in keys:
        values = tuple(row.get(key) for row in rows)
        if not (show_all or _changed(values)):
            continue
        figure = _figure(key)
        if figure is None:
            if ":" not in key:  # a param (`kernel.latency_form`); other files' metrics are not headline figures
                out.append(Line(key, values, True))
            continue
        name, column = figure
        if figures and not name.startswith(figures):
            continue
        if columns:
            wanted = column in columns
        else:
            wanted = column in _DEFAULT_COLUMNS or (
                _KERNEL_COLUMN.fullmatch(column) is not None and not set(_DEFAULT_COLUMNS) & by_row[name])
        if wanted:
            out.append(Line(f"{name}:{column}", values, False))
    return sorted(out, key=lambda line: (not line.is_param, line.name))


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def render(names: list[str], table: list[Line], width: int = 120) -> list[str]:
    """The lines, one column per experiment, in blocks of experiments so that no line is wider than `width`
    (each block repeats the names column). A blank line between the params and the figures."""
    if not table:
        return []
    name_width = min(max(len("param / figure"), *(len(line.name) for line in table)), NAME_WIDTH)
    cells = [[_cut(_text(line.values[i]), VALUE_WIDTH) for line in table] for i in range(len(names))]
    widths = [min(max(len(names[i]), *(len(c) for c in cells[i])), VALUE_WIDTH) for i in range(len(names))]
    blocks: list[list[int]] = [[]]
    used = name_width
    for i, w in enumerate(widths):
        if blocks[-1] and used + len(GAP) + w > width:
            blocks.append([])
            used = name_width
        blocks[-1].append(i)
        used += len(GAP) + w
    out: list[str] = []
    for b, block in enumerate(blocks):
        if b:
            out.append("")
        out.append(GAP.join(["param / figure".ljust(name_width)]
                            + [_cut(names[i], widths[i]).rjust(widths[i]) for i in block]).rstrip())
        for k, line in enumerate(table):
            if k and line.is_param != table[k - 1].is_param:
                out.append("")
            out.append(GAP.join([_cut(line.name, name_width).ljust(name_width)]
                                + [cells[i][k].rjust(widths[i]) for i in block]).rstrip())
    return out


# `copydecode experiments`: its help line and what it reads and writes (the CLI's --help)
HELP = ("the experiments of `dvc exp show` in 120 columns: one line per changed param or headline figure "
        "(pooled), one column per experiment")
READS_WRITES = "reads `dvc exp show` (the repository's experiments, through DVC); it writes stdout"
READS_PARAMS = False  # it shows each experiment's own params, through DVC: --params and --set are refused


def add_arguments(parser) -> None:
    parser.add_argument("--column", action="append", default=[], metavar="KEY", dest="columns",
                        help="a headline column to show (repeatable: hepy, click, n512, ...; default: pooled, or a "
                             "kernel row's N columns)")
    parser.add_argument("--figure", action="append", default=[], metavar="PREFIX", dest="figures",
                        help="only the headline rows whose name starts with PREFIX (repeatable, e.g. bound_fit)")
    parser.add_argument("--all", action="store_true", dest="show_all",
                        help="also the params and figures that are the same in every experiment shown")
    parser.add_argument("--rev", action="append", default=None, metavar="REV", dest="revs",
                        help="the experiments of this baseline commit (repeatable; default HEAD)")
    parser.add_argument("--num", type=int, default=1, metavar="N",
                        help="the experiments of the last N commits from each --rev (default 1)")
    parser.add_argument("--width", type=int, default=120, metavar="COLUMNS",
                        help="the widest line printed (default 120): more experiments go in further blocks")


def command(args) -> int:
    """Print the table; a repository DVC cannot read is a named error (ExperimentsError)."""
    import dvc.api

    if args.width < NAME_WIDTH + len(GAP) + VALUE_WIDTH:
        raise ExperimentsError(f"--width {args.width}: at least {NAME_WIDTH + len(GAP) + VALUE_WIDTH} columns (the "
                               "names and one experiment)")
    try:
        rows = dvc.api.exp_show(revs=args.revs, num=args.num)  # not param_deps: it fills 'None' in DVC 3.67
    except Exception as exc:  # noqa: BLE001 - DVC's own errors (no repository, unknown revision), named here
        raise ExperimentsError(f"`dvc exp show` failed: {type(exc).__name__}: {exc}") from None
    table = lines(rows, tuple(args.columns), tuple(args.figures), args.show_all)
    if not table:
        print("copydecode experiments: no param or headline figure differs between "
              f"{', '.join(experiment_name(r) for r in rows) or 'the experiments'} (--all shows them all)",
              file=sys.stderr)
        return 0
    print("\n".join(render([experiment_name(r) for r in rows], table, args.width)))
    return 0
