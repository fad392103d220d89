"""`copydecode compare`'s serving figures: the serving simulation's gains of two runs (reports/tables/serving_claim.csv,
read from a run folder or a git revision), named as `dvc metrics show` names them (analysis.present.headline's sv_
rows). They are simulated over seeded requests, not per case, so they are set side by side without a paired
interval."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analysis.pooling import POOLED
from analysis.present.headline import HeadlineSettings, serving_rows
from analysis.tools.comparison import Difference, Run

SERVING_CLAIM = Path("reports/tables/serving_claim.csv")


def read_csv(data: bytes) -> pl.DataFrame | None:
    """A run's serving claims table, None when it is not a readable CSV (its sv_ figures are then not compared,
    which the comparison's absence of sv_ rows shows; the per-case figures do not depend on it)."""
    import io

    try:
        return pl.read_csv(io.BytesIO(data), infer_schema_length=None)
    except Exception:  # noqa: BLE001 - any unreadable file: no serving figures, never a crash
        return None


def serving_differences(a: Run, b: Run) -> list[Difference]:
    """The serving gains of both runs (`dvc metrics show`'s sv_ rows), A, B and B - A: a simulated figure over
    seeded requests, not per case, so no paired interval (NaN) and never `significant`."""
    if a.serving is None or b.serving is None or a.serving.is_empty() or b.serving.is_empty():
        return []
    settings = HeadlineSettings(decimals=8)
    before, after = serving_rows(a.serving, settings), serving_rows(b.serving, settings)
    rows = []
    for name in sorted(set(before) & set(after)):
        x, y = before[name].get(POOLED), after[name].get(POOLED)
        if x is not None and y is not None:
            rows.append(Difference(name, POOLED, 0, float(x), float(y), float(y) - float(x), float("nan"),
                                   float("nan"), None, False))
    return rows
