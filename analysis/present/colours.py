"""One colour per series across every page: the index's key charts, the reports and the stages' figures
draw the same model, AR loop, kernel source, corpus, level or variant in the same colour, whatever else
shares the chart. `colour_of(label)` names a series' colour from its label alone; labels it does not know
get the next free colour of a fallback palette, in the order they appear in one chart.

A kernel series is known by its model and AR loop wherever it appears: `qwen2.5-7b, eager` on the kernel
chart, `h200/qwen2.5-7b/eager` on the bounds chart and in the tables are one colour.
"""

from __future__ import annotations

import re

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
