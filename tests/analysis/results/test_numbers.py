"""analysis.results.numbers: numbers formatted for reading; a missing value (None or NaN) is shown as MISSING."""

import math

import pytest

from analysis.results.numbers import (
    MISSING,
    fmt_ci,
    fmt_count,
    fmt_int,
    fmt_num,
    fmt_pct,
    fmt_range,
    fmt_x,
    is_missing,
)
from analysis.present import notebook as present


def test_none_and_nan_are_missing_zero_is_not():
    assert is_missing(None) and is_missing(math.nan)
    assert not is_missing(0) and not is_missing(0.0)
    for fmt in (fmt_x, fmt_pct, fmt_int, fmt_num, fmt_count):
        assert fmt(None) == MISSING and fmt(math.nan) == MISSING, fmt.__name__
    assert fmt_ci(None, 1.0) == MISSING and fmt_ci(0.5, math.nan) == MISSING


def test_speedups_shares_intervals_and_counts():
    assert fmt_x(12.345) == "12.3x" and fmt_x(2, digits=2) == "2.00x"
    assert fmt_pct(0.7434) == "74.3%" and fmt_pct(1.0, digits=0) == "100%"
    assert fmt_ci(0.702, 0.774, pct=True) == "[70.2, 77.4]"
    assert fmt_ci(1.25, 3.0, digits=2) == "[1.25, 3.00]"
    assert fmt_int(1650) == "1,650" and fmt_int(3.0) == "3"
    assert fmt_count(1650.0) == "1,650" and fmt_count(3.5) == "3.5"
    assert fmt_range(6.8, 303.0, fmt_x) == "6.8x-303.0x"


@pytest.mark.parametrize(("value", "text"), [
    (0, "0"), (0.0, "0"),
    (1234.4, "1,234"),      # at or above 10**digits: a whole number with thousands separators
    (123.456, "123"),
    (12.3456, "12.3"),
    (0.012345, "0.0123"),
    (0.0001234, "1.23e-04"),  # below 1e-3: scientific
    (-12.3456, "-12.3"),
])
def test_fmt_num_keeps_three_significant_figures(value, text):
    assert fmt_num(value) == text


# ---------------------------------------------------------------- through the notebooks' facade (moved from test_reports.py)

def test_number_formats():
    assert present.fmt_x(12.345) == "12.3x"
    assert present.fmt_x(0.8237, 2) == "0.82x"
    assert present.fmt_pct(0.74324) == "74.3%"
    assert present.fmt_ci(0.70211, 0.77396, pct=True) == "[70.2, 77.4]"
    assert present.fmt_ci(2.6005, 3.1552) == "[2.6, 3.2]"
    assert present.fmt_int(2276) == "2,276"
    assert [present.fmt_num(v) for v in (215.31, 1.234, 0.0234, 151669.0)] == ["215", "1.23", "0.0234", "151,669"]
    for fmt in (present.fmt_x, present.fmt_pct, present.fmt_int, present.fmt_num):
        assert fmt(None) == present.MISSING and fmt(float("nan")) == present.MISSING
