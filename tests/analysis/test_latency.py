import json
import math

import numpy as np
import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.kernel_tables import speedup_table, summarize
from analysis.latency import (
    LatencyModel,
    ModelKey,
    QuadraticAR,
    QuadraticPrefill,
    RooflinePrefill,
    from_document,
    paper_kernel_points,
    paper_model,
    paper_points,
    paper_speedup,
    select_model,
    to_document,
)
from analysis.latency_fit import FitOptions, fit_latency, fit_points, holdout_table

NS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
KEY = ModelKey("m", "random", "float32", "cpu", "eager")
TRUE_AR = QuadraticAR(a=0.02, b=2e-6)
TRUE_PREFILL = QuadraticPrefill(p0=0.03, p1=1.5e-3, p2=4e-6, p3=2e-7)


def raw_from(ar_curve, prefill_curve, contexts, repeats=3, noise=0.01, seed=0, baselines=("eager",)):
    """Raw timings (the profiler's schema) generated from known curves, with multiplicative noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in contexts:
        for n in NS:
            for r in range(repeats):
                for baseline in baselines:
                    t = float(ar_curve.evaluate(n, c)) * (1 + noise * rng.standard_normal())
                    rows.append(("m", "random", "float32", "cpu", "ar", baseline, c, n, r, t))
                t = float(prefill_curve.evaluate(n, c)) * (1 + noise * rng.standard_normal())
                rows.append(("m", "random", "float32", "cpu", "prefill", "eager", c, n, r, t))
    return pl.DataFrame(rows, orient="row", schema={
        "model": pl.String, "weights": pl.String, "dtype": pl.String, "device": pl.String, "method": pl.String,
        "baseline": pl.String, "context": pl.Int64, "n": pl.Int64, "repeat": pl.Int64, "seconds": pl.Float64})


def points(summary, method, baseline="eager"):
    frame = summary.filter(pl.col("method") == method)
    return frame.filter(pl.col("baseline") == baseline) if method == "ar" else frame


# ---------------------------------------------------------------- summaries

def test_summary_and_speedup_table_pair_repeats():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], repeats=3, baselines=("eager", "static"))
    summary = summarize(raw)
    row = summary.filter((pl.col("method") == "prefill") & (pl.col("n") == 8)).row(0, named=True)
    values = raw.filter((pl.col("method") == "prefill") & (pl.col("n") == 8))["seconds"].to_numpy()
    assert row["median"] == pytest.approx(np.median(values)) and row["repeats"] == 3
    table = speedup_table(raw)
    one = table.filter((pl.col("n") == 64) & (pl.col("baseline") == "eager")).row(0, named=True)
    ratios = [raw.filter((pl.col("method") == m) & (pl.col("n") == 64) & (pl.col("repeat") == r)
                         & (pl.col("baseline") == "eager"))["seconds"][0] for r in range(3) for m in ("ar", "prefill")]
    assert one["speedup"] == pytest.approx(np.median([ratios[2 * r] / ratios[2 * r + 1] for r in range(3)]))
    assert table.group_by("context", "n").agg(pl.col("is_strongest").sum())["is_strongest"].to_list() == [1] * len(NS)


# ---------------------------------------------------------------- v1 recovery and its degeneracy

def test_synthetic_quadratic_parameters_are_recovered_within_5_percent():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], noise=0.005)
    model = select_model(fit_latency(raw, FitOptions("quadratic", (4, 32, 256))), "m", "float32", "cpu", "eager")
    for name in ("a", "b"):
        assert getattr(model.ar, name) == pytest.approx(getattr(TRUE_AR, name), rel=0.05), name
    for name in ("p0", "p1", "p2", "p3"):
        assert getattr(model.prefill, name) == pytest.approx(getattr(TRUE_PREFILL, name), rel=0.05), name
    n, c = np.array(NS * 2, dtype=float), np.array([300.0] * len(NS) + [900.0] * len(NS))
    for fitted, true in ((model.t_prefill(n, c).seconds, TRUE_PREFILL.evaluate(n, c)),
                         (model.t_ar(n, c).seconds, TRUE_AR.evaluate(n, c))):
        assert np.max(np.abs(fitted / true - 1)) < 0.05
    assert model.diagnostics["prefill"]["holdout_max_rel_error"] < 0.05


def test_one_context_quadratic_drops_the_collinear_term_and_says_so():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0)
    dropped = fit_latency(raw, FitOptions("quadratic"))[0]
    assert dropped.prefill.p2 == 0.0
    assert any("N*c term (p2) is dropped" in note for note in dropped.diagnostics["prefill"]["notes"])
    # the per-token slope at c=256 is still right: it is p1 + p2*256 of the truth
    assert dropped.prefill.p1 == pytest.approx(TRUE_PREFILL.p1 + TRUE_PREFILL.p2 * 256, rel=0.05)
    with pytest.raises(ParamsError, match=r"c=1024.*c = 256"):
        dropped.t_prefill(100, 1024)
    kept = fit_latency(raw, FitOptions("quadratic", one_context="keep"))[0]
    assert any("not separately identified" in note for note in kept.diagnostics["prefill"]["notes"])


# ---------------------------------------------------------------- interp (default)

def test_interp_passes_through_the_medians_and_is_monotone():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [0, 256, 1024], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("interp"))[0]
    assert model.form == "interp"
    for n, c in ((8, 256), (512, 0), (1, 1024)):
        assert float(model.t_prefill(n, c).seconds) == pytest.approx(float(TRUE_PREFILL.evaluate(n, c)), rel=1e-12)
    n = np.exp(np.linspace(0, math.log(512), 200))
    for c in (0, 100, 256, 700, 1024):
        values = model.t_prefill(n, c).seconds
        assert np.all(np.diff(values) >= 0)
    c = np.linspace(0, 1024, 200)
    assert np.all(np.diff(model.t_prefill(np.full_like(c, 40.0), c).seconds) >= 0)
    assert float(model.t_step(256).seconds) == pytest.approx(float(TRUE_AR.evaluate(1, 256)), rel=1e-12)


def test_interp_raises_dips_to_keep_the_curve_monotone_and_lists_them():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0, repeats=1)
    dip = raw.with_columns(seconds=pl.when((pl.col("method") == "prefill") & (pl.col("n") == 16))
                           .then(pl.col("seconds") * 0.5).otherwise(pl.col("seconds")))
    model = fit_latency(dip, FitOptions("interp"))[0]
    assert float(model.t_prefill(16, 256).seconds) == pytest.approx(float(TRUE_PREFILL.evaluate(8, 256)))
    assert any("N=16" in note and "raised" in note for note in model.diagnostics["prefill"]["notes"])


def test_interp_holdout_error_is_small_on_a_power_law_and_reported_per_form():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], noise=0.0, repeats=1)
    table = holdout_table(summarize(raw), [4, 32, 256])
    assert set(table["form"]) == {"interp", "quadratic", "roofline"}
    interp = table.filter((pl.col("form") == "interp") & (pl.col("curve") == "prefill"))["holdout_max_rel_error"][0]
    quad = table.filter((pl.col("form") == "quadratic") & (pl.col("curve") == "prefill"))["holdout_max_rel_error"][0]
    assert quad < 1e-6 < interp < 0.1  # the truth is quadratic: v1 is exact, interp (gaps of 4x in N) close


def test_out_of_range_is_refused_unless_extrapolating():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("interp"))[0]
    with pytest.raises(ParamsError, match=r"N=2761.*N in \[1, 512\]"):
        model.t_prefill([100, 2761], 256)
    with pytest.raises(ParamsError, match=r"c=3000.*c in \[256, 1024\]"):
        model.t_prefill(100, 3000)
    result = model.t_prefill([0, 100, 1024, 2048], [256, 256, 256, 256], extrapolate=True)
    assert result.extrapolated.tolist() == [False, False, True, True] and result.n_extrapolated == 2
    assert result.seconds[0] == 0.0  # a copy forwarding nothing costs nothing
    # the last log-log segment (256 -> 512) is extended
    t256, t512 = (float(TRUE_PREFILL.evaluate(n, 256)) for n in (256, 512))
    slope = math.log(t512 / t256) / math.log(2)
    assert result.seconds[2] == pytest.approx(t512 * 2 ** slope, rel=1e-9)
    assert result.seconds[3] == pytest.approx(t512 * 4 ** slope, rel=1e-9)


def test_one_context_interp_refuses_other_contexts_and_holds_them_when_extrapolating():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("interp"))[0]
    with pytest.raises(ParamsError, match="c=900"):
        model.t_prefill(64, 900)
    held = model.t_prefill(64, 900, extrapolate=True)
    assert bool(held.extrapolated) and float(held.seconds) == float(model.t_prefill(64, 256).seconds)


# ---------------------------------------------------------------- roofline

def test_roofline_parameters_are_recovered():
    truth = RooflinePrefill(p0=0.002, w=0.010, k1=2e-4, k2=1e-7)
    raw = raw_from(TRUE_AR, truth, [0, 256, 1024], noise=0.0, repeats=1)
    model = fit_latency(raw, FitOptions("roofline"))[0]
    n, c = np.array(NS * 2, dtype=float), np.array([100.0] * len(NS) + [800.0] * len(NS))
    assert np.max(np.abs(model.t_prefill(n, c).seconds / truth.evaluate(n, c) - 1)) < 0.05
    assert model.prefill.w == pytest.approx(truth.w, rel=0.05)


# ---------------------------------------------------------------- paper

def test_paper_curve_goes_through_the_abstracts_points():
    assert float(paper_speedup(8)) == pytest.approx(6.8)
    assert float(paper_speedup(512)) == pytest.approx(303)
    model = paper_model()
    assert float(model.t_step(5000).seconds) == 1.0
    assert float(model.t_prefill(64, 12345).seconds) == pytest.approx(64 / float(paper_speedup(64)))
    assert float(model.speedup(512, 0).seconds) == pytest.approx(303)
    with pytest.raises(ParamsError, match=r"N=4.*N in \[8, 512\]"):
        model.t_prefill(4, 0)
    assert bool(model.t_prefill(4, 0, extrapolate=True).extrapolated)


# ---------------------------------------------------------------- records and repeats

def test_models_round_trip_through_json():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=2)
    models = [*fit_latency(raw, FitOptions("interp", (4,))), *fit_latency(raw, FitOptions("quadratic")),
              *fit_latency(raw, FitOptions("roofline")), paper_model()]
    document = json.loads(json.dumps(to_document(models, "synthetic", [])))
    again = from_document(document)
    n, c = np.array([1, 7, 100, 512], dtype=float), np.array([256, 300, 700, 1024], dtype=float)
    for before, after in zip(models, again):
        assert after == before
        assert np.array_equal(after.t_prefill(n, c, extrapolate=True).seconds, before.t_prefill(n, c, extrapolate=True).seconds)
        assert len(after.repeat_models()) == len(before.repeat_models())
    assert LatencyModel.from_record(models[0].to_record()) == models[0]


def test_legacy_v1_document_is_read_as_a_quadratic_model():
    legacy = {"fits": [{"model": "m", "weights": "random", "dtype": "float32", "device": "cpu", "baseline": "eager",
                        "contexts": [256], "ns": NS, "ar": {"terms": {"a": 0.2, "b": 1e-5}, "r2": 1.0},
                        "prefill": {"terms": {"p0": 0.28, "p1": 2.4e-5, "p2": 6.3e-5, "p3": 0.0}, "r2": 0.9}}]}
    (model,) = from_document(legacy)
    assert model.form == "quadratic" and model.repeats == ()
    assert float(model.t_step(256).seconds) == 0.2 + 1e-5 * 256
    n = np.array([3.0, 100.0])
    assert np.array_equal(model.t_prefill(n, 256).seconds, 0.28 + 2.4e-5 * n + 6.3e-5 * n * 256 + 0.0 * n * n)


def test_each_kernel_repeat_gets_its_own_curve():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=3, noise=0.05)
    model = fit_latency(raw, FitOptions("interp"))[0]
    repeats = model.repeat_models()
    assert len(repeats) == 3
    for r, rep in enumerate(repeats):
        measured = raw.filter((pl.col("method") == "prefill") & (pl.col("n") == 32) & (pl.col("context") == 1024)
                              & (pl.col("repeat") == r))["seconds"][0]
        assert float(rep.t_prefill(32, 1024).seconds) >= measured - 1e-12  # equal, or raised to stay monotone
    values = sorted(float(rep.t_prefill(256, 256).seconds) for rep in repeats)
    assert values[0] < values[-1]  # noise: the repeats differ


def test_fit_options_are_validated():
    with pytest.raises(ParamsError, match="form"):
        FitOptions("spline").validate()
    with pytest.raises(ParamsError, match="one_context"):
        FitOptions("quadratic", one_context="guess").validate()
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=1).filter(
        ~((pl.col("context") == 1024) & (pl.col("n") == 8)))
    with pytest.raises(ParamsError, match="missing"):
        fit_latency(raw, FitOptions("interp"))
    summary = summarize(raw)
    with pytest.raises(ParamsError):
        fit_points(points(summary, "ar").head(2), points(summary, "prefill"), KEY, FitOptions("quadratic"))


def test_select_model_by_key_and_form():
    raw = raw_from(TRUE_AR, TRUE_PREFILL, [256, 1024], repeats=1)
    models = [*fit_latency(raw, FitOptions("interp")), *fit_latency(raw, FitOptions("quadratic"))]
    assert select_model(models, "m", "float32", "cpu", "eager", form="quadratic").form == "quadratic"
    with pytest.raises(ParamsError, match="name the form"):
        select_model(models, "m", "float32", "cpu", "eager")
    with pytest.raises(ParamsError, match="no latency model"):
        select_model(models, "m", "float32", "cpu", "static")


def test_the_speedup_table_keeps_its_column_order():
    """The kernel_speedup table's columns, in order (the median/quartile aggregation is analysis.stats')."""
    from fixtures import ROOT

    table = speedup_table(pl.read_parquet(ROOT / "reports/kernels/frozen/h200/gpu-eager.parquet"))
    assert table.columns == ["model", "weights", "dtype", "device", "context", "n", "baseline", "prefill", "t_ar",
                             "t_prefill", "speedup", "speedup_q25", "speedup_q75", "repeats", "strongest",
                             "is_strongest", "overhead_share"]


# ---------------------------------------------------------------- roofline floors (issue 28.3)

def test_prefill_flops_count_the_layers_per_token_and_the_head_once():
    """Qwen2.5-1.5B: 28 layers of 1,310,340,608 weights (with the final norm) per token, the tied head
    (151,936 x 1,536) for the one kept logit, attention 4 x 28 x 1,536 FLOPs per (token, key). The old
    floor charged 2 x all 1,543,714,304 weights per token (17.8% too many at N = 512)."""
    from analysis.roofline import decoder_weights, prefill_flops
    from kernels_profile.models import published_config

    w = decoder_weights(published_config("qwen2.5-1.5b"))
    assert (w.layers, w.head, w.attention_width) == (1_310_340_608, 151_936 * 1_536, 28 * 1_536)
    assert w.layers + w.head == w.total  # tied: the embedding is the head
    n, c = 512, 256
    keys = n * c + n * (n + 1) // 2
    expected = 2 * 1_310_340_608 * n + 2 * 151_936 * 1_536 + 4 * 28 * 1_536 * keys
    assert float(prefill_flops(w, n, c)) == pytest.approx(expected, rel=1e-12)
    assert float(prefill_flops(w, n, c)) < 2 * w.total * n  # below the old count
    assert float(prefill_flops(w, 0, c)) == 0.0


def test_prefill_floor_is_at_least_the_weight_read_and_uses_the_context():
    from analysis.roofline import Roof, WeightCount, prefill_floor_s, step_floor_s

    roof = Roof("gpu", 1000.0, 100_000.0, "test")
    w = WeightCount(1_000_000_000, 1_000_000_000, layers=900_000_000, head=100_000_000, attention_width=1000)
    assert float(prefill_floor_s(w, 1, roof, 2)) == pytest.approx(step_floor_s(w, roof, 2))  # memory-bound
    far = float(prefill_floor_s(w, 1000, roof, 2, c=100_000))
    near = float(prefill_floor_s(w, 1000, roof, 2, c=0))
    assert near == pytest.approx((2 * 9e8 * 1000 + 2 * 1e8 + 4 * 1000 * 1000 * 1001 / 2) / 1e14)
    assert far > near  # attention over a longer cache costs more


def _h200_points() -> list[tuple[str, str, str, int, int, float]]:
    """(model, device_name, dtype, context, n, seconds) of every prefill repeat in the committed H200 files."""
    from pathlib import Path

    rows = []
    for path in sorted(Path("reports/kernels/frozen/h200").glob("*.parquet")):
        raw = pl.read_parquet(path).filter(pl.col("method") == "prefill")
        rows += [(r["model"], r["device_name"], r["dtype"], r["context"], r["n"], r["seconds"])
                 for r in raw.iter_rows(named=True)]
    return rows


def test_no_measured_h200_prefill_beats_its_floor():
    import json
    from pathlib import Path

    from analysis.roofline import BYTES_PER_PARAM, decoder_weights, device_roof, prefill_floor_s
    from kernels_profile.models import published_config

    devices = json.loads(Path("analysis/data/devices.json").read_text())
    points = _h200_points()
    assert len(points) > 100
    for model, device_name, dtype, c, n, seconds in points:
        roof = device_roof(device_name, devices)
        floor = float(prefill_floor_s(decoder_weights(published_config(model)), n, roof, BYTES_PER_PARAM[dtype], c))
        assert seconds >= floor, f"{model} c={c} N={n}: measured {seconds} s beats its floor {floor} s"


def test_the_cpu_point_the_audit_found_no_longer_beats_its_floor():
    """The committed CPU fit point (qwen2.5-0.5b float32, c=256, N=512: 7.021 s) against the roofline this
    run measured (20.96 GB/s, 66.96 GFLOP/s float32): the old 2 x total x N floor was 7.555 s (share 1.076)."""
    from analysis.roofline import Roof, decoder_weights, prefill_floor_s
    from kernels_profile.models import published_config

    roof = Roof("AMD EPYC", 20.957507941239403, 66.9601121098581, "measured")
    w = decoder_weights(published_config("qwen2.5-0.5b"))
    floor = float(prefill_floor_s(w, 512, roof, 4, 256))
    assert 2 * w.total * 512 / (roof.gflops * 1e9) == pytest.approx(7.5551, rel=1e-4)  # the old floor
    assert floor < 7.0209242 < 2 * w.total * 512 / (roof.gflops * 1e9)


def test_no_point_of_the_committed_fit_profile_beats_its_floor():
    """Every point of this run's committed profile (reports/tables/kernel_speedup.csv, source fit) against
    the roofline its run measured (reports/metrics/kernels.json)."""
    import json
    from pathlib import Path

    from analysis.roofline import BYTES_PER_PARAM, Roof, decoder_weights, prefill_floor_s
    from kernels_profile.models import published_config

    metrics, table = Path("reports/metrics/kernels.json"), Path("reports/tables/kernel_speedup.csv")
    if not metrics.is_file() or not table.is_file():
        pytest.skip("no committed kernel fit outputs")
    roofline = json.loads(metrics.read_text()).get("roofline")
    if not isinstance(roofline, dict):
        pytest.skip(f"the committed kernel fit recorded no roofline ({roofline!r})")
    rows = pl.read_csv(table).filter(pl.col("source") == "fit")
    checked = 0
    for r in rows.iter_rows(named=True):
        gflops = roofline["matmul_gflops_float32" if r["dtype"] == "float32" else "matmul_gflops_bfloat16"]
        roof = Roof("fit", roofline["stream_gbps"], gflops, "measured")
        floor = float(prefill_floor_s(decoder_weights(published_config(r["model"])), r["n"], roof,
                                      BYTES_PER_PARAM[r["dtype"]], r["context"]))
        assert r["t_prefill"] >= floor, f"fit c={r['context']} N={r['n']}: {r['t_prefill']} s beats {floor} s"
        checked += 1
    assert checked > 0


# ---------------------------------------------------------------- the paper's kernel points (one reader)

def test_paper_kernel_points_follow_the_json(tmp_path):
    from analysis.latency import PAPER_CLAIMS

    doc = json.loads(PAPER_CLAIMS.read_text())
    doc["kernel_speedup"]["points"] = [[4, 2.0], [256, 100.0]]
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    assert paper_kernel_points(path) == ((4, 2.0), (256, 100.0))


def test_paper_points_are_the_ends_of_the_n_range():
    assert paper_points({"points": [[4, 2.0], [16, 5.5], [256, 100.0]]}) == ((4, 2.0), (256, 100.0))


@pytest.mark.parametrize("points", [None, [], [[8, 6.8]], [[512, 303.0], [8, 6.8]], [[8, 0.0], [512, 303.0]],
                                    [[8, "x"], [512, 303.0]], [[8], [512, 303.0]]])
def test_malformed_paper_points_are_a_named_error(points):
    with pytest.raises(ParamsError, match="kernel_speedup.points"):
        paper_points({"points": points})

