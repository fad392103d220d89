"""Reading an edit that a model wrote as a unified diff or as search/replace blocks, and applying it to its source:
the parsers the edit-format check (analysis.pilot.formats) judges each format with. The writers of the same formats
are analysis.coverage.formats (`unified_diff_text`, `search_replace_text`); what they write, these read back.

- A unified diff, as GNU patch reads one: optional `--- ` / `+++ ` file headers, then one or more hunks, each a
  `@@ -a[,b] +c[,d] @@` header and its lines (` ` context, `-` removed, `+` added, `\\ No newline at end of file`),
  whose counts must equal the header's b and d. A hunk applies where its old text (context and removed lines) is
  in the source: at its stated line, or elsewhere as patch finds it by offset; a hunk found only elsewhere is a
  line-number error (the diff's analogue of a copy program's range error), one found nowhere fails the diff.
- Search/replace blocks as Aider writes them: `<<<<<<< SEARCH`, the lines to find, `=======`, their replacement,
  `>>>>>>> REPLACE`, with only blank lines between blocks. Each SEARCH text must occur in the text as edited by
  the blocks before it; its first occurrence is replaced (an ambiguous one is counted).

Nothing here is lenient beyond that: a malformed hunk or block is a `PatchError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.errors import PatchError
from analysis.text.lines import split_lines


# ---------------------------------------------------------------- unified diff

HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@.*")
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True)
class Hunk:
    old_start: int           # 1-based line of the source where the hunk says its old text starts (0: empty)
    old: tuple[str, ...]     # context and removed lines, each with its line end
    new: tuple[str, ...]     # context and added lines


def _line_text(line: str) -> str:
    return line if line.endswith("\n") else line + "\n"


# which sides a hunk line belongs to, by its first character ('' and '\n': an empty context line whose leading
# space was dropped, which patch accepts)
SIDES = {" ": (True, True), "-": (True, False), "+": (False, True), "\n": (True, True), "": (True, True)}


def _hunk_body(lines: list[str], i: int, want_old: int, want_new: int, header: int) -> tuple[list, list, int]:
    """The old and new lines of the hunk whose header is line `header` (its body starts at `i`), and the index
    after it; a `\\ No newline at end of file` line takes the line end off the line before it."""
    old: list[str] = []
    new: list[str] = []
    last: tuple[bool, bool] = (False, False)
    while i < len(lines):
        line = lines[i]
        if line.rstrip("\n") == NO_NEWLINE:
            for side, into in zip(last, (old, new)):
                if side and into:
                    into[-1] = into[-1].removesuffix("\n")
            i += 1
            continue
        if len(old) >= want_old and len(new) >= want_new:
            break
        tag = line[:1] if line not in ("\n", "") else line
        if tag not in SIDES:
            raise PatchError(f"line {i + 1}: {line.rstrip()!r} is not a hunk line (' ', '-' or '+'), in the hunk of "
                             f"line {header + 1}")
        text = "\n" if tag in ("\n", "") else _line_text(line[1:])
        last = SIDES[tag]
        if last[0]:
            old.append(text)
        if last[1]:
            new.append(text)
        i += 1
    if len(old) != want_old or len(new) != want_new:
        raise PatchError(f"line {header + 1}: the hunk's header counts {want_old} old and {want_new} new lines, "
                         f"its body {len(old)} and {len(new)}")
    return old, new, i


def parse_unified_diff(text: str) -> list[Hunk]:
    """The hunks of a unified diff (see the module docstring), in order; a PatchError names what does not parse."""
    lines = split_lines(text)
    i = 0
    if i < len(lines) and lines[i].startswith("--- "):
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError("line 1: a '--- ' header without its '+++ ' line")
        i += 2
    hunks = []
    while i < len(lines):
        if not lines[i].strip():  # blank lines between or after hunks, which patch skips
            i += 1
            continue
        header = HUNK_HEADER.fullmatch(lines[i].rstrip("\n"))
        if header is None:
            raise PatchError(f"line {i + 1}: {lines[i].rstrip()!r} is not a hunk header ('@@ -a,b +c,d @@')")
        a, b, _, d = header.groups()
        old, new, after = _hunk_body(lines, i + 1, 1 if b is None else int(b), 1 if d is None else int(d), i)
        hunks.append(Hunk(int(a), tuple(old), tuple(new)))
        i = after
    if not hunks:
        raise PatchError("no hunk: a unified diff needs at least one '@@ -a,b +c,d @@' hunk")
    return hunks


@dataclass(frozen=True)
class Applied:
    """An edit applied to its source: the result, and how its positions matched."""

    text: str
    misplaced: int = 0   # diff hunks found only away from their stated line; search texts found more than once


def _find(src: list[str], old: tuple[str, ...], start: int) -> list[int]:
    """Every index >= start where `old` occurs as consecutive lines of `src`."""
    n = len(old)
    return [k for k in range(start, len(src) - n + 1) if tuple(src[k:k + n]) == old]


def apply_unified_diff(source: str, hunks: list[Hunk]) -> Applied:
    """`source` with the hunks applied in order (each after the previous one's old text); a PatchError when a
    hunk's old text is nowhere after the previous hunk."""
    src = split_lines(source)
    out, at, misplaced = [], 0, 0
    for index, hunk in enumerate(hunks, start=1):
        stated = max(hunk.old_start - 1, 0) if hunk.old else hunk.old_start
        if stated >= at and tuple(src[stated:stated + len(hunk.old)]) == hunk.old:
            found = stated
        else:
            places = _find(src, hunk.old, at)
            if not places:
                raise PatchError(f"hunk {index} (stated at line {hunk.old_start}): its old text is not in the source")
            found = min(places, key=lambda k: abs(k - stated))
            misplaced += 1
        out += src[at:found] + list(hunk.new)
        at = found + len(hunk.old)
    return Applied("".join(out + src[at:]), misplaced)


# ---------------------------------------------------------------- search/replace

SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"


def parse_search_replace(text: str) -> list[tuple[str, str]]:
    """(search, replace) of each block, in order (see the module docstring); a PatchError names the line."""
    lines = split_lines(text)
    blocks, i = [], 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        if lines[i].rstrip("\n") != SEARCH:
            raise PatchError(f"line {i + 1}: {lines[i].rstrip()!r} is outside a block (a block starts '{SEARCH}')")
        parts: list[list[str]] = [[], []]
        part, j = 0, i + 1
        while j < len(lines):
            marker = lines[j].rstrip("\n")
            if marker == DIVIDER and part == 0:
                part = 1
            elif marker == REPLACE and part == 1:
                break
            elif marker in (SEARCH, DIVIDER, REPLACE):
                raise PatchError(f"line {j + 1}: {marker!r} inside the block of line {i + 1}")
            else:
                parts[part].append(lines[j])
            j += 1
        else:
            raise PatchError(f"line {i + 1}: the block is not closed ('{DIVIDER}' and '{REPLACE}')")
        if not parts[0]:
            raise PatchError(f"line {i + 1}: the block's SEARCH text is empty")
        blocks.append(("".join(parts[0]), "".join(parts[1])))
        i = j + 1
    if not blocks:
        raise PatchError(f"no block: search/replace needs at least one '{SEARCH}' block")
    return blocks


def occurrences(text: str, part: str) -> int:
    """How many times `part` occurs in `text`, overlapping occurrences included (`str.count` skips them)."""
    count, at = 0, text.find(part)
    while at >= 0:
        count, at = count + 1, text.find(part, at + 1)
    return count


def apply_search_replace(source: str, blocks: list[tuple[str, str]]) -> Applied:
    """`source` with each block's first occurrence of its SEARCH text replaced, in order; a PatchError when one is
    not in the text the blocks before it left."""
    text, ambiguous = source, 0
    for index, (search, replace) in enumerate(blocks, start=1):
        at = text.find(search)
        if at < 0:
            raise PatchError(f"block {index}: its SEARCH text is not in the source")
        ambiguous += occurrences(text, search) > 1
        text = text[:at] + replace + text[at + len(search):]
    return Applied(text, ambiguous)
