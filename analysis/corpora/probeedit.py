"""ProbeEdit-S: a deterministic stand-in for the paper's (unpublished) ProbeEdit corpus.

Not the paper's ProbeEdit. 154 single-site probe edits on real source files of CPython's standard
library. The files are pinned by sha256 in a manifest (`analysis/data/probeedit_sources.json`,
taken from CPython 3.11.7), and the 34 pinned files ship with the project as data, not code: one
reproducible archive, `analysis/data/probeedit_stdlib.tar.gz`, that also holds CPython's licence
(`LICENSE.txt`). `stdlib_dir: auto` reads that archive, so the corpus is byte-identical on every
interpreter; `stdlib_dir: <path>` reads another CPython 3.11.7 `Lib` folder. Either way each file is
checked against its pin, and any difference fails with the file, both hashes and the interpreter
version. `write_archive` re-packs (e.g. from a CPython `Lib` folder).

Recipe (all choices from one seeded `random.Random`, stable across platforms):
1. Units: every top-level function or class (decorators included) of the pinned files whose length
   is within [min_lines, max_lines], in file order, then shuffled.
2. Edit kinds: `n_cases` slots split over the kinds by `mix` weights (largest remainder), laid out
   in EDIT_KINDS order whatever the order of the `mix` mapping (so reordering params.yaml keys
   changes nothing), then shuffled.
3. Each slot takes the next unused unit that has a site for its kind; one site is drawn among that
   unit's candidate sites. The edited unit must still parse as Python and differ from the original.
   The case's source is the unit, its target the edited unit (the edit a model is asked to make).

Edit kinds:
- change_literal: a decimal integer literal n -> n + 1, or a short plain string literal's case swapped
- flip_operator: one of == != < >= <= > + - swapped for its opposite, or `and` <-> `or`
- rename_one_site: one occurrence of an identifier (not an attribute, keyword or builtin) gets "_2"
- insert_guard: before a `return`/`if`/`for`/`while` line, insert `if <name> is None: return None`
- delete_line: delete one single-line statement whose block keeps at least one other statement
- rewrite_expression: swap the operands of a single-line binary expression (`a - b` -> `b - a`)
- edit_docstring: swap two adjacent words in one line of a docstring
"""

from __future__ import annotations

import ast
import builtins
import gzip
import hashlib
import io
import json
import keyword
import random
import sys
import tarfile
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from analysis.corpora.cases import Case
from analysis.corpora.entries import PROBEEDIT_CORPUS, ProbeEditParams
from analysis.errors import CorpusError
from analysis.pipeline.io import atomic_path

LANGUAGE = "python"
FRAMING = "unit"
SHIPPED_STDLIB = Path(__file__).parents[1] / "data" / "probeedit_stdlib.tar.gz"  # the pinned files + LICENCE
SHIPPED_ORIGIN = f"analysis/data/{SHIPPED_STDLIB.name}"  # as the corpora report names it (no machine path)
LICENCE = "LICENSE.txt"
EDIT_KINDS: tuple[str, ...] = (
    "change_literal", "flip_operator", "rename_one_site", "insert_guard",
    "delete_line", "rewrite_expression", "edit_docstring",
)

EDITS_SCHEMA = {
    "case_id": pl.String, "file": pl.String, "unit": pl.String, "unit_lines": pl.Int64,
    "kind": pl.String, "site_line": pl.Int64, "before": pl.String, "after": pl.String,
}


@dataclass(frozen=True)
class Unit:
    file: str
    name: str
    text: str  # the unit's lines, ending with "\n"

    @property
    def n_lines(self) -> int:
        return self.text.count("\n")


@dataclass(frozen=True)
class Edit:
    """An edit at one site: 1-based line of the unit, and the line(s) before and after."""

    site_line: int
    text: str  # the whole edited unit
    before: str
    after: str


# ---------------------------------------------------------------- pinned sources

def stdlib_dir(setting: str) -> Path:
    """Where the pinned files are read from: the shipped archive (`auto`) or a Lib folder."""
    return SHIPPED_STDLIB if setting == "auto" else Path(setting)


def shipped_files(archive: Path | None = None) -> dict[str, bytes]:
    """Every regular file in the shipped archive (the pinned sources and LICENSE.txt), by name."""
    archive = SHIPPED_STDLIB if archive is None else archive
    if not archive.is_file():
        raise CorpusError(f"ProbeEdit-S archive {archive} is missing (it ships with the package)")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CorpusError(f"ProbeEdit-S archive {archive} cannot be read: {exc}") from exc


def write_archive(root: Path, files: list[str], out: Path) -> None:
    """Pack `files` and LICENSE.txt (paths relative to the folder `root`) into a reproducible .tar.gz:
    sorted names, zero times and owners, mode 0644, gzip header time 0."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in sorted({*files, LICENCE}):
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    with atomic_path(out) as tmp:
        tmp.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))


def _read_files(setting: str, files: list[str]) -> dict[str, tuple[str, bytes | None]]:
    """Each pinned file's display path and bytes (None when absent), from the archive or a folder."""
    if setting == "auto":
        shipped = shipped_files()
        return {rel: (f"{SHIPPED_STDLIB}:{rel}", shipped.get(rel)) for rel in files}
    root = Path(setting)
    return {rel: (str(root / rel), (root / rel).read_bytes() if (root / rel).is_file() else None) for rel in files}


def read_manifest(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"ProbeEdit-S manifest {path} is missing")
    manifest = json.loads(path.read_text())
    for key in ("python", "files"):
        if key not in manifest:
            raise CorpusError(f"ProbeEdit-S manifest {path}: missing field {key!r}")
    return manifest


def load_pinned_sources(params: ProbeEditParams) -> dict[str, str]:
    """Read each pinned file and check its sha256; a mismatch names file, both hashes, versions."""
    manifest = read_manifest(params.manifest)
    found = _read_files(params.stdlib_dir, list(manifest["files"]))
    texts: dict[str, str] = {}
    for rel, expected in manifest["files"].items():
        path, data = found[rel]
        if data is None:
            raise CorpusError(
                f"ProbeEdit-S source {path} is missing (pinned from CPython {manifest['python']}; "
                f"set probeedit.stdlib_dir to auto (the archive shipped as {SHIPPED_STDLIB}) or to that "
                f"version's Lib folder)"
            )
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            raise CorpusError(
                f"ProbeEdit-S source {path}: sha256 {digest} differs from the pinned {expected}. "
                f"The corpus is pinned to CPython {manifest['python']}'s standard library and this is "
                f"Python {sys.version.split()[0]}; set probeedit.stdlib_dir to a CPython "
                f"{manifest['python']} Lib folder"
            )
        texts[rel] = data.decode("utf-8")
    return texts





# ---------------------------------------------------------------- units

def extract_units(rel: str, text: str, min_lines: int, max_lines: int) -> list[Unit]:
    lines = text.splitlines(keepends=True)
    units = []
    for node in ast.parse(text).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        chunk = "".join(lines[first - 1:node.end_lineno])
        if not chunk.endswith("\n"):
            chunk += "\n"
        if min_lines <= chunk.count("\n") <= max_lines:
            units.append(Unit(rel, node.name, chunk))
    return units


# ---------------------------------------------------------------- edit sites

_FLIPS = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", "<=": ">", ">": "<=", "+": "-", "-": "+"}
_BOOL_FLIPS = {"and": "or", "or": "and"}
_BUILTINS = set(dir(builtins))


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _replace_on_line(text: str, line: int, col: int, end_col: int, new: str) -> Edit:
    lines = text.splitlines(keepends=True)
    before = lines[line - 1]
    after = before[:col] + new + before[end_col:]
    lines[line - 1] = after
    return Edit(line, "".join(lines), before, after)


def _literal_sites(text: str) -> list[Edit]:
    edits = []
    for tok in _tokens(text):
        if tok.type == tokenize.NUMBER and tok.string.isdigit() and (tok.string == "0" or tok.string[0] != "0"):
            new = str(int(tok.string) + 1)
        elif tok.type == tokenize.STRING and len(tok.string) >= 3 and tok.string[0] in "'\"" \
                and tok.string[0] == tok.string[-1] and tok.string[1:-1].replace(" ", "").isalpha() \
                and tok.string[1:-1].swapcase() != tok.string[1:-1]:
            new = tok.string[0] + tok.string[1:-1].swapcase() + tok.string[-1]
        else:
            continue
        edits.append(_replace_on_line(text, tok.start[0], tok.start[1], tok.end[1], new))
    return edits


def _operator_sites(text: str) -> list[Edit]:
    edits = []
    for tok in _tokens(text):
        table = _FLIPS if tok.type == tokenize.OP else _BOOL_FLIPS if tok.type == tokenize.NAME else {}
        if tok.string in table:
            edits.append(_replace_on_line(text, tok.start[0], tok.start[1], tok.end[1], table[tok.string]))
    return edits


def _rename_sites(text: str) -> list[Edit]:
    edits = []
    toks = _tokens(text)
    for prev, tok in zip([None, *toks], toks):
        if tok.type != tokenize.NAME or keyword.iskeyword(tok.string) or keyword.issoftkeyword(tok.string):
            continue
        if tok.string in _BUILTINS or (prev is not None and prev.string == "."):
            continue
        edits.append(_replace_on_line(text, tok.start[0], tok.start[1], tok.end[1], tok.string + "_2"))
    return edits


def _insert_at(text: str, line: int, new_line: str) -> Edit:
    lines = text.splitlines(keepends=True)
    lines.insert(line - 1, new_line)
    return Edit(line, "".join(lines), "", new_line)


def _guard_sites(text: str) -> list[Edit]:
    edits = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.Return, ast.If, ast.For, ast.While)):
            continue
        part = node.value if isinstance(node, ast.Return) else node.test if isinstance(node, (ast.If, ast.While)) else node.iter
        names = [
            n.id for n in (ast.walk(part) if part is not None else [])
            if isinstance(n, ast.Name) and n.id not in _BUILTINS and n.id != "self"
        ]
        if not names:
            continue
        line = text.splitlines()[node.lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        edits.append(_insert_at(text, node.lineno, f"{indent}if {names[0]} is None: return None\n"))
    return edits


def _delete_sites(text: str) -> list[Edit]:
    edits = []
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or len(body) < 2:
                continue
            for stmt in body:
                if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) and stmt.lineno == stmt.end_lineno:
                    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                        continue  # a docstring, not a statement worth deleting
                    if lines[stmt.lineno - 1].strip().endswith((";", "\\")):
                        continue
                    kept = lines[: stmt.lineno - 1] + lines[stmt.lineno:]
                    edits.append(Edit(stmt.lineno, "".join(kept), lines[stmt.lineno - 1], ""))
    return edits


def _byte_col_to_char(line: str, col: int) -> int:
    return len(line.encode("utf-8")[:col].decode("utf-8"))


def _simple(node: ast.AST) -> bool:
    return isinstance(node, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))


def _rewrite_sites(text: str) -> list[Edit]:
    edits = []
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.BinOp) or node.lineno != node.end_lineno:
            continue
        left = ast.get_source_segment(text, node.left)
        right = ast.get_source_segment(text, node.right)
        op_text = ast.get_source_segment(text, node)
        if not (left and right and op_text) or left == right:
            continue
        op = op_text[len(left):len(op_text) - len(right)]
        new_left = right if _simple(node.right) else f"({right})"
        new_right = left if _simple(node.left) else f"({left})"
        line = lines[node.lineno - 1]
        col = _byte_col_to_char(line, node.col_offset)
        end = _byte_col_to_char(line, node.end_col_offset)
        edits.append(_replace_on_line(text, node.lineno, col, end, f"{new_left}{op}{new_right}"))
    return edits


def _docstring_sites(text: str) -> list[Edit]:
    edits = []
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not node.body:
            continue
        doc = node.body[0]
        if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)):
            continue
        for lineno in range(doc.lineno, doc.end_lineno + 1):
            line = lines[lineno - 1]
            if '"""' in line or "'''" in line or "\\" in line:
                continue
            words = line.split()
            if len(words) < 3:
                continue
            indent = line[: len(line) - len(line.lstrip())]
            ending = line[len(line.rstrip()):]
            for k in range(len(words) - 1):
                if words[k] != words[k + 1]:
                    swapped = words[:k] + [words[k + 1], words[k]] + words[k + 2:]
                    new = indent + " ".join(swapped) + ending
                    if line.strip() == " ".join(words):  # single spaces only, so the swap is exact
                        edits.append(Edit(lineno, "".join(lines[: lineno - 1] + [new] + lines[lineno:]), line, new))
    return edits


SITE_FINDERS: dict[str, Callable[[str], list[Edit]]] = {
    "change_literal": _literal_sites,
    "flip_operator": _operator_sites,
    "rename_one_site": _rename_sites,
    "insert_guard": _guard_sites,
    "delete_line": _delete_sites,
    "rewrite_expression": _rewrite_sites,
    "edit_docstring": _docstring_sites,
}


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def draw_edit(unit_text: str, kind: str, rng: random.Random) -> Edit | None:
    """Draw one of the kind's sites at random; an edit must still parse and change the text.

    Sites are drawn and checked one at a time (parsing every candidate of every unit is what made
    the corpus slow to build), so the draw depends on the seed alone.
    """
    candidates = [e for e in SITE_FINDERS[kind](unit_text) if e.text != unit_text]
    while candidates:
        edit = candidates.pop(rng.randrange(len(candidates)))
        if _parses(edit.text):
            return edit
    return None


# ---------------------------------------------------------------- the corpus

def canonical_mix(mix: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    """The mix in EDIT_KINDS order: the recipe must not depend on the order of a YAML mapping."""
    kinds = [k for k, _ in mix]
    unknown = [k for k in kinds if k not in EDIT_KINDS]
    if unknown:
        raise CorpusError(f"probeedit.mix names unknown edit kinds {unknown}; known: {', '.join(EDIT_KINDS)}")
    repeated = sorted({k for k in kinds if kinds.count(k) > 1})
    if repeated:
        raise CorpusError(f"probeedit.mix names edit kinds more than once: {repeated}")
    bad = {k: w for k, w in mix if isinstance(w, bool) or not isinstance(w, (int, float))}
    if bad:
        raise CorpusError(f"probeedit.mix weights must be numbers, got {bad}")
    weights = dict(mix)
    return tuple((k, weights[k]) for k in EDIT_KINDS if k in weights)


def allocate(n: int, mix: tuple[tuple[str, float], ...]) -> dict[str, int]:
    """Split n slots over kinds in proportion to their weights (largest remainder; ties by kind
    order), in EDIT_KINDS order whatever the order of `mix`."""
    mix = canonical_mix(mix)
    total = sum(w for _, w in mix)
    if total <= 0 or any(w < 0 for _, w in mix):
        raise CorpusError(f"probeedit.mix weights must be >= 0 with a positive sum, got {dict(mix)}")
    exact = [(k, n * w / total) for k, w in mix]
    counts = {k: int(x) for k, x in exact}
    left = n - sum(counts.values())
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i][1] - int(exact[i][1])), i))
    for i in order[:left]:
        counts[exact[i][0]] += 1
    return counts


def build_probeedit(params: ProbeEditParams) -> tuple[list[Case], pl.DataFrame]:
    if params.n_cases < 1:
        raise CorpusError(f"probeedit.n_cases must be >= 1, got {params.n_cases}")
    sources = load_pinned_sources(params)
    units = [u for rel in sorted(sources) for u in extract_units(rel, sources[rel], params.min_lines, params.max_lines)]
    rng = random.Random(params.seed)
    rng.shuffle(units)
    slots = [k for k, c in allocate(params.n_cases, params.mix).items() for _ in range(c)]
    rng.shuffle(slots)
    used: set[int] = set()
    cases, rows = [], []
    for number, kind in enumerate(slots):
        pick = _first_editable(units, used, kind, rng)
        if pick is None:
            raise CorpusError(
                f"ProbeEdit-S: no unused unit of {params.min_lines}-{params.max_lines} lines has a "
                f"{kind} site ({len(units)} units, {len(used)} used); widen the line range or the files"
            )
        index, edit = pick
        used.add(index)
        unit = units[index]
        case_id = f"{PROBEEDIT_CORPUS}/{number}"
        cases.append(Case(case_id, PROBEEDIT_CORPUS, LANGUAGE, FRAMING, unit.text, edit.text))
        rows.append({
            "case_id": case_id, "file": unit.file, "unit": unit.name, "unit_lines": unit.n_lines,
            "kind": kind, "site_line": edit.site_line, "before": edit.before, "after": edit.after,
        })
    return cases, pl.DataFrame(rows, schema=EDITS_SCHEMA)


def _first_editable(units: list[Unit], used: set[int], kind: str, rng: random.Random) -> tuple[int, Edit] | None:
    for index, unit in enumerate(units):
        if index in used:
            continue
        edit = draw_edit(unit.text, kind, rng)
        if edit is not None:
            return index, edit
    return None
