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


def test_goodput_is_shown_only_after_its_slo_is_defined():
    """UX review C3: the closed-loop table carried a goodput column (mostly 0) before the page defined its SLO. The
    closed-loop table has none; the open-loop table, after the paragraph that defines the SLO, has it."""
    import json

    from fixtures import ROOT

    from analysis.present.servingviews import closed_loop, open_loop, serving_table

    frame = serving_table(tables=ROOT / "reports/tables")
    assert not any("goodput" in c for c in closed_loop(frame, (1, 16, 128)).columns)
    assert "goodput_requests_per_s" in open_loop(frame).columns
    cells = ["".join(c["source"]) for c in json.loads((ROOT / "notebooks/serving.ipynb").read_text())["cells"]]
    defines = next(i for i, c in enumerate(cells) if "goodput counts requests" in c and "serving.slo" in c)
    shows = [i for i, c in enumerate(cells) if "serving.open_loop(" in c or "goodput" in c.lower()]
    assert min(shows) == defines
