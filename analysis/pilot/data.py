"""Training and held-out cases for the fine-tuning pilot, from the pinned standard library (torch-free).

The ProbeEdit-S recipe (analysis.corpora.probeedit: the edit kinds, their site finders and `draw_edit`)
applied to short functions (methods included) of the 34 pinned CPython 3.11.7 files that ProbeEdit-S
reads (analysis.corpora.probeedit.load_pinned_sources: the archive analysis/data/probeedit_stdlib.tar.gz, or a
Lib folder), so every interpreter builds the same cases.

Disjointness, checked rather than assumed:
- no pilot function overlaps (by line range in its file) any unit that ProbeEdit-S evaluates, as
  the corpus is built with the given ProbeEdit-S params (a method of an evaluated class is out);
- the held-out cases come from files that no training case comes from (`heldout_files` files,
  drawn with the seed); `check_disjoint` raises if either rule is broken.

Two tasks (params `pilot.task`):
- `edit`: each case has an instruction in words that names the line ("on line 12, change 3 to 4"),
  since the prompt numbers the source lines; the target is the edited function.
- `bugfix`: each case is a function with one bug planted by a seeded mutation operator
  (analysis.pilot.bugmutate: HumanEvalFix's bug types), asked with HumanEvalFix's own instruction
  (analysis.corpora.humanevalpack.bugfix_instruction, "Fix bugs in <name>."); the target is the
  original function, so the program copies the intact lines and generates the fixed one.
The target program is the line-level oracle (analysis.oracle.covmax). A function the task's kind cannot be
applied to is counted per split and kind (`PilotData.not_applied`), never dropped silently.
"""

from __future__ import annotations

import ast
import random
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from analysis.pilot.bugmutate import MUTATION_KINDS, draw_mutation, parses, verify
from analysis.corpora.humanevalpack import bugfix_instruction
from analysis.errors import CorpusError
from analysis.oracle.covmax import line_oracle
from analysis.corpora.probeedit import (
    EDIT_KINDS,
    Edit,
    ProbeEditParams,
    build_probeedit,
    draw_edit,
    load_pinned_sources,
)
from analysis.grammar.program import render

SPLITS = ("train", "heldout")
TASKS = ("edit", "bugfix")


# Metrics written before pilot.task existed trained on edits, the one task then.
LEGACY_TASK = "edit"


def run_task(m: dict) -> str:
    """The training task a pilot metrics file records (LEGACY_TASK for one written before pilot.task)."""
    return m.get("task") or LEGACY_TASK


def task_kinds(task: str) -> tuple[str, ...]:
    """The kinds a task draws from: ProbeEdit-S's edit kinds, or the bug mutation operators."""
    if task not in TASKS:
        raise CorpusError(f"pilot data: task must be one of {', '.join(TASKS)}, got {task!r}")
    return EDIT_KINDS if task == "edit" else MUTATION_KINDS


@dataclass(frozen=True)
class PilotDataParams:
    """params `pilot.data` and `pilot.task` (built by the pilot stage's settings; no default here,
    params.yaml is the one source)."""

    task: str
    seed: int
    min_lines: int
    max_lines: int
    n_train: int
    n_heldout: int
    heldout_files: int
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class Function:
    file: str
    name: str
    first: int  # 1-based line range in the file, inclusive
    last: int
    text: str


@dataclass(frozen=True)
class PilotCase:
    case_id: str
    split: str
    file: str
    function: str
    first_line: int  # the function's line range in its file
    last_line: int
    kind: str
    site_line: int
    instruction: str
    source: str
    target: str
    program: str  # the line-level oracle program, rendered


@dataclass(frozen=True)
class PilotData:
    """The cases, and per "split/kind" how many functions the kind could not be applied to."""

    cases: list[PilotCase]
    not_applied: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------- functions and disjointness

def functions(rel: str, text: str, min_lines: int, max_lines: int) -> list[Function]:
    """Top-level functions and methods of top-level classes (dedented), within the line range."""
    lines = text.splitlines(keepends=True)
    found = []
    nodes = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes.append(node)
        elif isinstance(node, ast.ClassDef):
            nodes += [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in nodes:
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        chunk = "".join(lines[first - 1:node.end_lineno])
        if not chunk.endswith("\n"):
            chunk += "\n"
        chunk = textwrap.dedent(chunk)  # a method stands alone, as a function does
        if min_lines <= chunk.count("\n") <= max_lines and parses(chunk):  # a method whose strings reach column 0 cannot be dedented
            found.append(Function(rel, node.name, first, node.end_lineno, chunk))
    return found


def evaluation_ranges(probeedit: ProbeEditParams, sources: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """Line ranges (per file) of every unit ProbeEdit-S evaluates with these params."""
    cases, edits = build_probeedit(probeedit)
    ranges: dict[str, list[tuple[int, int]]] = {}
    for case, row in zip(cases, edits.iter_rows(named=True)):
        text = sources[row["file"]]
        at = text.find(case.source)
        if at < 0:
            raise CorpusError(f"pilot data: ProbeEdit-S unit {case.case_id} not found in {row['file']}")
        first = text.count("\n", 0, at) + 1
        ranges.setdefault(row["file"], []).append((first, first + case.source.count("\n") - 1))
    return ranges


def overlaps(fn: Function, ranges: dict[str, list[tuple[int, int]]]) -> bool:
    return any(fn.first <= hi and lo <= fn.last for lo, hi in ranges.get(fn.file, []))


# ---------------------------------------------------------------- instructions in words

def _changed_span(before: str, after: str) -> tuple[str, str]:
    """The differing middle of two lines, widened to whitespace on both sides (so that '==' -> '!='
    reads as that and not as '=' -> '!', and a literal inside a call reads with its call)."""
    p = 0
    while p < min(len(before), len(after)) and before[p] == after[p]:
        p += 1
    s = 0
    while s < min(len(before), len(after)) - p and before[-1 - s] == after[-1 - s]:
        s += 1
    while p > 0 and not before[p - 1].isspace():
        p -= 1
    while s > 0 and not before[len(before) - s].isspace():
        s -= 1
    return before[p:len(before) - s].strip(), after[p:len(after) - s].strip()


def instruction(kind: str, edit: Edit) -> str:
    line = edit.site_line
    if kind == "insert_guard":
        return f"before line {line}, insert the line: {edit.after.strip()}"
    if kind == "delete_line":
        return f"delete line {line}: {edit.before.strip()}"
    old, new = _changed_span(edit.before, edit.after)
    return f"on line {line}, change {old} to {new}"


# ---------------------------------------------------------------- cases

def _case(number: int, split: str, fn: Function, kind: str, edit: Edit) -> PilotCase:
    return PilotCase(
        case_id=f"pilot-{split}/{number}", split=split, file=fn.file, function=fn.name,
        first_line=fn.first, last_line=fn.last, kind=kind,
        site_line=edit.site_line, instruction=instruction(kind, edit), source=fn.text, target=edit.text,
        program=render(line_oracle(fn.text, edit.text)),
    )


def _bugfix_case(number: int, split: str, fn: Function, kind: str, rng: random.Random) -> PilotCase | None:
    mutation = draw_mutation(fn.text, kind, rng)
    if mutation is None:
        return None
    return PilotCase(
        case_id=f"pilot-{split}/{number}", split=split, file=fn.file, function=fn.name,
        first_line=fn.first, last_line=fn.last, kind=kind, site_line=mutation.site_line,
        instruction=bugfix_instruction(fn.name), source=mutation.text, target=fn.text,
        program=verify(fn.text, mutation.text),
    )


def _edit_case(number: int, split: str, fn: Function, kind: str, rng: random.Random) -> PilotCase | None:
    edit = draw_edit(fn.text, kind, rng)
    return None if edit is None else _case(number, split, fn, kind, edit)


CASE_MAKERS: dict[str, Callable[[int, str, Function, str, random.Random], PilotCase | None]] = {
    "edit": _edit_case, "bugfix": _bugfix_case,
}


def _draw(pool: list[Function], count: int, kinds: tuple[str, ...], split: str, rng: random.Random,
          task: str, not_applied: dict[str, int]) -> list[PilotCase]:
    """`count` cases, the kinds in turn; a function the turn's kind cannot be applied to is counted in
    `not_applied` ("split/kind") and the next function gets the same kind."""
    cases: list[PilotCase] = []
    for fn in pool:
        if len(cases) == count:
            break
        kind = kinds[len(cases) % len(kinds)]
        case = CASE_MAKERS[task](len(cases), split, fn, kind, rng)
        if case is None:
            not_applied[f"{split}/{kind}"] = not_applied.get(f"{split}/{kind}", 0) + 1
        else:
            cases.append(case)
    if len(cases) < count:
        raise CorpusError(f"pilot data: only {len(cases)} of {count} {split} cases could be drawn from "
                          f"{len(pool)} functions; lower pilot.data.n_{split} or widen the line range")
    return cases


def build_pilot_cases(params: PilotDataParams, probeedit: ProbeEditParams) -> list[PilotCase]:
    """Training and held-out cases (module docstring), disjoint from `probeedit`'s evaluation units
    (params corpora.probeedit's recipe); deterministic in the params."""
    return build_pilot_data(params, probeedit).cases


def build_pilot_data(params: PilotDataParams, probeedit: ProbeEditParams) -> PilotData:
    """`build_pilot_cases` with the count of functions each kind could not be applied to."""
    allowed = task_kinds(params.task)
    unknown = [k for k in params.kinds if k not in allowed]
    if unknown or not params.kinds:
        raise CorpusError(f"pilot data: {params.task} kinds must be a non-empty subset of {', '.join(allowed)}, "
                          f"got {params.kinds}")
    sources = load_pinned_sources(probeedit)
    ranges = evaluation_ranges(probeedit, sources)
    files = sorted(sources)
    if not 1 <= params.heldout_files < len(files):
        raise CorpusError(f"pilot data: heldout_files must lie in 1..{len(files) - 1}, got {params.heldout_files}")
    rng = random.Random(params.seed)
    heldout = set(rng.sample(files, params.heldout_files))
    pools: dict[str, list[Function]] = {split: [] for split in SPLITS}
    for rel in files:
        for fn in functions(rel, sources[rel], params.min_lines, params.max_lines):
            if not overlaps(fn, ranges):
                pools["heldout" if rel in heldout else "train"].append(fn)
    for pool in pools.values():
        rng.shuffle(pool)
    not_applied: dict[str, int] = {}
    cases = (_draw(pools["train"], params.n_train, params.kinds, "train", rng, params.task, not_applied)
             + _draw(pools["heldout"], params.n_heldout, params.kinds, "heldout", rng, params.task, not_applied))
    check_disjoint(cases, ranges)
    return PilotData(cases, dict(sorted(not_applied.items())))


def check_disjoint(cases: list[PilotCase], ranges: dict[str, list[tuple[int, int]]]) -> None:
    """Raise unless no case overlaps a ProbeEdit-S evaluation unit and no held-out file is trained on."""
    clash = [c.case_id for c in cases
             if any(c.first_line <= hi and lo <= c.last_line for lo, hi in ranges.get(c.file, []))]
    if clash:
        raise CorpusError(f"pilot data: cases overlapping ProbeEdit-S evaluation units: {clash[:5]}")
    train_files = {c.file for c in cases if c.split == "train"}
    leaked = sorted({c.file for c in cases if c.split == "heldout"} & train_files)
    if leaked:
        raise CorpusError(f"pilot data: held-out files also used for training: {leaked}")


def with_split(cases: list[PilotCase], split: str) -> list[PilotCase]:
    return [c for c in cases if c.split == split]

