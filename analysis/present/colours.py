"""One colour per series across every page (C4): the index's key charts, the reports and the stages' figures
draw the same model, AR loop, kernel source, corpus, level or variant in the same colour, whatever else
shares the chart. `colour_of(label)` names a series' colour from its label alone; labels it does not know
get the next free colour of a fallback palette, in the order they appear in one chart.

A kernel series is known by its model and AR loop wherever it appears: `qwen2.5-7b, eager` on the kernel
chart, `h200/qwen2.5-7b/eager` on the bounds chart and in the tables are one colour.
"""

from __future__ import annotations

import re

from analysis.errors import ParamsError
from analysis.rivals.methods import AR, COPY, FORMAT, FORMATS, PLD, PLD_KS, SUFFIX, vocabulary

# (model, AR loop) of the kernel sources: a hue per model, lighter for the graph-captured loop
KERNEL_COLOURS = {
    ("qwen2.5-0.5b", "eager"): "#2ca02c",
    ("qwen2.5-1.5b", "eager"): "#1f77b4",
    ("qwen2.5-1.5b", "static_compiled"): "#9ecae1",
    ("qwen2.5-1.5b", "device_time"): "#17becf",
    ("qwen2.5-7b", "eager"): "#d62728",
    ("qwen2.5-7b", "static_compiled"): "#fc9272",
    ("qwen2.5-7b", "device_time"): "#e377c2",
}
NAMED_COLOURS = {
    # kernel sources by name
    "fit": "#2ca02c", "paper": "#7f7f7f", "paper (A100, bf16)": "#7f7f7f",
    # models of the e2e and pilot runs
    "smollm2-135m": "#9467bd", "qwen2.5-0.5b": "#2ca02c", "qwen2.5-1.5b": "#1f77b4", "qwen2.5-7b": "#d62728",
    # corpora and their pools
    "HEvalFix-Py": "#4c78a8", "HEvalFix-JS": "#f58518", "ProbeEdit-S": "#54a24b", "ProbeEdit-S*": "#54a24b",
    "CommitEdits-click": "#b279a2", "CommitEdits-express": "#9d755d", "pooled": "#222222",
    "pooled (ratio of sums)": "#222222", "pooled (mean of corpora)": "#888888",
    # levels, variants, spans, perturbation kinds, pilot modes
    "line": "#4c78a8", "token": "#e45756", "ideal": "#4c78a8", "overhead": "#f58518",
    "copy": "#54a24b", "gen": "#f58518", "start": "#4c78a8", "end": "#f58518", "both": "#54a24b", "shift": "#e45756",
    "program": "#4c78a8", "rewrite": "#f58518",
}
FALLBACK = ("#8c564b", "#bcbd22", "#ff7f0e", "#7b4173", "#637939", "#393b79", "#e7ba52", "#843c39", "#17becf",
            "#aec7e8", "#98df8a", "#c5b0d5")


def kernel_key(label: str) -> tuple[str, str] | None:
    """(model, AR loop) of a kernel series label (`qwen2.5-7b, eager ...`) or kernel source name
    (`h200/qwen2.5-7b/eager`, `h200-devtime/qwen2.5-7b`); None for anything else."""
    for model, loop in KERNEL_COLOURS:
        if re.match(rf"{re.escape(model)}, {re.escape(loop)}\b", label):
            return model, loop
        if re.search(rf"(^|/){re.escape(model)}/{re.escape(loop)}$", label):
            return model, loop
        if loop == "device_time" and re.search(rf"devtime/{re.escape(model)}$", label):
            return model, loop
    return None


def colour_of(label: str) -> str | None:
    """The shared colour of a series label, or None when no page fixes one (the fallback palette decides)."""
    key = kernel_key(label)
    if key is not None:
        return KERNEL_COLOURS[key]
    if label in NAMED_COLOURS:
        return NAMED_COLOURS[label]
    base = re.sub(r" \(.*\)$", "", label)  # `fit (eager AR)`, `pooled (ratio of sums)` fall back to their name
    return NAMED_COLOURS.get(base)


def palette(labels: list[str]) -> list[str]:
    """One colour per label, in order: the shared colour where there is one, else the next fallback colour
    that no other label of this chart uses."""
    fixed = [colour_of(label) for label in labels]
    spare = [c for c in FALLBACK if c not in fixed]
    out = []
    for colour in fixed:
        out.append(colour if colour is not None else (spare.pop(0) if spare else "#999999"))
    return out


# ---------------------------------------------------------------- methods: one colour per method on every chart
# More methods than any 10-colour palette (prompt lookup alone is 12 settings): a hue per family, a shade per
# setting (prompt lookup light to dark by k, one hue per match policy), and the role drawn as the dash
# (`ROLE_DASHES`), so AR, a rival and Copy-as-Decode never share a colour and the bound never looks deployable.
_PLD_SHADES = {"earliest": ("#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08306b"),
               "latest": ("#c7e9c0", "#a1d99b", "#74c476", "#41ab5d", "#238b45", "#00441b")}
_COPY_SHADES = {("line", "decoded"): "#d62728", ("line", "jump"): "#ff7f0e", ("line", "ideal"): "#f7b6b2",
                ("token", "decoded"): "#9467bd", ("token", "jump"): "#e377c2", ("token", "ideal"): "#d9c6ea"}
_FORMAT_SHADES = dict(zip(FORMATS, ("#8c564b", "#bcbd22")))
_SUFFIX_SHADES = {False: "#17becf", True: "#9edae5"}
FAMILY_BEST = {PLD: "#111111", SUFFIX: "#0b7f8c", FORMAT: "#5c3a2e", COPY: "#7f0000", AR: "#7f7f7f"}
ROLE_DASHES = {"baseline": [2, 2], "copy": [1, 0], "rival": [6, 3], "bound": [1, 3], "ideal": [1, 3]}


def _method_colour(method) -> str:
    if method.family == AR:
        return FAMILY_BEST[AR]
    if method.family == PLD:
        return _PLD_SHADES[method.policy][PLD_KS.index(method.k)]
    if method.family == SUFFIX:
        return _SUFFIX_SHADES[method.cache]
    if method.family == FORMAT:
        return _FORMAT_SHADES[method.fmt]
    return _COPY_SHADES[(method.level, method.variant)]


METHOD_COLOURS = {key: _method_colour(m) for m in vocabulary() for key in (m.name, m.label)}


def method_colour(name: str, family: str | None = None) -> str:
    """A method's colour by its name or label (analysis.rivals.methods); a name outside the vocabulary (a
    family's best member at each load, e.g. prompt lookup at its best k) takes its family's dark shade."""
    if name in METHOD_COLOURS:
        return METHOD_COLOURS[name]
    if family in FAMILY_BEST:
        return FAMILY_BEST[family]
    raise ParamsError(f"no colour for method {name!r}: not in the rivals' vocabulary and no family given")


def method_palette(names, families: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(domain, range) of a colour scale over method names, each its one colour on every chart."""
    domain = sorted({str(n) for n in names if n is not None})
    return domain, [method_colour(n, (families or {}).get(n)) for n in domain]
