"""`copydecode compare`'s outputs: markdown (the terminal and compare.md), the page (compare.html, in the
reports' own style, with both runs' provenance and the params that differ) and compare.json."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from analysis.tools.comparison import Comparison, Difference, Run
from analysis.present.pages import esc, lead
from analysis.present.provenance import provenance, provenance_html
from analysis.present.shell import page

HEADER = ["figure", "corpus", "n", "A", "B", "B - A", "change", "CI of B - A", "sign test p", "significant"]
PARAMS_SHOWN = 40  # differing params keys listed (the rest counted)
VALUE_CHARS = 80   # a params value longer than this is cut in the tables
CMP_CSS = """
table.cd-cmp { border-collapse: collapse; font-size: 14px; margin: 8px 0 16px; }
table.cd-cmp th, table.cd-cmp td { border-bottom: 1px solid var(--rule); padding: 3px 10px; text-align: right; }
table.cd-cmp th { background: #f6f8fa; } table.cd-cmp td.cd-text, table.cd-cmp th.cd-text { text-align: left; }
table.cd-cmp tr.cd-sig td { background: #fff3c4; } table.cd-cmp td { font-variant-numeric: tabular-nums; }
"""


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}"


def _change(r: Difference) -> str:
    change = r.change
    return "-" if change is None else f"{change * 100:+.1f}%"


def _cells(r: Difference) -> list[str]:
    return [r.figure, r.corpus, str(r.n), _fmt(r.a), _fmt(r.b), _fmt(r.diff), _change(r),
            f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]", _fmt(r.p_value, 3), "yes" if r.significant else "no"]


def _named(ids: list[str], count: int) -> str:
    return f" ({', '.join(ids)}{', ...' if count > len(ids) else ''})" if ids else ""


def notes(c: Comparison) -> list[str]:
    out = []
    for table, (n_a, n_b, ids_a, ids_b) in c.unpaired.items():
        if n_a or n_b:
            out.append(f"{table}: {n_a} case ids only in A{_named(ids_a, n_a)}, {n_b} only in B{_named(ids_b, n_b)}; "
                       "not compared")
    out += [f"{m}: not compared" for m in c.missing]
    return out + list(c.notes)


def method(c: Comparison) -> str:
    s = c.settings
    return (f"A = {c.a.label}, B = {c.b.label}. Each table is reduced to one value per case (perturbation and pilot "
            f"seeds averaged per case), then paired on the cases both runs have; {s.ci:.0%} paired percentile bootstrap "
            f"CI of B - A over cases ({s.resamples} resamples, seed {s.seed}); change = (B - A) / |A|. Exact-match "
            f"figures also get the exact sign test on the per-case differences (McNemar's exact test when each case "
            f"has one seed); significant: the CI excludes 0 (and, for exact match, p < {s.alpha}). Framing "
            f"{s.framing} plus the single-framing corpora; span noise at rate {s.perturb_rate:g}.")


# ---------------------------------------------------------------- params

def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a params mapping; a list is one value."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out |= flatten(value, dotted)
        else:
            out[dotted] = value
    return out


ABSENT = "(absent)"


def params_diff(a: dict | None, b: dict | None) -> list[tuple[str, str, str]] | None:
    """(key, A's value, B's value) for every setting that differs, sorted; None when either run's params are
    unknown."""
    if a is None or b is None:
        return None
    fa, fb = flatten(a), flatten(b)

    def text(values: dict, key: str) -> str:
        if key not in values:
            return ABSENT
        shown = json.dumps(values[key], sort_keys=True, default=str)
        return shown if len(shown) <= VALUE_CHARS else shown[:VALUE_CHARS - 1] + "…"

    return [(k, text(fa, k), text(fb, k)) for k in sorted(set(fa) | set(fb)) if fa.get(k, ABSENT) != fb.get(k, ABSENT)]


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _params_lines(c: Comparison) -> list[str]:
    diff = params_diff(c.a.params, c.b.params)
    if diff is None:
        return [f"Params of A: {c.a.params_from}; of B: {c.b.params_from}: no diff shown."]
    if not diff:
        return [f"The params files are identical ({c.a.params_from}; {c.b.params_from})."]
    lines = [f"{len(diff)} setting(s) differ ({c.a.params_from} -> {c.b.params_from}):", "",
             "| setting | A | B |", "|---|---|---|"]
    lines += [f"| `{k}` | {_md(va)} | {_md(vb)} |" for k, va, vb in diff[:PARAMS_SHOWN]]
    if len(diff) > PARAMS_SHOWN:
        lines += ["", f"... and {len(diff) - PARAMS_SHOWN} more (compare.json lists all)"]
    return lines


# ---------------------------------------------------------------- markdown

def _run_line(name: str, run: Run) -> str:
    read = ", ".join(f"{t} from {where}" for t, where in run.sources.items())
    return f"- {name}: {run.where}; read {read}"


def to_markdown(c: Comparison) -> str:
    sig = sum(r.significant for r in c.rows)
    lines = [f"# Comparison: {c.a.label} vs {c.b.label}", "", f"{sig} of {len(c.rows)} figures differ significantly.",
             "", _run_line("A", c.a), _run_line("B", c.b), "", "## What changed in params", "", *_params_lines(c),
             "", "## Figures", ""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(r)) + " |" for r in c.rows]
    lines += ["", method(c)]
    extra = notes(c)
    if extra:
        lines += ["", *[f"- {n}" for n in extra]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- html

def _run_rows(name: str, run: Run, out_dir: Path) -> str:
    read = "<br>".join(f"{esc(t)}: {esc(w)}" for t, w in run.sources.items())
    link = ""
    if run.index is not None:
        href = os.path.relpath(run.index.resolve(), out_dir.resolve())
        link = f"<a href='{esc(Path(href).as_posix())}'>its reports</a>"
    return (f"<tr><td class='cd-text'>{esc(name)}</td><td class='cd-text'>{esc(run.label)}</td>"
            f"<td class='cd-text'>{esc(run.where)}</td><td class='cd-text'>{read}</td>"
            f"<td class='cd-text'>{esc(run.params_from)}</td><td class='cd-text'>{link}</td></tr>")


def _params_html(c: Comparison) -> str:
    diff = params_diff(c.a.params, c.b.params)
    if diff is None:
        return f"<p>Params of A: {esc(c.a.params_from)}; of B: {esc(c.b.params_from)}: no diff shown.</p>"
    if not diff:
        return "<p>The two runs' params files are identical.</p>"
    rows = "".join(f"<tr><td class='cd-text'><code>{esc(k)}</code></td><td class='cd-text'>{esc(va)}</td>"
                   f"<td class='cd-text'>{esc(vb)}</td></tr>" for k, va, vb in diff[:PARAMS_SHOWN])
    more = (f"<p class='cd-note'>... and {len(diff) - PARAMS_SHOWN} more (compare.json lists all)</p>"
            if len(diff) > PARAMS_SHOWN else "")
    return (f"<p>{len(diff)} setting(s) differ.</p><table class='cd-cmp'><thead><tr><th class='cd-text'>setting</th>"
            f"<th class='cd-text'>A</th><th class='cd-text'>B</th></tr></thead><tbody>{rows}</tbody></table>{more}")


def to_html(c: Comparison, out_dir: Path = Path(".")) -> str:
    """The comparison as a page in the reports' style: summary cards, both runs, the params diff, the figures
    (significant rows highlighted), the method, notes and this comparison's provenance. Everything escaped."""
    sig = sum(r.significant for r in c.rows)
    cases = max((r.n for r in c.rows), default=0)
    head = "".join(f"<th class='{'cd-text' if i < 2 else ''}'>{esc(h)}</th>" for i, h in enumerate(HEADER))
    body = "\n".join(
        f"<tr class='{'cd-sig' if r.significant else ''}'>"
        + "".join(f"<td class='{'cd-text' if i < 2 else ''}'>{esc(cell)}</td>" for i, cell in enumerate(_cells(r)))
        + "</tr>" for r in c.rows)
    extra = "".join(f"<li>{esc(n)}</li>" for n in notes(c))
    title = f"Comparison: {c.a.label} vs {c.b.label}"
    content = (
        f"<style>{CMP_CSS}</style><h1>{esc(title)}</h1>"
        + lead(f"{sig} of {len(c.rows)} figures differ significantly between A ({c.a.label}) and B ({c.b.label}).",
               [("figures", str(len(c.rows))), ("differ significantly", str(sig)),
                ("paired cases (largest figure)", f"{cases:,}")]).text
        + "<h2>The two runs</h2><table class='cd-cmp'><thead><tr><th class='cd-text'></th><th class='cd-text'>run</th>"
          "<th class='cd-text'>what</th><th class='cd-text'>per-case tables read from</th>"
          "<th class='cd-text'>params</th><th class='cd-text'></th></tr></thead><tbody>"
        + _run_rows("A", c.a, out_dir) + _run_rows("B", c.b, out_dir) + "</tbody></table>"
        + "<h2>What changed in params</h2>" + _params_html(c)
        + f"<h2>Figures</h2><table class='cd-cmp'><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"
        + f"<p class='cd-note'>{esc(method(c))}</p>"
        + (f"<ul>{extra}</ul>" if extra else "")
        + provenance_html(provenance(Path("."))).text)
    return page(title, content)


def to_json(c: Comparison) -> dict:
    """Everything the page shows, machine-readable."""
    diff = params_diff(c.a.params, c.b.params)

    def run(r: Run) -> dict:
        return {"label": r.label, "where": r.where, "tables": r.sources, "params_from": r.params_from}

    return {"a": run(c.a), "b": run(c.b), "settings": asdict(c.settings),
            "params_diff": None if diff is None else [{"key": k, "a": va, "b": vb} for k, va, vb in diff],
            "figures": c.frame().to_dicts(), "notes": notes(c)}
