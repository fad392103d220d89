"""The serving gains table (analysis.serving.gains): per source, budget and Copy-as-Decode method, the gains at the
headline concurrencies, the band over both budgets and both prices past the fitted steps, the compute-bound
figures, and the row the claims sentence leads with, chosen by role and budget."""

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.serving.gains import gains_table, headline_method


def point(source, budget, load, method, role, tps_ratio, rival_ratio=None, tpo=2.0, bound=False, best_rival="suffix-k64"):
    return {"kernel_source": source, "basis": "extrapolated from batch 1", "max_num_batched_tokens": budget,
            "workload": "closed", "load": float(load), "method": method, "role": role, "speedup_vs_ar": tps_ratio,
            "speedup_vs_best_rival": rival_ratio, "best_rival": best_rival, "requests": 90, "tokens_per_output": tpo,
            "compute_bound": bound, "extrapolated_step_share": 1.0, "extrapolated_batch_share": 1.0,
            "extrapolated_tokens_share": 0.5, "extrapolated_context_share": 0.25,
            "vs_best_rival_ci_low": None if rival_ratio is None else rival_ratio * 0.95,
            "vs_best_rival_ci_high": None if rival_ratio is None else rival_ratio * 1.05}


def table(ratios: dict[int, float], loads=(1, 128)):
    rows = []
    for budget, ratio in ratios.items():
        for load in loads:
            bound = load == 128
            rows += [point("h200", budget, load, "ar", "baseline", 1.0, tpo=2.04, bound=bound),
                     point("h200", budget, load, "suffix-k64", "rival", 3.0, tpo=2.09, bound=bound),
                     point("h200", budget, load, "copy-token-decoded", "copy", 2.0, ratio - 0.1, tpo=2.1, bound=bound),
                     point("h200", budget, load, "copy-line-decoded", "copy", 2.5, ratio, tpo=2.07, bound=bound)]
    return pl.DataFrame(rows)


def test_the_band_spans_both_budgets_and_both_prices_past_the_fitted_steps():
    served = table({2048: 1.05, 8192: 0.95})
    low = table({2048: 0.9, 8192: 1.2}).filter(pl.col("load") == 128)
    gains = gains_table(served, low, ["copy-line-decoded", "copy-token-decoded"], 1.2, (1, 128), 50, lambda s: 8192)
    line = gains.filter(pl.col("method") == "copy-line-decoded")
    assert line["vs_best_rival_c128_band_low"].to_list() == [pytest.approx(0.9)] * 2
    assert line["vs_best_rival_c128_band_high"].to_list() == [pytest.approx(1.2)] * 2
    assert line["vs_best_rival_c1_band_low"].to_list() == [pytest.approx(0.95)] * 2   # no low-rule run at C = 1
    head = gains.filter(pl.col("headline"))
    assert head["method"].to_list() == ["copy-line-decoded"] and head["max_num_batched_tokens"].to_list() == [8192]
    row = head.row(0, named=True)
    assert row["compute_bound_c128"] is True and row["compute_bound_c1"] is False
    assert (row["ar_tokens_per_output_c128"], row["tokens_per_output_c128"], row["rival_tokens_per_output_c128"]) == (2.04, 2.07, 2.09)
    assert row["requests_c128"] == 90 and row["extrapolated_tokens_share_c128"] == 0.5


def test_the_lead_method_is_the_vocabularys_headline_order_not_the_first_name():
    assert headline_method(["copy-line-jump", "copy-token-decoded", "copy-line-decoded"]) == "copy-line-decoded"
    with pytest.raises(ParamsError, match="no Copy-as-Decode method"):
        headline_method([])
