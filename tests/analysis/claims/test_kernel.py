"""Claim 1 (analysis.claims.kernel) on small kernel_speedup.csv / kernels.json written here: one range per
measured family over every model, judged only on the paper's device and comparisons built alike; another
device is "not comparable" with its datasheet ratios; a shifted repeat is flagged with the clean median."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analysis.claims import kernel
from analysis.claims import verdict as v
from analysis.latency.model import paper_points
from analysis.layout import METRICS, TABLES
from analysis.results.numbers import fmt_num, fmt_x

SPEC = v.paper_claims()["kernel_speedup"]
(_, LOW), (_, HIGH) = paper_points(SPEC)
A100, H200 = "NVIDIA A100-SXM4-80GB", "NVIDIA H200"


def _rows(source, model, comparison, low, high, device="cuda", shift_at=None, unshifted=None):
    """kernel_speedup.csv rows with the comparison contract for one (raw source, model)."""
    baseline = {"eager/eager": "eager", "graph/eager": "static_compiled", "device/device": "device_time"}[comparison]
    name = f"{source}/{model}/{baseline}" if comparison != "device/device" else f"{source}/{model}"
    return [{"kernel_source": name, "source": source, "model": model, "dtype": "bfloat16" if device != "cpu" else "float32",
             "device": device, "context": 256, "n": n, "baseline": baseline, "speedup": speedup, "is_strongest": True,
             "comparison": comparison, "judged": comparison != "graph/eager", "ar_shift": n == shift_at,
             "shifted_repeats": "0" if n == shift_at else "",
             "speedup_unshifted": unshifted if n == shift_at else None}
            for n, speedup in ((8, low), (64, (low + high) / 2), (512, high), (1024, 10 * high))]  # N=1024 outside


def _write(tmp_path, rows, devices: dict[str, str], ceiling: dict | None = None):
    tables, metrics = tmp_path / TABLES, tmp_path / METRICS
    tables.mkdir(parents=True, exist_ok=True)
    metrics.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).write_csv(tables / "kernel_speedup.csv")
    doc = {"kernel_sources": {r["kernel_source"]: {"device_name": devices.get(r.get("source"), "")} for r in rows}}
    if ceiling is not None:
        doc["paper_gpu_ceiling"] = ceiling
    (metrics / "kernels.json").write_text(json.dumps(doc))
    return kernel.kernel_claim(SPEC, tables, metrics)


def _scope(claim, name):
    return next(s for s in claim.scopes if s.scope == name)


def test_claim_1_is_judged_on_one_range_over_both_models_not_per_model(tmp_path):
    """The paper's 6.8x-303x is one range over its two models: the union passes where one model's own
    range would fail (the high end of the second model alone is 303 / 213 = 1.42 > the factor 1.25)."""
    rows = (_rows("gpu", "qwen2.5-1.5b", "device/device", LOW * 1.07, HIGH / 1.12)
            + _rows("gpu", "qwen2.5-7b", "device/device", LOW * 1.08, HIGH / 1.42))
    claim = _write(tmp_path, rows, {"gpu": A100})
    scope = _scope(claim, "gpu device/device")
    assert scope.value == (pytest.approx(LOW * 1.07), pytest.approx(HIGH / 1.12))  # min and max over both models
    assert scope.verdict == v.REPRODUCED and claim.verdict == v.REPRODUCED, claim.reason
    per_model = v.judge(SPEC, (LOW * 1.08, HIGH / 1.42), (LOW, HIGH))
    assert not per_model  # the per-model reading would have failed
    rows = [r if r["model"] != "qwen2.5-1.5b" else {**r, "speedup": r["speedup"] / 1.12} for r in rows]
    claim = _write(tmp_path, rows, {"gpu": A100})
    assert claim.verdict == v.DIFFERS and "high end" in _scope(claim, "gpu device/device").reason


def test_claim_1_on_another_device_is_not_comparable_with_its_datasheet_ratios(tmp_path):
    rows = (_rows("h200", "qwen2.5-1.5b", "eager/eager", LOW * 1.2, HIGH * 1.5)
            + _rows("h200", "qwen2.5-7b", "eager/eager", LOW, HIGH * 4.7)
            + _rows("h200-devtime", "qwen2.5-1.5b", "device/device", LOW * 1.07, HIGH / 1.12))
    claim = _write(tmp_path, rows, {"h200": H200, "h200-devtime": H200})
    sheets = json.loads(v.DEVICES.read_text())
    flops = sheets["NVIDIA H200"]["bf16_tflops"] / sheets["NVIDIA A100 80GB"]["bf16_tflops"]
    bandwidth = sheets["NVIDIA H200"]["hbm_gbps"] / sheets["NVIDIA A100 80GB"]["hbm_gbps"]
    assert claim.verdict == v.NOT_COMPARABLE and {s.verdict for s in claim.scopes} == {v.NOT_COMPARABLE}
    eager, device = _scope(claim, "h200 eager/eager"), _scope(claim, "h200-devtime device/device")
    for scope in (eager, device):
        assert f"{fmt_num(flops, 2)}x its bf16 FLOP/s, {fmt_num(bandwidth, 2)}x its bandwidth" in scope.reason
    assert "host-bound" in eager.reason and "ratio is about N" in eager.reason  # eager/eager restates N
    assert "host-bound" not in device.reason and "(consistent)" in device.reason  # the measured family, read anyway
    assert f"high end {fmt_x(HIGH * 4.7)} vs {fmt_x(HIGH)}" in eager.reason
    assert eager.ours.startswith(f"{fmt_x(LOW)}-{fmt_x(HIGH * 4.7)}")  # the union over both models, shown
    assert "nothing judged" in claim.reason


def test_claim_1_on_the_cpu_fit_alone_is_not_comparable_and_shows_its_range(tmp_path):
    claim = _write(tmp_path, _rows("fit", "qwen2.5-0.5b", "eager/eager", 4.0, 16.6, device="cpu"), {})
    assert claim.verdict == v.NOT_COMPARABLE and "not the paper's" in claim.reason
    assert "16.6x" in claim.ours and fmt_x(10 * 16.6) not in claim.ours  # N=1024 outside the paper's range
    assert "host-bound" not in claim.reason  # said of GPU eager pairs, where both sides are host-bound


def test_graph_vs_eager_is_shown_and_never_judged(tmp_path):
    rows = (_rows("gpu", "qwen2.5-1.5b", "device/device", LOW, HIGH)
            + _rows("gpu", "qwen2.5-1.5b", "graph/eager", 0.8, 52.4))
    claim = _write(tmp_path, rows, {"gpu": A100})
    assert claim.verdict == v.REPRODUCED, claim.reason  # graph/eager 0.8x does not turn it
    graph = _scope(claim, "gpu graph/eager")
    assert graph.verdict == v.NOT_COMPARABLE and "never judged" in graph.reason and "0.8x-52.4x" in graph.ours


def test_a_shifted_repeat_is_flagged_with_the_median_of_the_others(tmp_path):
    rows = _rows("h200", "qwen2.5-7b", "eager/eager", LOW, HIGH * 4.7, shift_at=512, unshifted=HIGH * 1.9)
    claim = _write(tmp_path, rows, {"h200": H200})
    scope = _scope(claim, "h200 eager/eager")
    assert f"{fmt_x(HIGH * 4.7)} ({kernel.SHIFT_FLAG}; {fmt_x(HIGH * 1.9)} without it)" in scope.ours
    assert scope.ours.startswith(f"{fmt_x(LOW)}-")  # the low end's cell is clean: no flag on it


def test_the_paper_gpu_ceiling_is_read_not_typed(tmp_path):
    rows = _rows("gpu", "qwen2.5-1.5b", "device/device", LOW, HIGH)
    assert "not recorded" in _write(tmp_path, rows, {"gpu": A100}).reason
    ceiling = {"n": 512, "ceilings": [{"model": "m", "context": 256, "ceiling": 174.3},
                                      {"model": "m", "context": 2048, "ceiling": 154.8}]}
    reason = _write(tmp_path, rows, {"gpu": A100}, ceiling).reason
    assert f"is above the A100 80GB SXM roofline ceiling of {fmt_x(154.8)}-{fmt_x(174.3)}" in reason
    assert "~153" not in json.dumps(SPEC)  # the rule text no longer types a ceiling


def test_a_table_without_the_comparison_columns_is_a_stale_output(tmp_path):
    rows = [{k: r[k] for k in ("kernel_source", "model", "dtype", "device", "n", "baseline", "speedup", "is_strongest")}
            for r in _rows("fit", "qwen2.5-0.5b", "eager/eager", 4.0, 16.6, device="cpu")]
    claim = _write(tmp_path, rows, {})
    assert claim.verdict == v.STALE and "rerun `copydecode kernels fit`" in claim.reason
