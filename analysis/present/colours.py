"""One colour per series across every page: the index's key charts, the reports and the stages' figures
draw the same model, AR loop, kernel source, corpus, level or variant in the same colour, whatever else
shares the chart. `colour_of(label)` names a series' colour from its label alone; labels it does not know
get the next free colour of a fallback palette, in the order they appear in one chart.

A kernel series is known by its device, model and AR loop wherever it appears: `qwen2.5-7b, eager` on the kernel
chart, `h200/qwen2.5-7b/eager` on the bounds chart and in the tables are one colour. The device is the kernel
source's first name part (`h200`, `h200-devtime`: device time on the same GPU); the reference device keeps the
model-and-loop colour, any other device (a new GPU source, named only in params) a darker shade of it picked from
its name, so two devices' lines of one model and loop never share a colour and no edit here is needed.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib

from analysis.errors import ParamsError
from analysis.rivals.methods import Method, families, parse_method

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
REFERENCE_DEVICES = ("", "h200")  # the devices whose kernel lines take KERNEL_COLOURS as they are
DEVICE_TIME_SUFFIX = "-devtime"   # a device-time source is named after its GPU (`h200-devtime`)
DEVICE_SHADES = (0.3, 0.45, 0.6)  # how far another device's lines are darkened towards black
NAMED_COLOURS = {
    # kernel sources by name
    "fit": "#2ca02c", "paper": "#7f7f7f", "paper (A100, bf16)": "#7f7f7f",
    # models of the e2e and pilot runs
    "smollm2-135m": "#9467bd", "qwen2.5-0.5b": "#2ca02c", "qwen2.5-1.5b": "#1f77b4", "qwen2.5-7b": "#d62728",
    # corpora and their pools
    "HEvalFix-Py": "#4c78a8", "HEvalFix-JS": "#f58518", "ProbeEdit-S": "#54a24b", "ProbeEdit-S*": "#54a24b",
    "CommitEdits-click": "#b279a2", "CommitEdits-express": "#9d755d", "CanItEdit": "#72b7b2", "EditEval": "#eeca3b",
    "pooled": "#222222",
    "pooled (ratio of sums)": "#222222", "pooled (mean of corpora)": "#888888",
    # levels, variants, spans, perturbation kinds, pilot modes
    "line": "#4c78a8", "token": "#e45756", "ideal": "#4c78a8", "overhead": "#f58518",
    "copy": "#54a24b", "gen": "#f58518", "start": "#4c78a8", "end": "#f58518", "both": "#54a24b", "shift": "#e45756",
    "program": "#4c78a8", "rewrite": "#f58518",
}
FALLBACK = ("#8c564b", "#bcbd22", "#ff7f0e", "#7b4173", "#637939", "#393b79", "#e7ba52", "#843c39", "#17becf",
            "#aec7e8", "#98df8a", "#c5b0d5")


def kernel_device(source: str) -> str:
    """The device of a kernel-source name: its first `/` part without the device-time suffix (`h200-devtime/...`
    and `h200/...` are one GPU); '' for a name with one part (`fit`, `paper`)."""
    parts = str(source).split("/")
    return parts[0].removesuffix(DEVICE_TIME_SUFFIX) if len(parts) > 1 else ""


def kernel_key(label: str) -> tuple[str, str, str] | None:
    """(device, model, AR loop) of a kernel series label (`qwen2.5-7b, eager ...`, `h100: qwen2.5-7b, eager ...`
    where a chart holds several devices) or kernel source name (`h200/qwen2.5-7b/eager`, `h200-devtime/qwen2.5-7b`);
    None for anything else."""
    device, _, rest = label.partition(": ") if re.match(r"^[a-z0-9][a-z0-9._-]*: ", label) else ("", "", label)
    for model, loop in KERNEL_COLOURS:
        if re.match(rf"{re.escape(model)}, {re.escape(loop)}\b", rest):
            return device, model, loop
        if re.search(rf"(^|/){re.escape(model)}/{re.escape(loop)}$", rest):
            return kernel_device(rest), model, loop
        if loop == "device_time" and re.search(rf"devtime/{re.escape(model)}$", rest):
            return kernel_device(rest), model, loop
    return None


def device_prefixes(sources) -> dict[str, str]:
    """kernel source -> `<device>: ` to put before its line's label where the sources span several devices, else ''."""
    sources = [str(s) for s in dict.fromkeys(sources)]
    several = len({kernel_device(s) for s in sources} - {""}) > 1
    return {s: f"{kernel_device(s)}: " if several and kernel_device(s) else "" for s in sources}


def device_colour(base: str, device: str) -> str:
    """`base` on the reference device; on any other, a darker shade of it chosen by the device's name."""
    if device in REFERENCE_DEVICES:
        return base
    return _mix(base, "#000000", DEVICE_SHADES[zlib.crc32(device.encode()) % len(DEVICE_SHADES)])


def colour_of(label: str) -> str | None:
    """The shared colour of a series label, or None when no page fixes one (the fallback palette decides)."""
    key = kernel_key(label)
    if key is not None:
        device, model, loop = key
        return device_colour(KERNEL_COLOURS[(model, loop)], device)
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
# More methods than any 10-colour palette (prompt lookup alone is a dozen settings): a hue per family (per match
# policy for prompt lookup), a shade per setting (light to dark by draft budget k, unbounded darkest), and the
# role drawn as the dash (`ROLE_DASHES`), so AR, a rival and Copy-as-Decode never share a colour and the bound
# never looks deployable. A family registered later (analysis.rivals.families) takes the next spare hue in
# family order, so a new rival needs no edit here.
_RAMPS = {  # (lightest, darkest) of each hue
    "blue": ("#c6dbef", "#08306b"), "green": ("#c7e9c0", "#00441b"), "teal": ("#b2e2e2", "#01665e"),
    "brown": ("#e6d0b8", "#5c3a2e"), "purple": ("#dadaeb", "#3f007d"), "olive": ("#e5eaa8", "#4d5a00"),
    "pink": ("#fcc5c0", "#7a0177"), "gold": ("#fee391", "#8c5a00"), "slate": ("#d0d7de", "#2f3b45"),
}
_FAMILY_HUES = {"pld": {"earliest": "blue", "latest": "green"}, "suffix": "teal", "formats": "brown"}
_COPY_SHADES = {("line", "decoded"): "#d62728", ("line", "jump"): "#ff7f0e", ("line", "ideal"): "#f7b6b2",
                ("token", "decoded"): "#9467bd", ("token", "jump"): "#e377c2", ("token", "ideal"): "#d9c6ea"}
AR_COLOUR = "#7f7f7f"
ROLE_DASHES = {"baseline": [2, 2], "copy": [1, 0], "hybrid": [4, 2, 1, 2], "rival": [6, 3], "bound": [1, 3], "ideal": [1, 3]}
K_SPREAD = 7  # log2 of the draft budget that reaches the ramp's darker end (k = 128); unbounded is the darkest


def _hue(family: str, policy: str | None) -> str:
    """The hue of a family (of one prompt-lookup policy): fixed for the first families, then the spare hues in
    family order (every registered family, so the assignment does not depend on what one chart draws)."""
    fixed = _FAMILY_HUES.get(family)
    if isinstance(fixed, dict):
        return fixed.get(policy, next(iter(fixed.values())))
    if fixed is not None:
        return fixed
    taken = {h for v in _FAMILY_HUES.values() for h in (v.values() if isinstance(v, dict) else (v,))}
    spare = [h for h in _RAMPS if h not in taken]
    others = [f.name for f in families() if f.name not in _FAMILY_HUES and f.name not in ("ar", "copy")]
    return spare[others.index(family) % len(spare)] if family in others else "slate"


def _mix(light: str, dark: str, t: float) -> str:
    a, b = (tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in (light, dark))
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _shade(m: Method) -> float:
    """0 (lightest) to 1 (darkest): by draft budget where the family has one (unbounded 1), by its place among
    the family's other settings otherwise."""
    settings = [f for f in m.spec.fields if f not in ("k", "policy")]
    by_k = 1.0 if m.k is None else 0.15 + 0.7 * min(math.log2(max(m.k, 1)) / K_SPREAD, 1.0)
    if "k" in m.spec.fields and not settings:
        return by_k
    if "k" in m.spec.fields and all(isinstance(getattr(m, f), bool) for f in settings):
        # a budget and on/off switches (suffix decoding's cross-request cache): by budget, a switch a shade darker,
        # so members at several budgets never share a colour
        return min(by_k + 0.07 * sum(getattr(m, f) for f in settings), 1.0)
    if settings and all(f in m.spec.choices for f in settings):
        # a family whose members differ by more than k (the hybrid: level and directives) shades by its place
        # among those settings, so two members at one k never share a colour
        places = list(itertools.product(*(m.spec.choices[f] for f in settings)))
        place = places.index(tuple(getattr(m, f) for f in settings))
        return 0.25 + 0.7 * place / max(len(places) - 1, 1)
    key = m.spec.member_key(m)
    return 0.35 + 0.3 * (sum(key) % 3)


def _method_colour(m: Method) -> str:
    if m.family == "ar":
        return AR_COLOUR
    if m.family == "copy":
        return _COPY_SHADES[(m.level, m.directives)]
    light, dark = _RAMPS[_hue(m.family, m.policy)]
    if m.family == "formats":
        return _mix(light, dark, 0.5 if m.fmt == "unified-diff" else 0.9)
    return _mix(light, dark, _shade(m))


def family_colour(family: str) -> str:
    """A family's own colour (darker than any of its members): a row that stands for the family's best member at
    each load."""
    if family == "ar":
        return AR_COLOUR
    if family == "copy":
        return "#7f0000"
    return _mix(_RAMPS[_hue(family, None)][1], "#000000", 0.5)


def method_colour(name: str, family: str | None = None) -> str:
    """A method's colour by its name (analysis.rivals.methods); a name that is a family standing for its best member
    at each load (serving's `best_member` rows) takes the family's dark shade."""
    if family is not None and name == family:
        return family_colour(family)
    try:
        return _method_colour(parse_method(name))
    except ParamsError:
        if family is not None:
            return family_colour(family)
        raise ParamsError(f"no colour for method {name!r}: not a method name and no family given") from None


def method_palette(names, families: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(domain, range) of a colour scale over method names, each its one colour on every chart."""
    domain = sorted({str(n) for n in names if n is not None})
    return domain, [method_colour(n, (families or {}).get(n)) for n in domain]
