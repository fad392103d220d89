"""Numbers formatted for reading (no HTML): speedups `12.3x`, shares `74.3%`, intervals `[70.2, 77.4]`,
counts `1,650`. A missing value (None or NaN) is shown as MISSING."""

from __future__ import annotations

from typing import Any

MISSING = "–"


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def fmt_x(value: float | None, digits: int = 1) -> str:
    """A speedup: 12.3x."""
    return MISSING if is_missing(value) else f"{value:.{digits}f}x"


def fmt_pct(share: float | None, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage: 74.3%."""
    return MISSING if is_missing(share) else f"{100 * share:.{digits}f}%"


def fmt_ci(low: float | None, high: float | None, *, pct: bool = False, digits: int = 1) -> str:
    """An interval in the unit of its value, without the unit: [70.2, 77.4]."""
    if is_missing(low) or is_missing(high):
        return MISSING
    scale = 100 if pct else 1
    return f"[{scale * low:.{digits}f}, {scale * high:.{digits}f}]"


def fmt_int(value: int | None) -> str:
    return MISSING if is_missing(value) else f"{int(value):,}"


def fmt_num(value: float | None, digits: int = 3) -> str:
    """A plain measurement to `digits` significant figures, without scientific notation for
    everyday magnitudes (the tables are read, not parsed)."""
    if is_missing(value):
        return MISSING
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 10 ** digits:
        return f"{value:,.0f}"
    if magnitude < 1e-3:
        return f"{value:.{digits - 1}e}"
    text = f"{value:.{digits}g}"
    return f"{float(text):,.{max(0, digits - 1 - _exponent(magnitude))}f}"


def _exponent(magnitude: float) -> int:
    return int(f"{magnitude:e}".split("e")[1])


def fmt_count(value: float | None) -> str:
    """A count or a median of counts: 12, 1,650, 3.5."""
    if is_missing(value):
        return MISSING
    return fmt_int(value) if float(value).is_integer() else f"{value:,.1f}"


def fmt_range(low: float, high: float, fmt) -> str:
    """`low-high` in `fmt`'s unit: 6.8x-303.0x."""
    return f"{fmt(low)}-{fmt(high)}"
