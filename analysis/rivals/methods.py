"""The rival methods: one closed vocabulary of the names in data/rivals/forwards.parquet's `method` column.

Every way of producing a case's gold output that the rivals stage simulates (analysis.rivals.simulate),
each with its standard and its best settings:

    ar                           whole rewrite: every gold token decoded, one forward each (the baseline)
    pld-<policy>-k<k>            prompt lookup decoding (analysis.rivals.pld) with gold acceptance, draft
                                 budget k in PLD_KS (`kinf`: unbounded), match policy `earliest` (the
                                 transformers PromptLookupCandidateGenerator standard) or `latest`
    suffix                       suffix decoding (analysis.rivals.suffix), per-request tree only
    suffix-cache                 suffix decoding with the cross-request response cache (params)
    unified-diff, search-replace edit formats (analysis.coverage.formats): every format token decoded,
                                 the apply step free
    copy-<level>-<variant>       Copy-as-Decode at line or token level: `decoded` (every directive token
                                 decoded: what a deployment pays), `jump` (the directive tokens the grammar
                                 forces are prefilled with the next forward instead of decoded), `ideal`
                                 (directive tokens free: an upper bound, never a rival)

`Method` is the typed value; `parse_method` turns a name back into one (a ParamsError names the
vocabulary); nothing else spells or splits a method name.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.errors import ParamsError

AR = "ar"
PLD, SUFFIX, FORMAT, COPY = "pld", "suffix", "format", "copy"
FAMILIES = (AR, PLD, SUFFIX, FORMAT, COPY)
PLD_POLICIES = ("earliest", "latest")
PLD_STANDARD = "earliest"              # transformers' PromptLookupCandidateGenerator takes the first match
PLD_KS: tuple[int | None, ...] = (5, 10, 16, 32, 64, None)  # None: unbounded (up to the end of the context)
FORMATS = ("unified-diff", "search-replace")
LEVELS = ("line", "token")
COPY_VARIANTS = ("decoded", "jump", "ideal")
SUFFIX_CACHE = "suffix-cache"

FAMILY_LABELS = {AR: "whole rewrite (AR)", PLD: "prompt lookup", SUFFIX: "suffix decoding",
                 FORMAT: "edit format", COPY: "Copy-as-Decode"}
VARIANT_LABELS = {"decoded": "directives decoded", "jump": "forced directive tokens jump-forwarded",
                  "ideal": "directives free (upper bound)"}


@dataclass(frozen=True, order=True)
class Method:
    """One method: its family and the settings that name it."""

    family: str
    policy: str | None = None      # pld: earliest | latest
    k: int | None = None           # pld: the draft budget (None: unbounded)
    fmt: str | None = None         # format: unified-diff | search-replace
    level: str | None = None       # copy: line | token
    variant: str | None = None     # copy: decoded | jump | ideal
    cache: bool = False            # suffix: the cross-request response cache on

    @property
    def name(self) -> str:
        if self.family == AR:
            return AR
        if self.family == PLD:
            return f"pld-{self.policy}-k{'inf' if self.k is None else self.k}"
        if self.family == SUFFIX:
            return SUFFIX_CACHE if self.cache else SUFFIX
        if self.family == FORMAT:
            return str(self.fmt)
        return f"copy-{self.level}-{self.variant}"

    @property
    def label(self) -> str:
        """How a table or chart names it."""
        if self.family == PLD:
            return f"prompt lookup ({self.policy}, k={'unbounded' if self.k is None else self.k})"
        if self.family == SUFFIX:
            return "suffix decoding" + (" (with response cache)" if self.cache else "")
        if self.family == FORMAT:
            return f"{self.fmt} (decoded)"
        if self.family == COPY:
            return f"Copy-as-Decode {self.level}, {VARIANT_LABELS[self.variant]}"
        return FAMILY_LABELS[AR]

    @property
    def speculative(self) -> bool:
        """Its forwards with q > 1 are speculative verifies (draft tokens may be rejected)."""
        return self.family in (PLD, SUFFIX)

    @property
    def is_bound(self) -> bool:
        """An upper bound, not a method a deployment can run (free directive tokens)."""
        return self.family == COPY and self.variant == "ideal"

    def __str__(self) -> str:
        return self.name


def pld(policy: str, k: int | None) -> Method:
    if policy not in PLD_POLICIES:
        raise ParamsError(f"prompt lookup policy must be one of {PLD_POLICIES}, got {policy!r}")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise ParamsError(f"prompt lookup draft budget k must be a positive integer or unbounded, got {k!r}")
    return Method(PLD, policy=policy, k=k)


def copy(level: str, variant: str) -> Method:
    if level not in LEVELS or variant not in COPY_VARIANTS:
        raise ParamsError(f"Copy-as-Decode method needs a level in {LEVELS} and a variant in {COPY_VARIANTS}, "
                          f"got {level!r}, {variant!r}")
    return Method(COPY, level=level, variant=variant)


def edit_format(fmt: str) -> Method:
    if fmt not in FORMATS:
        raise ParamsError(f"edit format must be one of {FORMATS}, got {fmt!r}")
    return Method(FORMAT, fmt=fmt)


def suffix(cache: bool = False) -> Method:
    return Method(SUFFIX, cache=bool(cache))


def vocabulary() -> tuple[Method, ...]:
    """Every method the rivals stage can write, in table order."""
    return (Method(AR),
            *(pld(p, k) for p in PLD_POLICIES for k in PLD_KS),
            suffix(False), suffix(True),
            *(edit_format(f) for f in FORMATS),
            *(copy(level, v) for level in LEVELS for v in COPY_VARIANTS))


METHODS: dict[str, Method] = {m.name: m for m in vocabulary()}
METHOD_NAMES = tuple(METHODS)


def parse_method(name: str) -> Method:
    """The Method a name stands for; a ParamsError listing the vocabulary for any other name."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ParamsError(f"unknown rival method {name!r}; the vocabulary (analysis.rivals.methods): "
                          f"{', '.join(METHOD_NAMES)}") from None
