"""analysis.present.kernelviews: the kernel run environment (quiet or NOISY), the roofline explanation and
frames, the latency fits of both model-file schemas. Inputs are small documents built here (the sidecar from
the contention module's own types); expected values are computed in the test, never typed from a run."""

from __future__ import annotations

import json

import polars as pl
import pytest
from fixtures import ROOFLINE, ROOT, kernel_speedups, run_environment_sidecar

from analysis.errors import ParamsError
from analysis.layout import LATENCY_MODEL
from analysis.present import notebook as present


def test_run_environment_not_recorded_says_so():
    view = present.run_environment_view({"fits": []})
    assert not view.recorded and "not recorded" in view.summary


@pytest.mark.parametrize("reference,noisy", [([0.010, 0.0101], False), ([0.010, 0.013], True)])
def test_run_environment_marks_a_drifting_reference_noisy(reference, noisy):
    view = present.run_environment_view({"run_environment": run_environment_sidecar(reference)})
    assert view.recorded and view.noisy is noisy
    assert view.summary.startswith("NOISY") is noisy
    run = view.runs.row(0, named=True)
    assert run["status"] == ("NOISY" if noisy else "quiet")
    assert run["reference start ms"] == pytest.approx(1000 * reference[0])
    assert run["drift"] == pytest.approx(max(reference) / min(reference) - 1)
    machine = view.machine.row(0, named=True)
    assert (machine["CPU"], machine["avx2"], machine["avx512f"], machine["amx"]) == ("Test CPU", "yes", "no", "yes")


def test_roofline_explanation_uses_the_measured_numbers_and_labels_the_hypothesis():
    from kernels_profile.stages.fit import roofline_metrics

    gpu = present.gpu_reference()
    roof = roofline_metrics(run_environment_sidecar([0.01, 0.01], roofline=ROOFLINE), kernel_speedups(10.0))
    text = present.roofline_explanation(roof, gpu).text
    assert "explanation these measurements support" in text
    assert present.fmt_num(ROOFLINE["stream_gbps"]) in text and present.fmt_x(roof["ceiling"]) in text
    gpu_cap = gpu["bf16_tflops"] * 1000 / gpu["hbm_gbps"]
    assert ("Hypothesis" in text) is (gpu["paper_top"] > gpu_cap)  # only what the roofline cannot explain
    assert "not recorded" in present.roofline_explanation(None, gpu).text
    frame = present.roofline_frame(roof, gpu)
    assert frame.height == 2 and frame["ridge FLOP/byte"][1] == pytest.approx(gpu_cap)
    curves = present.roofline_ceilings(roof, gpu, [1, 8, 512])
    assert curves.filter(pl.col("n") == 1)["ceiling"].to_list() == [1.0, 1.0]  # both machines: speedup N at N = 1


def test_latency_fits_read_both_schemas():
    from analysis.latency.model import paper_model, to_document

    legacy = json.loads((ROOT / LATENCY_MODEL).read_text())
    fits = present.latency_fits(legacy)
    assert fits.height == len(legacy.get("fits") or legacy.get("models"))
    doc = json.loads(json.dumps(to_document([paper_model()], "test", [])))
    assert present.latency_fits(doc)["form"].to_list() == [paper_model().form]
    with pytest.raises(ParamsError, match="no fit"):
        present.latency_fits(doc, "no-such-model")


def test_the_noisy_banner_names_what_tripped_it_and_agrees_with_the_pair_count():
    """A run flagged by its start-to-end drift while no pair drifted: the banner leads with the run's reason
    and says no pair drifted (it used to read "drifted ... during 0 of 4 measured pairs")."""
    env = {**run_environment_sidecar([0.010, 0.0101]), "noisy": True, "noisy_pairs": [], "max_pair_drift": 0.142,
           "noisy_reasons": ["run r1: reference drift 16% > 15%"]}
    summary = present.run_environment_view({"run_environment": env}).summary
    assert summary.startswith("NOISY, tripped by: run r1: reference drift 16% > 15%.")
    assert "none of the 4 measured pairs drifted past 15% (largest drift 14.2%)" in summary
    pairs = {**env, "noisy_pairs": ["p1", "p2"], "noisy_reasons": ["2 of 4 pairs: reference drift > 15% within the pair"]}
    assert "Within pairs: 2 of 4 measured pairs drifted" in present.run_environment_view({"run_environment": pairs}).summary


def _roofline_rows(prefill_ms: float, floor_ms: float, roof_source: str) -> pl.DataFrame:
    return pl.DataFrame([{"kernel_source": "fit", "context": 256, "n": 128, "roof_source": roof_source,
                          "prefill_ms": prefill_ms, "prefill_floor_ms": floor_ms,
                          "prefill_share_of_floor": floor_ms / prefill_ms, "ar_step_ms": 200.0, "step_floor_ms": 80.0,
                          "ar_share_of_floor": 0.4}])


def test_a_point_under_its_floor_is_named_with_why():
    measured = present.floor_breaches(_roofline_rows(814.0, 1151.0, "measured by this run's profile")).text
    assert "1 measured point faster than the floor" in measured and "fit c=256 N=128: prefill 814 ms" in measured
    assert "peak was measured low" in measured
    assert "datasheet" in present.floor_breaches(_roofline_rows(814.0, 1151.0, "datasheet: x")).text
    assert present.floor_breaches(_roofline_rows(1500.0, 1151.0, "measured")).text == ""


def test_negative_r2_is_commented_only_where_a_bound_uses_that_fit():
    fits = pl.DataFrame([{"model": m, "dtype": "bfloat16", "device": "cuda", "baseline": "eager", "form": form,
                          "ar_r2": 0.9, "prefill_r2": r2, "ar_holdout_max_error": 0.1, "prefill_holdout_max_error": 0.5}
                         for m, r2 in (("qwen2.5-7b", -1.32), ("qwen2.5-3b", -0.5)) for form in ("interp", "quadratic")])
    bounds = pl.DataFrame([{"kernel_source": "h200/qwen2.5-7b/eager", "baseline": "eager", "model": "qwen2.5-7b",
                            "dtype": "bfloat16", "device": "cuda"}])
    from analysis.present.kernelviews import fit_caveats

    text = fit_caveats(fits, bounds, "interp").text
    assert "h200/qwen2.5-7b/eager: prefill r² -1.32" in text and "qwen2.5-3b" not in text  # no bound uses the 3b fit
    assert fit_caveats(fits.with_columns(prefill_r2=pl.lit(0.5)), bounds, "interp").text == ""


def test_other_processes_busy_cores_read_as_a_core_count():
    """UX review P4: "other processes kept -5.00e-04 cores busy at most" (busy minus own cores dips below 0 on a
    quiet machine)."""
    from analysis.present.kernelviews import quiet_summary

    text = quiet_summary({"noisy_drift": 0.15, "max_pair_drift": 0.02, "median_pair_drift": 0.01,
                          "other_busy_cores": [-5e-4, -1e-4]})
    assert "other processes kept 0.0 cores busy at most" in text and "e-0" not in text
    assert "kept 1.3 cores" in quiet_summary({"other_busy_cores": [0.2, 1.26]})
