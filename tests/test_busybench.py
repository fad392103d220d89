"""The quiet-vs-busy comparison pairs the same (context, N, loop) of two runs."""

import polars as pl
import pytest

from kernels_profile.busybench import compare


def raw(ar_scale: float) -> pl.DataFrame:
    rows = []
    for n in (8, 128, 512):
        for repeat in range(2):
            base = ("m", "random", "float32", "cpu", 256, n, repeat)
            rows.append((*base, "ar", "eager", "eager", 0.01 * n * ar_scale))
            rows.append((*base, "prefill", "eager", "eager", 0.05 + 0.001 * n))
    return pl.DataFrame(rows, orient="row", schema=["model", "weights", "dtype", "device", "context", "n", "repeat",
                                                    "method", "baseline", "pair_baseline", "seconds"])


def test_busy_over_quiet_change_per_point():
    table = compare(raw(1.0), raw(1.5))
    assert table["n"].to_list() == [8, 128, 512]
    assert table["change"].to_list() == pytest.approx([0.5, 0.5, 0.5])
    row = table.filter(pl.col("n") == 8).row(0, named=True)
    assert row["quiet"] == pytest.approx(0.08 / 0.058)
