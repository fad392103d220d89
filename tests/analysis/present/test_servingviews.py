"""The serving page's views: the rivals' shape under load, or that the run has none."""

import polars as pl


def test_the_page_reads_the_rivals_shape_or_says_there_is_none():
    from analysis.present.servingviews import shape_sentence

    rows = []
    for load, gain in ((1, 1.9), (32, 1.3)):
        rows.append({"kernel_source": "s", "workload": "closed", "role": "rival", "method": "pld", "load": float(load),
                     "speedup_vs_ar": gain})
    frame = pl.DataFrame(rows)
    assert shape_sentence(frame) == "s: pld 1.9x over AR at C=1, 1.3x at C=32 (falls)"
    assert shape_sentence(frame.filter(pl.col("role") == "none")) == "no rival in this run"
