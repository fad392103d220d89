"""The claims row's computation: where each gain falls below the threshold, read off the serving table."""

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.serving.verdict import BEYOND, claim_rows, serving_claim


def serving_table(gains_ar, gains_rival):
    rows = []
    for load, a, r in zip((1, 16, 128, 256), gains_ar, gains_rival):
        for method, role, sa, sr in (("copy-line-decoded", "copy", a, r), ("ar", "baseline", 1.0, None)):
            rows.append({"kernel_source": "batched", "basis": "measured batched steps", "max_num_batched_tokens": 2048,
                         "workload": "closed", "load": float(load), "method": method, "role": role,
                         "speedup_vs_ar": sa, "speedup_vs_best_rival": sr, "best_rival": "pld-earliest-k5"})
    return pl.DataFrame(rows)


def test_the_concurrency_where_a_gain_falls_below_the_threshold():
    claim = serving_claim(serving_table([3.0, 2.0, 1.1, 1.0], [1.5, 1.3, 1.25, 1.21]), ["copy-line-decoded"], 1.2,
                          (1, 16, 128), 10, "note", 2048)
    g = claim.gains[0]
    assert claim.verdict == BEYOND and g.below_vs_ar == 128 and g.below_vs_rival is None
    assert "over AR C=1: 3.0x" in claim.ours and "below 1.2x from C=128" in claim.ours and "above 1.2x up to C=256" in claim.ours
    row = claim_rows(claim, 1.2).row(0, named=True)
    assert row["vs_ar_c16"] == 2.0 and row["below_vs_ar_from_c"] == 128 and row["best_rival_c128"] == "pld-earliest-k5"


def test_a_table_without_the_copy_method_or_the_budget_is_named():
    frame = serving_table([2.0] * 4, [1.5] * 4)
    with pytest.raises(ParamsError, match="no closed-loop row of the Copy-as-Decode"):
        serving_claim(frame, ["copy-token"], 1.2, (1,), 1, "", 2048)
    with pytest.raises(ParamsError, match="at the budget 8192"):
        serving_claim(frame, ["copy-line-decoded"], 1.2, (1,), 1, "", 8192)


def test_a_run_without_rivals_says_so_instead_of_a_gain():
    claim = serving_claim(serving_table([3.0] * 4, [None] * 4), ["copy-line-decoded"], 1.2, (1, 16), 4, "", 2048)
    assert "no rival in this run" in claim.ours and claim.gains[0].below_vs_rival is None

