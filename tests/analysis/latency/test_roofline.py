"""Roofline floors and ceilings (analysis.latency.roofline): weights, FLOPs, floors, device roofs."""

import json

import polars as pl
import pytest

from analysis.errors import ParamsError
from analysis.latency.roofline import (
    Roof,
    WeightCount,
    copy_speedup_ceiling,
    decoder_weights,
    device_roof,
    prefill_floor_s,
    roofline_table,
    step_floor_s,
)
from fixtures import ROOT


def test_prefill_flops_count_the_layers_per_token_and_the_head_once():
    """Qwen2.5-1.5B: 28 layers of 1,310,340,608 weights (with the final norm) per token, the tied head
    (151,936 x 1,536) for the one kept logit, attention 4 x 28 x 1,536 FLOPs per (token, key). The old
    floor charged 2 x all 1,543,714,304 weights per token (17.8% too many at N = 512)."""
    from analysis.latency.roofline import decoder_weights, prefill_flops
    from kernels_profile.runtime.models import published_config

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
    from analysis.latency.roofline import Roof, WeightCount, prefill_floor_s, step_floor_s

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

    from analysis.latency.roofline import BYTES_PER_PARAM, decoder_weights, device_roof, prefill_floor_s
    from kernels_profile.runtime.models import published_config

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
    from analysis.latency.roofline import Roof, decoder_weights, prefill_floor_s
    from kernels_profile.runtime.models import published_config

    roof = Roof("AMD EPYC", 20.957507941239403, 66.9601121098581, "measured")
    w = decoder_weights(published_config("qwen2.5-0.5b"))
    floor = float(prefill_floor_s(w, 512, roof, 4, 256))
    assert 2 * w.total * 512 / (roof.gflops * 1e9) == pytest.approx(7.5551, rel=1e-4)  # the old floor
    assert floor < 7.0209242 < 2 * w.total * 512 / (roof.gflops * 1e9)


def test_no_point_of_the_committed_fit_profile_beats_its_floor():
    """Every point of the committed profile (reports/tables/kernel_speedup.csv, source fit, as committed in
    git) against the roofline its run measured (reports/metrics/kernels.json, as committed). Read from git,
    not the workspace: a user's own noisy `dvc repro` rewrites both, and a peak measured low under load can
    put a point under its floor (the kernel page says so, `points_below_floor`); that is not a failure of
    the committed run."""
    import io

    from analysis.latency.roofline import BYTES_PER_PARAM, Roof, decoder_weights, prefill_floor_s
    from kernels_profile.runtime.models import published_config
    from fixtures import committed_bytes

    metrics, table = committed_bytes("reports/metrics/kernels.json"), committed_bytes("reports/tables/kernel_speedup.csv")
    if metrics is None or table is None:
        pytest.skip("no committed kernel fit outputs (no git history here)")
    roofline = json.loads(metrics).get("roofline")
    if not isinstance(roofline, dict):
        pytest.skip(f"the committed kernel fit recorded no roofline ({roofline!r})")
    rows = pl.read_csv(io.BytesIO(table)).filter(pl.col("source") == "fit")
    checked = 0
    for r in rows.iter_rows(named=True):
        gflops = roofline["matmul_gflops_float32" if r["dtype"] == "float32" else "matmul_gflops_bfloat16"]
        roof = Roof("fit", roofline["stream_gbps"], gflops, "measured")
        floor = float(prefill_floor_s(decoder_weights(published_config(r["model"])), r["n"], roof,
                                      BYTES_PER_PARAM[r["dtype"]], r["context"]))
        assert r["t_prefill"] >= floor, f"fit c={r['context']} N={r['n']}: {r['t_prefill']} s beats {floor} s"
        checked += 1
    assert checked > 0


def test_decoder_weights_match_the_published_sizes():
    from kernels_profile.runtime.models import published_config

    assert decoder_weights(published_config("qwen2.5-1.5b")).total == 1_543_714_304
    seven = decoder_weights(published_config("qwen2.5-7b"))
    assert seven.total == 7_615_616_512 and seven.total - seven.read_per_step == 152_064 * 3584  # untied head


def test_floors_and_ceiling():
    roof, count = Roof("gpu", 1000.0, 100_000.0, "test"), WeightCount(1_000_000_000, 1_000_000_000)
    step = step_floor_s(count, roof, 2)
    assert step == pytest.approx(0.002)                       # 2 GB at 1 TB/s
    assert prefill_floor_s(count, 1, roof, 2) == pytest.approx(step)  # memory-bound
    assert prefill_floor_s(count, 1000, roof, 2) == pytest.approx(0.02)  # 2e12 FLOPs at 100 TFLOP/s
    speedups = pl.DataFrame({"kernel_source": ["s"], "model": ["m"], "dtype": ["bfloat16"], "device": ["cuda"],
                             "baseline": ["eager"], "context": [0], "n": [1000], "speedup": [50.0],
                             "t_ar": [4.0], "t_prefill": [0.08]})
    row = roofline_table(speedups, {"m": count}, {"s": roof}).row(0, named=True)
    assert row["ceiling"] == pytest.approx(100.0) and row["ar_share_of_floor"] == pytest.approx(0.5)
    assert row["prefill_share_of_floor"] == pytest.approx(0.25)
    assert roofline_table(speedups, {}, {"s": roof}).height == 0  # no weight count, no row


def test_device_roof_by_name():
    doc = json.loads((ROOT / "analysis/data/devices.json").read_text())
    assert device_roof("NVIDIA H200", doc).bandwidth_gbps == 4800
    assert device_roof("NVIDIA GeForce RTX 4090", doc) is None


def test_copy_ceiling_is_n_until_the_ridge_then_flat():
    # ridge 6 FLOP/byte, float32 weights (4 bytes): decode intensity 0.5, prefill N x 0.5
    ceiling = [copy_speedup_ceiling(n, stream_gbps=25.0, gflops=150.0, bytes_per_param=4) for n in (1, 8, 12, 64, 512)]
    assert ceiling == [1.0, 8.0, 12.0, 12.0, 12.0]
    assert copy_speedup_ceiling(512, 4800.0, 989_000.0, 2) > 200  # an H200 in bf16
    with pytest.raises(ParamsError, match="positive"):
        copy_speedup_ceiling(8, 0.0, 1.0, 4)
