"""What the drafters are built with, one `DraftSettings` for the rivals and the e2e stage (params
`<stage>.pld.ngram_max` and `<stage>.suffix.options`, and each family's own drafter settings from its group,
`Family.options`), read by one function with one rule.

The suffix tree's options must each be listed (every setting that changes a result lives in params; the
error names the missing ones with Arctic Inference's values), be finite numbers and pass
`SuffixSettings.validate`. Which methods a stage runs is not here: each family names its members
(analysis.rivals.methods.stage_methods; the e2e plan, kernels_profile.e2e.settings).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from analysis.errors import ParamsError
from analysis.pipeline.params import did_you_mean, get, positive_int
from analysis.rivals.families.pld import NGRAM_LIMIT
from analysis.rivals.families.suffix import DEFAULTS, SuffixSettings
from analysis.rivals.methods import families


@dataclass(frozen=True)
class DraftSettings:
    ngram_max: int              # prompt lookup's longest matched n-gram (transformers' max_matching_ngram_size)
    suffix: SuffixSettings      # the suffix tree's settings
    # (family name, its drafter's own settings): every family whose params group the stage has and that reads one
    # (Family.options); the e2e stage runs none of those families, so its drafts have none
    options: tuple[tuple[str, Any], ...]

    def of(self, family: str) -> Any:
        """The drafter settings of `family` (Family.options); a ParamsError naming its group when the stage had none."""
        for name, value in self.options:
            if name == family:
                return value
        raise ParamsError(f"method family {family!r} drafts with settings of its own, and the stage's params have no "
                          "group for it (e.g. rivals.<group>: docs/rivals.md)")

    def key(self) -> dict:
        """What of the drafters determines a measurement (a checkpoint key part)."""
        out = {"ngram_max": self.ngram_max, "suffix": {f.name: getattr(self.suffix, f.name) for f in fields(self.suffix)}}
        if self.options:  # absent when empty, so the keys of the stages that run none of those families do not move
            out["options"] = {name: asdict(value) for name, value in self.options}
        return out


def suffix_options(params: dict, dotted: str) -> SuffixSettings:
    """The suffix tree's settings at `dotted`: every one listed, each a finite number, checked by SuffixSettings."""
    options = get(params, dotted, dict)
    known = [f.name for f in fields(SuffixSettings)]
    for name, value in options.items():
        if name not in known:
            raise ParamsError(f"params: '{dotted}.{name}' is not a suffix decoding setting; known: {', '.join(known)}"
                              + did_you_mean(str(name), known))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ParamsError(f"params: '{dotted}.{name}' must be a finite number, got {value!r}")
    missing = [k for k in known if k not in options]
    if missing:
        raise ParamsError(f"params: {dotted!r} lacks {missing} (Arctic Inference's values: "
                          f"{ {k: getattr(DEFAULTS, k) for k in missing} })")
    try:
        return SuffixSettings(**options).validate()
    except ParamsError as exc:
        raise ParamsError(f"params: {dotted!r}: {exc}") from None


def draft_settings(params: dict, stage: str) -> DraftSettings:
    """`stage`'s drafter settings (params `<stage>.pld.ngram_max`, `<stage>.suffix.options`)."""
    ngram = positive_int(params, f"{stage}.pld.ngram_max")
    if ngram > NGRAM_LIMIT:
        raise ParamsError(f"params: '{stage}.pld.ngram_max' is {ngram}, above {NGRAM_LIMIT} (transformers' default: 2)")
    groups = get(params, stage, dict)
    options = tuple((f.name, value) for f in families()
                    if f.group in groups and (value := f.options(params, f"{stage}.{f.group}")) is not None)
    return DraftSettings(ngram, suffix_options(params, f"{stage}.suffix.options"), options)
