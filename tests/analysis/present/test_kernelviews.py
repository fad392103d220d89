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
