"""Published figures on the corpora this suite runs (`analysis/data/published_figures.json`): another method's
speedup as its paper states it, with the models, device and measurement behind it, read back as typed values.

Such a figure is shown beside this run's rows of the same corpus (the rivals page, the claims row) and never
judged against them: it measures another model on another device end to end, where this suite prices the gold
tokens' forwards under its kernel sources, so it is "not comparable", with this run's measured family beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from analysis.errors import ParamsError

PUBLISHED_FIGURES = Path(__file__).parents[1] / "data" / "published_figures.json"
NOT_COMPARABLE_WHY = "not comparable: another model, device and measurement"


@dataclass(frozen=True)
class PublishedFigure:
    method: str       # the published method (EfficientEdit)
    corpus: str       # this suite's corpus name it was measured on
    speedup: float    # over `against`
    qualifier: str    # "up to" for a best case, "" for a pooled figure
    against: str      # its baseline
    models: str       # the models it ran
    device: str
    measured: str     # how: end to end, a simulation, a bound
    summary: str      # the conditions in a few words, for a table cell
    mechanism: str
    also: str         # the paper's other figures, for context
    source: str
    url: str

    def figure(self) -> str:
        """`up to 10.38x`, as published (the qualifier kept: a best case is never read as a pooled figure)."""
        return f"{self.qualifier} {self.speedup:g}x".strip()

    def conditions(self) -> str:
        return f"{self.models}; {self.device}; {self.measured}"

    def beside(self) -> str:
        """A few words for a claims row or a table cell: the figure, its conditions, not judged."""
        return f"{self.method}'s published {self.figure()} ({self.summary}): not comparable"

    def described(self) -> str:
        """The whole statement, for a page: the figure, what it is over, its conditions and source."""
        return (f"{self.method}: {self.figure()} over {self.against} ({self.conditions()}; {self.source}); "
                f"{NOT_COMPARABLE_WHY}")


def _figure(entry: object, where: str) -> PublishedFigure:
    if not isinstance(entry, dict):
        raise ParamsError(f"{where}: must be an object, got {type(entry).__name__}")
    names = {f.name: f.type for f in fields(PublishedFigure)}
    unknown, missing = sorted(set(entry) - set(names)), sorted(set(names) - set(entry))
    if unknown or missing:
        raise ParamsError(f"{where}: " + "; ".join(part for part in (
            f"unknown keys {unknown}" if unknown else "", f"missing keys {missing}" if missing else "") if part))
    speedup = entry["speedup"]
    if isinstance(speedup, bool) or not isinstance(speedup, (int, float)) or not speedup > 0:
        raise ParamsError(f"{where}.speedup: must be a positive number, got {speedup!r}")
    texts = {k: v for k, v in entry.items() if k != "speedup"}
    bad = sorted(k for k, v in texts.items() if not isinstance(v, str))
    if bad:
        raise ParamsError(f"{where}: {bad} must be text")
    return PublishedFigure(**texts, speedup=float(speedup))


def published_figures(path: Path = PUBLISHED_FIGURES) -> tuple[PublishedFigure, ...]:
    """Every published figure of the file, checked (a missing or misspelt key is named)."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ParamsError(f"{path}: cannot read the published figures ({exc})") from None
    entries = document.get("figures") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ParamsError(f"{path}: must hold an object with a list `figures`")
    return tuple(_figure(entry, f"{path} figures[{i}]") for i, entry in enumerate(entries))


def published_for(corpus: str, figures: tuple[PublishedFigure, ...] | None = None) -> tuple[PublishedFigure, ...]:
    """The published figures measured on `corpus`."""
    return tuple(f for f in (published_figures() if figures is None else figures) if f.corpus == corpus)
