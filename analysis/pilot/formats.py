"""Aider's question on the model this suite runs: how often does a model write each edit format correctly, on the
same held-out cases? Torch-free: the prompts, the gold text of each format (its decode budget), the judge of what
the model wrote (each format by its own grammar or parser) and the table. The pilot stage decodes
(kernels_profile.pilot.formats).

Formats, each read by its own parser (a single surrounding code fence, as models often add, is removed first from
every format alike, as Aider does):
- `program`: the copy program, read by the program grammar (analysis.grammar.program.parse), resolved against the
  input (analysis.grammar.resolver). A copy range outside the input's lines is a *range error*.
- `unified_diff`: GNU patch's grammar (analysis.text.patch). A hunk whose text is found only away from its stated
  line applies, as patch applies it by offset, and counts as a *line-number error*.
- `search_replace`: Aider's blocks (analysis.text.patch). No line numbers, so no range error.

Each prompt states the format and shows one worked example (the same small fix in each format), so that a model
never trained on a format can still be asked for it. The program prompt numbers the input's lines, since its copies
address them; the diff and the blocks get the input as a file, as `diff` and Aider see one.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analysis.coverage.formats import search_replace_text, unified_diff_text
from analysis.errors import PatchError, ProgramError
from analysis.grammar.program import COPY_END, COPY_TAGS, GEN_CLOSE, GEN_OPEN, RANGE_SEP, Copy, parse, render
from analysis.grammar.resolver import resolve
from analysis.oracle.covmax import line_oracle
from analysis.stats import clopper_pearson
from analysis.text.lines import numbered, split_lines
from analysis.text.patch import apply_search_replace, apply_unified_diff, parse_search_replace, parse_unified_diff

PROGRAM, UNIFIED_DIFF, SEARCH_REPLACE = "program", "unified_diff", "search_replace"
FORMATS = (PROGRAM, UNIFIED_DIFF, SEARCH_REPLACE)
FORMAT_LABELS = {PROGRAM: "copy program", UNIFIED_DIFF: "unified diff", SEARCH_REPLACE: "search/replace"}
RANGE_ERROR_LABELS = {PROGRAM: "copy range outside the input", UNIFIED_DIFF: "hunk away from its stated line",
                      SEARCH_REPLACE: "none (no line numbers)"}
FREE, GRAMMAR = "free", "under the grammar"  # how a text was decoded
DECODING_LABELS = {FREE: "no grammar", GRAMMAR: "under the grammar"}

# the worked example every prompt shows, in that prompt's format
EXAMPLE_INSTRUCTION = "Fix bugs in clamp."
EXAMPLE_SOURCE = ("def clamp(x, lo, hi):\n    if x < lo:\n        return hi\n    if x > hi:\n        return hi\n"
                  "    return x\n")
EXAMPLE_TARGET = EXAMPLE_SOURCE.replace("        return hi\n    if x > hi", "        return lo\n    if x > hi")
EXAMPLE_PROGRAM = render(line_oracle(EXAMPLE_SOURCE, EXAMPLE_TARGET))  # as the pilot's cases get theirs

RULES = {
    PROGRAM: (f"Write the edit as an edit program. Use {COPY_TAGS['lines']}i{RANGE_SEP}j{COPY_END} to copy input "
              f"lines i to j (numbered below) and {GEN_OPEN}text{GEN_CLOSE} to write new text. Output only the "
              "program."),
    UNIFIED_DIFF: ("Write the edit as a unified diff of the input: '--- a' and '+++ b', then each hunk as "
                   "'@@ -start,count +start,count @@' and its lines, ' ' for a kept line, '-' for a removed one, '+' "
                   "for an added one. Output only the diff."),
    SEARCH_REPLACE: ("Write the edit as search/replace blocks: '<<<<<<< SEARCH', input lines copied exactly, "
                     "'=======', the lines that replace them, '>>>>>>> REPLACE'. Output only the blocks."),
}


def gold_text(fmt: str, source: str, target: str, program: str, diff_context: int) -> str:
    """The edit written correctly in `fmt`: the line-level oracle program, the diff or the blocks."""
    if fmt == PROGRAM:
        return program
    if fmt == UNIFIED_DIFF:
        return unified_diff_text(source, target, diff_context)
    if fmt == SEARCH_REPLACE:
        return search_replace_text(source, target)
    raise ValueError(f"unknown edit format {fmt!r}; known: {', '.join(FORMATS)}")


def numbered_input(fmt: str) -> bool:
    return fmt == PROGRAM


def system_text(fmt: str, diff_context: int) -> str:
    """The system message of `fmt`'s prompt: the format's rules, then the worked example in that format."""
    shown = numbered(EXAMPLE_SOURCE) if numbered_input(fmt) else EXAMPLE_SOURCE
    answer = gold_text(fmt, EXAMPLE_SOURCE, EXAMPLE_TARGET, EXAMPLE_PROGRAM, diff_context)
    return f"{RULES[fmt]}\n\nExample. {EXAMPLE_INSTRUCTION}\n\nInput:\n{shown}\nOutput:\n{answer}"


# ---------------------------------------------------------------- judging what a model wrote

@dataclass(frozen=True)
class Judged:
    """What a model wrote, read by its format's parser."""

    well_formed: bool
    range_error: bool | None   # program: a copy outside the input; diff: a hunk away from its line; None: n/a
    applies: bool
    exact_match: bool
    error: str | None          # the parser's or the applier's message, None when it applied


def strip_fence(text: str) -> str:
    """`text` without one surrounding Markdown code fence (```lang ... ```) and without blank lines around it (its
    spaces are kept: a diff's first and last lines may be context lines that start with one)."""
    inner = text.strip("\r\n")
    if inner.startswith("```") and inner.rstrip().endswith("```") and "\n" in inner:
        inner = inner[inner.index("\n") + 1:inner.rstrip().rindex("```")]
    return inner.strip("\r\n")


def _copies_outside(program, n_lines: int) -> bool:
    return any(isinstance(op, Copy) and (op.start > op.end or op.end > n_lines or op.start < 1) for op in program.ops)


def judge(fmt: str, text: str, source: str, target: str) -> Judged:
    """`text` (a model's output in `fmt`) read by the format's parser and applied to `source`."""
    body = strip_fence(text)
    try:
        if fmt == PROGRAM:
            program = parse(body)
        elif fmt == UNIFIED_DIFF:
            hunks = parse_unified_diff(body + "\n")
        else:
            blocks = parse_search_replace(body + "\n")
    except (ProgramError, PatchError) as exc:
        return Judged(False, None, False, False, str(exc))
    if fmt == PROGRAM:
        outside = _copies_outside(program, len(split_lines(source)))
        try:
            output = resolve(program, source)
        except ProgramError as exc:
            return Judged(True, outside, False, False, str(exc))
        return Judged(True, outside, True, output == target, None)
    try:
        applied = apply_unified_diff(source, hunks) if fmt == UNIFIED_DIFF else apply_search_replace(source, blocks)
    except PatchError as exc:
        return Judged(True, None, False, False, str(exc))
    range_error = applied.misplaced > 0 if fmt == UNIFIED_DIFF else None
    return Judged(True, range_error, True, _same_text(applied.text, target), None)


def _same_text(output: str, target: str) -> bool:
    """Exact match, allowing only a missing final line end (a diff or block written without one)."""
    return output == target or (output + "\n" == target)


# ---------------------------------------------------------------- cases and the table

def spread(cases: list, n: int) -> list:
    """`n` of `cases` evenly spaced through their order (all of them when n >= their count)."""
    if n >= len(cases):
        return list(cases)
    return [cases[i * len(cases) // n] for i in range(n)]


RECORD_SCHEMA = {
    "model": pl.Utf8, "variant": pl.Utf8, "prompt": pl.Utf8, "decoding": pl.Utf8, "format": pl.Utf8,
    "case_id": pl.Utf8, "kind": pl.Utf8, "budget": pl.Int64, "tokens": pl.Int64, "stopped": pl.Utf8,
    "seconds": pl.Float64, "well_formed": pl.Boolean, "range_error": pl.Boolean, "applies": pl.Boolean,
    "exact_match": pl.Boolean, "error": pl.Utf8, "output": pl.Utf8,
}


def records_frame(records: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in RECORD_SCHEMA} for r in records], schema=RECORD_SCHEMA)


def grammar_rows(records: pl.DataFrame, case_ids: list[str], model: str) -> list[dict]:
    """The pilot's own held-out program decodes of `case_ids` (kernels_profile.stages.pilot: the base model before
    fine-tuning, each program adapter after), as rows of this table: decoded under the grammar, so every output is
    a program within the input's lines; well formed here means the model ended it itself, within its budget (the
    grammar completes a cut-off program)."""
    rows = records.filter((pl.col("split") == "heldout") & (pl.col("mode") == "program")
                          & pl.col("case_id").is_in(case_ids))
    out = []
    for r in rows.iter_rows(named=True):
        before = r["phase"] == "before"
        out.append({"model": model, "variant": "base model" if before else f"program adapter, seed {r['seed']}",
                    "prompt": "the pilot's program prompt (no example)" if before else "its training prompt (no example)",
                    "decoding": GRAMMAR, "format": PROGRAM, "case_id": r["case_id"], "kind": r["kind"],
                    "budget": r["budget"], "tokens": r["program_tokens"], "stopped": r["stopped"],
                    "seconds": r["seconds"], "well_formed": bool(r["valid"]), "range_error": False if r["error"] is None
                    else None, "applies": r["error"] is None and r["output"] is not None,
                    "exact_match": bool(r["exact_match"]), "error": r["error"], "output": r["program"]})
    return out


def _share(k: int, n: int) -> tuple[float | None, float | None, float | None]:
    if n == 0:
        return None, None, None
    low, high = clopper_pearson(k, n)
    return k / n, low, high


ROW_KEYS = ("model", "variant", "prompt", "decoding", "format")


def formats_table(records: pl.DataFrame) -> pl.DataFrame:
    """Per model, variant, prompt, decoding and format: the cases, and the share written well formed, with a range
    error (of the well-formed ones; blank where the format has no line numbers), that applied, and exactly right,
    each with its exact 95% Clopper-Pearson interval."""
    rows = []
    for key, part in records.group_by(list(ROW_KEYS), maintain_order=True):
        n = part.height
        wf = int(part["well_formed"].sum())
        ranged = part.filter(pl.col("well_formed") & pl.col("range_error").is_not_null())
        row = dict(zip(ROW_KEYS, key), cases=n, tokens_mean=part["tokens"].mean(),
                   stopped_by_itself=int((part["stopped"] == "eos").sum()))
        for name, k, of in (("well_formed", wf, n), ("range_errors", int(ranged["range_error"].sum()), ranged.height),
                            ("applies", int(part["applies"].sum()), n),
                            ("exact_match", int(part["exact_match"].sum()), n)):
            share, low, high = _share(k, of)
            row |= {f"{name}_n": k, name: share, f"{name}_ci_low": low, f"{name}_ci_high": high}
        row["range_errors_of"] = ranged.height
        rows.append(row)
    order = {f: i for i, f in enumerate(FORMATS)}
    return pl.DataFrame(rows).with_columns(
        pl.col("format").replace_strict(order, return_dtype=pl.Int64).alias("_order")).sort(
        ["model", "variant", "decoding", "_order"]).drop("_order") if rows else pl.DataFrame()


def formats_metrics(records: pl.DataFrame) -> dict:
    """pilot.json's `formats`: the cases checked and the table's rows (analysis.results.pilot reads them back)."""
    table = formats_table(records)
    return {"cases": records["case_id"].n_unique() if records.height else 0,
            "case_ids": sorted(set(records["case_id"].to_list())), "rows": table.to_dicts()}


# ---------------------------------------------------------------- what the pilot page shows

def _count(row: dict, name: str, of: str = "cases") -> str:
    return f"{row[f'{name}_n']}/{row[of]}"


def page_table(rows: list[dict]) -> pl.DataFrame:
    """pilot.json's format rows as the page shows them: counts as k/n beside each share's 95% interval."""
    out = []
    for r in rows:
        out.append({"variant": r["variant"], "prompt": r["prompt"], "decoding": DECODING_LABELS.get(r["decoding"], r["decoding"]),
                    "format": FORMAT_LABELS.get(r["format"], r["format"]), "cases": r["cases"],
                    "well formed": _count(r, "well_formed"), "well formed, 95% CI": _interval(r, "well_formed"),
                    "range errors (of well formed)": (_count(r, "range_errors", "range_errors_of")
                                                      if r["format"] != SEARCH_REPLACE else "no line numbers"),
                    "applies": _count(r, "applies"), "exact match": _count(r, "exact_match"),
                    "exact match, 95% CI": _interval(r, "exact_match"),
                    "stopped by itself": f"{r['stopped_by_itself']}/{r['cases']}",
                    "tokens (mean)": r["tokens_mean"]})
    return pl.DataFrame(out)


def _interval(row: dict, name: str) -> str:
    low, high = row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")
    return "" if low is None else f"[{100 * low:.0f}%, {100 * high:.0f}%]"


def lead_tiles(formats: dict | None) -> list[tuple[str, str]]:
    """The page lead's tiles (label, value) of the edit-format check: per variant decoded without the grammar, each
    format's well-formed count (and exact matches, in the label) on the checked cases."""
    rows = [r for r in (formats or {}).get("rows", []) if r["decoding"] == FREE]
    tiles = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        value = " · ".join(f"{FORMAT_LABELS[r['format']]} {_count(r, 'well_formed')}" for r in mine)
        exact = ", ".join(f"{FORMAT_LABELS[r['format']]} {_count(r, 'exact_match')}" for r in mine)
        tiles.append((f"well formed without the grammar, {variant} ({mine[0]['prompt']}); exact match: {exact}", value))
    return tiles


def examples(records: pl.DataFrame, per_format: int = 1) -> pl.DataFrame:
    """What the model wrote, unconstrained: per variant and format the first `per_format` cases, with the parser's
    verdict and its message."""
    free = records.filter(pl.col("decoding") == FREE)
    picked = free.group_by(["variant", "format"], maintain_order=True).head(per_format)
    return picked.select("variant", pl.col("format").replace_strict(FORMAT_LABELS, default=pl.col("format")),
                         "case_id", "stopped", "well_formed", "applies", "exact_match",
                         pl.col("error").fill_null(""), pl.col("output").fill_null(""))


def summary_sentence(formats: dict | None) -> str:
    """The check in one sentence (the README's pilot paragraph): per variant and decoding, each format's well-formed
    and exact counts; '' when the run has none."""
    rows = (formats or {}).get("rows") or []
    if not rows:
        return ""
    parts = []
    for (variant, decoding, prompt) in dict.fromkeys((r["variant"], r["decoding"], r["prompt"]) for r in rows):
        mine = [r for r in rows if (r["variant"], r["decoding"], r["prompt"]) == (variant, decoding, prompt)]
        counts = ", ".join(f"{FORMAT_LABELS[r['format']]} {_count(r, 'well_formed')} well formed, "
                           f"{_count(r, 'exact_match')} exact" for r in mine)
        parts.append(f"{variant}, {DECODING_LABELS.get(decoding, decoding)} ({prompt}): {counts}")
    return (f"Which edit format the model writes correctly, on {formats['cases']} held-out cases, each read by its own "
            f"parser: " + "; ".join(parts) + ".")
