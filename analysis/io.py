"""Writing stage outputs: parquet for data, csv + markdown for report tables, json metrics, charts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl


def ensure_parent(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_parquet(frame: pl.DataFrame, path: str | Path) -> None:
    frame.write_parquet(ensure_parent(path))


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pl.DataFrame, digits: int = 4) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_cell(v, digits) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join([header, rule, *rows]) + "\n"


def write_table(frame: pl.DataFrame, stem: str | Path, digits: int = 4) -> None:
    """Write `stem`.csv and `stem`.md (the markdown rounded to `digits` for reading)."""
    stem = ensure_parent(stem)
    frame.write_csv(stem.with_suffix(".csv"))
    stem.with_suffix(".md").write_text(markdown_table(frame, digits))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_json(data: Any, path: str | Path) -> None:
    ensure_parent(path).write_text(json.dumps(_finite(data), indent=2, sort_keys=True) + "\n")


def save_chart(chart, stem: str | Path) -> None:
    """PNG and SVG through vl-convert (works offline)."""
    stem = ensure_parent(stem)
    chart.save(str(stem.with_suffix(".png")), scale_factor=2)
    chart.save(str(stem.with_suffix(".svg")))
