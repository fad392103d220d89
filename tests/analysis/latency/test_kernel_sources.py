"""Kernel sources by name: the frozen H200 measurement is fitted beside this run's profile, any set of
AR loops fits, a bad source or loop is a named error, and each measured point is set against its
physical floors (the roofline) and read step by step (the eager-loop slowdown)."""

import hashlib
import json
import shutil

import polars as pl
import pytest
import yaml
from fixtures import ROOT, params_with

from analysis.cli import main
from analysis.errors import ParamsError
from analysis.latency.sources import key_name, names_from_params, select_kernels, select_measured
from analysis.latency.tables import speedup_table
from analysis.latency.model import from_document

FROZEN = ROOT / "reports/kernels/frozen/h200"
SHA256 = {"gpu-eager.parquet": "8071a0df0c240791b06d64e1be59ebd03d093e019e7fe9277306c2b5d7f94b7b",
          "gpu-compiled.parquet": "bb3804bf2f0959c4da9d075ff2fcbfe36e59fc289cacfc213c628079faa889d0"}


def test_frozen_h200_files_are_the_shared_measurement():
    for name, digest in SHA256.items():
        assert hashlib.sha256((FROZEN / name).read_bytes()).hexdigest() == digest, name
        assert (FROZEN / name.replace(".parquet", ".environment.json")).is_file()


def fit_in(folder, monkeypatch, raw) -> int:
    monkeypatch.chdir(folder)
    (folder / "reports/kernels").mkdir(parents=True)
    # a copy, not a link: an output root's folders are real folders (issue 39, H3)
    shutil.copytree(ROOT / "reports/kernels/frozen", folder / "reports/kernels/frozen")
    (folder / "params.yaml").write_text(yaml.safe_dump(params_with(**{"kernels.fit.raw": raw})))
    return main(["--params", "params.yaml", "kernels", "fit"])


@pytest.fixture(scope="module")
def h200_fit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fit")
    with pytest.MonkeyPatch.context() as mp:
        code = fit_in(folder, mp, [{"source": "h200", "path": str(FROZEN / "gpu-eager.parquet")},
                                   {"source": "h200", "path": str(FROZEN / "gpu-compiled.parquet")}])
    assert code == 0
    return folder


def test_compiled_only_file_fits_without_an_eager_loop(tmp_path, monkeypatch):
    assert fit_in(tmp_path, monkeypatch, [{"source": "h200", "path": str(FROZEN / "gpu-compiled.parquet")}]) == 0
    metrics = json.loads((tmp_path / "reports/metrics/kernels.json").read_text())
    from_raw = {k for k, v in metrics["kernel_sources"].items() if v["source"] == "h200"}
    assert from_raw == {"h200/qwen2.5-1.5b/static_compiled", "h200/qwen2.5-7b/static_compiled"}
    assert metrics["speedup_range_eager"] is None  # no fit source, no eager loop: stated, not a crash


def test_each_model_and_loop_of_a_source_is_its_own_kernel(h200_fit):
    models = from_document(json.loads((h200_fit / "reports/kernels/latency_model.json").read_text()))
    interp = [m for m in models if m.form == "interp"]
    assert sorted(key_name(m.key) for m in interp) == [
        "h200/qwen2.5-1.5b/eager", "h200/qwen2.5-1.5b/static_compiled",
        "h200/qwen2.5-7b/eager", "h200/qwen2.5-7b/static_compiled"]
    compiled = select_measured(models, "h200/qwen2.5-7b/static_compiled", "interp")
    # the CUDA-graph decode step of the 7B model is ~5.6 ms at context 256 in the frozen run
    assert 0.004 < float(compiled.t_step(256).seconds) < 0.008
    with pytest.raises(ParamsError, match="h200/qwen2.5-7b/static.*measured sources"):
        select_measured(models, "h200/qwen2.5-7b/static", "interp")
    table = pl.read_csv(h200_fit / "reports/tables/kernel_speedup.csv")
    raw = table.filter(pl.col("source") == "h200")  # the device-time probe (kernel.device_time) is its own source
    assert raw["kernel_source"].n_unique() == 4 and set(table["source"]) == {"h200", "h200-devtime"}


@pytest.mark.parametrize("raw, match", [
    ([], "at least one"),
    ([{"source": "paper", "path": "x.parquet"}], "not 'paper'"),
    ([{"source": "h200", "file": "x.parquet"}], "exactly 'source' and 'path'"),
    (["a.parquet", "a.parquet"], "more than once"),
    ([{"source": "h200", "path": "missing.parquet"}], "missing.parquet not found"),
])
def test_bad_raw_entries_are_named(tmp_path, monkeypatch, capsys, raw, match):
    assert fit_in(tmp_path, monkeypatch, raw) != 0
    assert match in capsys.readouterr().err


def test_the_same_timing_in_two_files_of_one_source_is_refused(tmp_path, monkeypatch, capsys):
    path = str(FROZEN / "gpu-eager.parquet")
    copy = tmp_path / "copy.parquet"
    copy.write_bytes((FROZEN / "gpu-eager.parquet").read_bytes())
    assert fit_in(tmp_path, monkeypatch, [{"source": "h200", "path": path}, {"source": "h200", "path": str(copy)}]) != 0
    assert "both hold" in capsys.readouterr().err


def test_bounds_name_a_missing_loop_or_source(h200_fit, monkeypatch, capsys):
    monkeypatch.chdir(h200_fit)
    with pytest.raises(ParamsError, match="unknown kernel sources"):
        names_from_params({"kernel": {"sources": ["gpu"]}}, "kernel.sources")
    with pytest.raises(ParamsError, match="no latency model for qwen2.5-0.5b/float32/cpu/eager"):
        select_kernels(("fit",), "qwen2.5-0.5b", "float32", "cpu", ["eager"], "interp")
    kernels = select_kernels(("paper", "h200/qwen2.5-1.5b/eager"), "m", "float32", "cpu", ["eager"], "interp")
    assert [(k.source, k.model_name, k.device) for k in kernels] == [
        ("paper", "paper", "A100 80GB (paper)"), ("h200/qwen2.5-1.5b/eager", "qwen2.5-1.5b", "cuda")]


def test_roofline_table_and_step_shifts_from_the_frozen_run(h200_fit):
    roof = pl.read_csv(h200_fit / "reports/tables/kernel_roofline.csv")
    assert set(roof["roof"]) == {"NVIDIA H200"}
    assert (roof["ar_share_of_floor"] <= 1).all() and (roof["prefill_share_of_floor"] <= 1).all()
    top = roof.filter((pl.col("n") == 512) & (pl.col("context") == 256) & (pl.col("model") == "qwen2.5-1.5b"))
    assert 150 < top["ceiling"][0] < 260  # weights streamed once vs 2 FLOPs/weight/token at bf16 peak
    steps = pl.read_csv(h200_fit / "reports/tables/kernel_ar_steps.csv")
    eager, compiled = (steps.filter(pl.col("baseline") == b)["late_over_early"] for b in ("eager", "static_compiled"))
    assert (eager > 2).sum() >= 4 and (compiled < 1.1).all()


# ---------------------------------------------------------------- device time, comparisons, AR shifts (issue 28.1, 28.2)

DEVTIME = FROZEN / "devtime.jsonl"


def probe(path, **changes):
    from analysis.latency.device_time import DeviceTimeFile

    return DeviceTimeFile(**{"source": "h200-devtime", "path": path, "dtype": "bfloat16", "device": "cuda",
                             "weights": "random", **changes})


def test_device_time_probe_is_a_kernel_source_in_the_kernel_tables(h200_fit):
    table = pl.read_csv(h200_fit / "reports/tables/kernel_speedup.csv")
    dev = table.filter(pl.col("kernel_source") == "h200-devtime/qwen2.5-1.5b").sort("n")
    assert dev["n"].to_list() == [8, 64, 512]
    assert dev["speedup"].to_list() == pytest.approx([7.3050, 52.1886, 271.5220], rel=1e-4)  # the probe's own ratios
    assert set(dev["comparison"]) == {"device/device"} and dev["judged"].all() and not dev["ar_shift"].any()
    assert "launch-free" in dev["comparison_label"][0]
    assert set(table.filter(pl.col("kernel_source").str.starts_with("h200-devtime/"))["source"]) == {"h200-devtime"}
    wide = pl.read_csv(h200_fit / "reports/tables/kernel_table.csv")
    assert wide.filter(pl.col("source") == "h200-devtime")["comparison_strongest"].unique().to_list() == ["device/device"]


def test_device_time_probe_is_a_latency_model_for_the_bounds(h200_fit, monkeypatch):
    monkeypatch.chdir(h200_fit)
    kernel, = select_kernels(("h200-devtime/qwen2.5-7b",), "m", "float32", "cpu", ["eager"], "interp")
    assert (kernel.model_name, kernel.dtype, kernel.device, kernel.model.form) == ("qwen2.5-7b", "bfloat16", "cuda",
                                                                                    "device_time")
    assert kernel.built.startswith("device time")
    assert float(kernel.model.t_step(256).seconds) == pytest.approx(5.969895e-3)
    assert float(kernel.model.speedup(512, 256).seconds) == pytest.approx(213.35, rel=1e-4)
    assert float(kernel.model.speedup(64, 256).seconds) == pytest.approx(55.118, rel=1e-4)
    assert kernel.model.t_prefill(4, 256, extrapolate=True).extrapolated.all()  # below the probed N: marked
    with pytest.raises(ParamsError, match="outside the profiled range"):
        kernel.model.t_prefill(64, 2048)  # one probed context


@pytest.mark.parametrize("line, match", [
    ("not json", "not a JSON line"),
    ('{"model": "m", "device": "gpu", "context": 256, "prefill8_kernel_ms": 1.0, "prefill64_kernel_ms": 2.0}',
     "'step_kernel_ms' must be a positive number"),
    ('{"model": "m", "device": "gpu", "context": 256, "step_kernel_ms": 1.0, "prefill8_kernel_ms": 1.0}',
     "at least two N"),
    ('{"model": "m", "device": "gpu", "context": "256", "step_kernel_ms": 1.0, "prefill8_kernel_ms": 1.0}',
     "'context' must be a non-negative integer"),
    ('{"model": "", "device": "gpu", "context": 256, "step_kernel_ms": 1.0}', "'model' must be a non-empty string"),
    ('[1, 2]', "must be a JSON object"),
])
def test_a_bad_device_time_file_is_a_named_error(tmp_path, line, match):
    from analysis.latency.device_time import DeviceTimeError, read_device_time

    path = tmp_path / "devtime.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DeviceTimeError, match=match):
        read_device_time(probe(path))
    with pytest.raises(DeviceTimeError, match="not found"):
        read_device_time(probe(tmp_path / "missing.jsonl"))


def test_a_bad_device_time_file_stops_the_fit_stage_with_its_name(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.jsonl"
    record = json.loads(DEVTIME.read_text().splitlines()[0])
    bad.write_text(json.dumps({**record, "step_kernel_ms": -1}) + "\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports/kernels").mkdir(parents=True)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params_with(**{
        "kernels.fit.raw": [{"source": "h200", "path": str(FROZEN / "gpu-eager.parquet")}],
        "kernel.device_time": [{"source": "h200-devtime", "path": str(bad), "dtype": "bfloat16", "device": "cuda",
                                "weights": "random"}]})))
    assert main(["--params", "params.yaml", "kernels", "fit"]) != 0
    assert "bad.jsonl:1: 'step_kernel_ms' must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize("entries, match", [
    ([{"source": "h200-devtime", "path": "x.jsonl"}], "exactly"),
    ([{"source": "fit", "path": "x", "dtype": "b", "device": "c", "weights": "w"}], "not 'fit' or 'paper'"),
    ([{"source": "d", "path": "x", "dtype": "b", "device": "c", "weights": "w"}] * 2, "more than once"),
])
def test_bad_device_time_entries_are_named(entries, match):
    from analysis.latency.device_time import device_time_files

    with pytest.raises(ParamsError, match=match):
        device_time_files({"kernel": {"device_time": entries}})


def test_graph_loop_against_eager_prefill_is_labelled_and_never_judged(h200_fit):
    table = pl.read_csv(h200_fit / "reports/tables/kernel_speedup.csv").filter(pl.col("source") == "h200")
    graph = table.filter(pl.col("baseline") == "static_compiled")
    assert set(graph["comparison"]) == {"graph/eager"} and not graph["judged"].any()
    assert "prefill not graph-captured" in graph["comparison_label"][0]
    eager = table.filter(pl.col("baseline") == "eager")
    assert set(eager["comparison"]) == {"eager/eager"} and eager["judged"].all()


def test_a_graph_against_graph_run_is_judged_with_no_code_change():
    from analysis.latency.sources import with_comparison

    base = {"model": "m", "weights": "random", "dtype": "bfloat16", "device": "cuda", "context": 0, "repeat": 0, "n": 8}
    rows = [{**base, "method": "ar", "baseline": b, "pair_baseline": b, "seconds": 0.08} for b in ("eager", "static_compiled")]
    rows += [{**base, "method": "prefill", "baseline": kind, "pair_baseline": b, "seconds": 0.01}
             for b in ("eager", "static_compiled") for kind in ("eager", "compiled")]
    table = with_comparison(speedup_table(pl.DataFrame(rows)))
    got = {(r["baseline"], r["prefill"]): (r["comparison"], r["judged"]) for r in table.iter_rows(named=True)}
    assert got == {("eager", "eager"): ("eager/eager", True), ("eager", "compiled"): ("eager/graph", False),
                   ("static_compiled", "eager"): ("graph/eager", False),
                   ("static_compiled", "compiled"): ("graph/graph", True)}


def test_ratios_that_depend_on_a_run_that_slowed_part_way_are_flagged(h200_fit):
    table = pl.read_csv(h200_fit / "reports/tables/kernel_speedup.csv")
    seven = table.filter((pl.col("kernel_source") == "h200/qwen2.5-7b/eager") & (pl.col("context") == 2048))
    flag = dict(zip(seven["n"].to_list(), seven["ar_shift"].to_list()))
    assert flag[512] and not flag[8]  # 1,432.9x rests on slowed runs; N=8 is read before the shift
    assert seven.filter(pl.col("n") == 512)["speedup"][0] > 1000
    assert not table.filter(pl.col("baseline") == "static_compiled")["ar_shift"].any()
    md = (h200_fit / "reports/tables/kernel_table.md").read_text()
    assert "ar_shift_eager" in md and "ar_shift_strongest" in md


def test_ar_shift_flags_only_past_the_early_steps_of_a_shifted_run():
    from analysis.latency.sources import with_ar_shift

    speedups = pl.DataFrame({"source": ["s"] * 4, "model": ["m"] * 4, "baseline": ["eager"] * 4,
                             "context": [0, 0, 0, 9], "n": [4, 8, 64, 64]})
    shifts = pl.DataFrame({"source": ["s", "s", "s"], "model": ["m"] * 3, "baseline": ["eager"] * 3,
                           "context": [0, 0, 9], "repeat": [0, 1, 0], "late_over_early": [1.0, 3.0, 1.2]})
    assert with_ar_shift(speedups, shifts, early_until=8)["ar_shift"].to_list() == [False, False, True, False]


def test_kernel_source_names_parse_and_format_round_trip():
    from analysis.latency.sources import parse_name

    for name in ("fit", "paper", "h200/qwen2.5-7b/eager", "h200/m/static_compiled/compiled_prefill",
                 "h200-devtime/qwen2.5-7b"):
        assert str(parse_name(name)) == name
    assert parse_name("h200-devtime/qwen2.5-7b").kind == "device_time"
    with pytest.raises(ParamsError, match="unknown kernel source"):
        parse_name("a/b/c/d/e")


def test_the_fit_names_the_shifted_repeats_and_gives_the_median_without_them(h200_fit):
    """D4 of the audit, from the frozen H200 raw timings: at N=512 the eager cells' repeat 0 slowed part-way
    (repeat 1 too at 7B c=2048), and the medians of the other repeats are the audit's own recomputation:
    370.9x / 403.7x (1.5B, c=256 / 2048) and 436.4x / 567.4x (7B)."""
    table = pl.read_csv(h200_fit / "reports/tables/kernel_speedup.csv").filter(
        (pl.col("n") == 512) & (pl.col("baseline") == "eager") & (pl.col("prefill") == "eager"))
    got = {(r["model"], r["context"]): (r["shifted_repeats"], round(r["speedup_unshifted"], 1))
           for r in table.iter_rows(named=True)}
    assert got == {("qwen2.5-1.5b", 256): ("0", 370.9), ("qwen2.5-1.5b", 2048): ("0", 403.7),
                   ("qwen2.5-7b", 256): ("0", 436.4), ("qwen2.5-7b", 2048): ("0, 1", 567.4)}
    assert table["ar_shift"].all()
    clean = pl.read_csv(h200_fit / "reports/tables/kernel_speedup.csv").filter(~pl.col("ar_shift"))
    assert clean["speedup_unshifted"].is_null().all() and (clean["shifted_repeats"].fill_null("") == "").all()


def test_the_fit_computes_the_paper_gpus_roofline_ceiling(h200_fit):
    """The A100 copy-speedup ceiling at N=512 for the paper's two models (the audit's 174x, 157x, 163x, 155x),
    computed from the datasheet and the published configs, in place of a typed "~153x"."""
    block = json.loads((h200_fit / "reports/metrics/kernels.json").read_text())["paper_gpu_ceiling"]
    assert block["device"] == "NVIDIA A100 80GB" and block["n"] == 512
    got = {(c["model"], c["context"]): round(c["ceiling"]) for c in block["ceilings"]}
    assert got == {("qwen2.5-1.5b", 256): 174, ("qwen2.5-1.5b", 2048): 157, ("qwen2.5-7b", 256): 163,
                   ("qwen2.5-7b", 2048): 155}
