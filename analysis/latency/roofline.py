"""The roofline: physical floors of a decode step and a prefill, and the ceiling on their ratio.

Pure and torch-free: weight counts of a dense decoder from its published config, FLOPs of a prefill,
the floors on a device's bandwidth and peak throughput (datasheet figures, analysis/data/devices.json,
`read_devices`), the table of each measured kernel speedup beside its floors, the roof each kernel source is
set against (`source_roofs`: a GPU's datasheet, or the roofline this run's CPU profile measured,
`roofline_metrics`) and the ceiling on the paper's GPU (`paper_gpu_ceiling`). The `kernels fit` stage
writes them.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import polars as pl

from analysis.errors import ParamsError
from analysis.latency.names import FIT_SOURCE, PAPER_CLAIMS

BYTES_PER_PARAM = {"float32": 4, "bfloat16": 2, "float16": 2}
DEVICES_FILE = "devices.json"
DEVICES = Path(__file__).parents[1] / "data" / DEVICES_FILE  # GPU datasheets, their one home and one reader (`read_devices`)


def copy_speedup_ceiling(n: int, stream_gbps: float, gflops: float, bytes_per_param: float) -> float:
    """The roofline bound on T_ar(N) / T_prefill(N) for a dense model whose weights dominate traffic.

    A decode step reads every weight once for 2 FLOPs per weight (intensity 2 / bytes_per_param
    FLOP/byte), so it is memory-bound: t_step >= W / bandwidth. A prefill of N tokens reads the
    weights once for 2N FLOPs per weight: t_prefill >= max(W / bandwidth, 2 N P / flops). When both run
    at their floors the ratio is N while prefill stays memory-bound and saturates at the machine's
    ridge point times bytes_per_param / 2 beyond it. A loop slower than its floor (host overhead, an
    eager decode step) can measure a larger ratio than this: the ceiling holds for floor-bound kernels."""
    if n < 1 or stream_gbps <= 0 or gflops <= 0 or bytes_per_param <= 0:
        raise ParamsError(f"copy_speedup_ceiling needs positive inputs, got n={n}, "
                          f"stream_gbps={stream_gbps}, gflops={gflops}, bytes_per_param={bytes_per_param}")
    ridge = gflops / stream_gbps  # FLOP per byte
    return min(float(n), ridge * bytes_per_param / 2)


@dataclass(frozen=True)
class Roof:
    """One device's two ceilings, and where the figures come from (a datasheet or a measurement)."""

    device: str
    bandwidth_gbps: float
    gflops: float
    source: str


@dataclass(frozen=True)
class WeightCount:
    """Parameters of a dense decoder, those a decode step must read (the embedding table is read one
    row per token unless it is tied to the output head), and what a prefill computes with.

    A prefill token passes through the layers' weights (`layers`: every weight but the embedding and
    the head; the embedding is a gather, no FLOPs), the profiler's prefill keeps ONE logit
    (`logits_to_keep=1`), so the LM head (`head`: vocab x hidden) runs once per prefill, and
    attention costs 4 FLOPs per (query token, key, head dimension) (`attention_width`: layers x
    query heads x head_dim; QK^T and AV). A count built without the breakdown (`layers` None) charges
    every weight per token and no attention: an over-count, kept only for hand-made counts."""

    total: int
    read_per_step: int
    layers: int | None = None   # weights a prefill token multiplies with (all layers and the final norm)
    head: int = 0               # LM head weights, applied to the kept logits only
    attention_width: int = 0    # layers * query heads * head_dim


def decoder_weights(config: dict) -> WeightCount:
    """Weight count of a Qwen2/Llama-style decoder from its published config (q/k/v biases when
    `model_type` is qwen2; norms included; rotary and buffers are not weights)."""
    try:
        h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
        heads, vocab = config["num_attention_heads"], config["vocab_size"]
        kv_heads = config.get("num_key_value_heads", heads)
    except KeyError as exc:
        raise ParamsError(f"model config lacks {exc.args[0]!r}; cannot count its weights") from exc
    head_dim = config.get("head_dim") or h // heads
    q, kv = heads * head_dim, kv_heads * head_dim
    bias = (q + 2 * kv) if config.get("model_type") == "qwen2" else 0
    per_layer = h * q + 2 * h * kv + q * h + bias + 3 * h * inter + 2 * h
    embed = vocab * h
    tied = bool(config.get("tie_word_embeddings", False))
    total = layers * per_layer + h + embed + (0 if tied else embed)
    return WeightCount(total, total - (0 if tied else embed), layers=layers * per_layer + h, head=embed,
                       attention_width=layers * q)


PREFILL_LOGITS_KEPT = 1  # the profiler's prefill asks for the last position's logits only (logits_to_keep=1)


def prefill_flops(weights: WeightCount, n, c=0, logits_kept: int = PREFILL_LOGITS_KEPT):
    """FLOPs of one prefill of N tokens on a KV cache of c tokens: 2 per layer weight per token,
    2 per head weight per kept logit, and causal attention (token i of the N attends to c + i + 1
    keys: 4 x attention_width FLOPs per key). Without a breakdown (`layers` None): 2 x total x N."""
    n, c = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(c, dtype=float))
    if weights.layers is None:
        return 2.0 * weights.total * n
    keys = n * c + n * (n + 1) / 2
    head = np.where(n > 0, 2.0 * weights.head * logits_kept, 0.0)
    return 2.0 * weights.layers * n + head + 4.0 * weights.attention_width * keys


def step_floor_s(weights: WeightCount, roof: Roof, bytes_per_param: float) -> float:
    """The fastest a decode step can be: every weight read once at the device's bandwidth."""
    return weights.read_per_step * bytes_per_param / (roof.bandwidth_gbps * 1e9)


def prefill_floor_s(weights: WeightCount, n, roof: Roof, bytes_per_param: float, c=0):
    """The fastest a prefill of N tokens on c cached tokens can be: the weights read once, or its
    FLOPs (`prefill_flops`: the layers for N tokens, the head for the one kept logit, attention over
    the cache) at peak throughput, whichever is slower."""
    return np.maximum(step_floor_s(weights, roof, bytes_per_param), prefill_flops(weights, n, c) / (roof.gflops * 1e9))


def read_devices(path: Path = DEVICES) -> dict:
    """The datasheet document (analysis/data/devices.json), the one reader of it: each entry a GPU's `match`
    (a substring of its torch device name), `hbm_gbps`, `bf16_tflops` and `source`."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ParamsError(f"{path}: cannot read the GPU datasheets ({exc})") from None
    if not isinstance(document, dict):
        raise ParamsError(f"{path}: the GPU datasheets must be a JSON object of entries")
    return document


def datasheet_entry(device_name: str, document: dict | None = None) -> dict | None:
    """The datasheet entry (with its `name`) whose `match` is in a recorded device name, or None."""
    sheets = read_devices() if document is None else document
    return next((dict(e, name=k) for k, e in sheets.items()
                 if not k.startswith("_") and isinstance(e, dict) and e.get("match", "\0") in device_name), None)


def device_roofs(document: dict) -> list[tuple[str, Roof]]:
    """(substring of the device name, Roof) for every datasheet entry of analysis/data/devices.json."""
    roofs = []
    for name, entry in document.items():
        if name.startswith("_"):
            continue
        try:
            roofs.append((entry["match"], Roof(name, float(entry["hbm_gbps"]), float(entry["bf16_tflops"]) * 1000,
                                               f"datasheet: {entry['source']}")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParamsError(f"{DEVICES_FILE}: entry {name!r} lacks match/hbm_gbps/bf16_tflops/source ({exc})") from exc
    return roofs


def device_roof(device_name: str, document: dict) -> Roof | None:
    """The datasheet roof of a GPU by its torch device name; None when the file does not know it."""
    return next((roof for match, roof in device_roofs(document) if match in device_name), None)


def device_ceilings(weights: dict[str, WeightCount], contexts, n: int, roof: Roof, dtype: str = "bfloat16") -> list[dict]:
    """The copy-speedup ceiling N x step floor / prefill floor on `roof` at N = n, per model and context:
    what floor-bound kernels could reach on that device (claim 1 sets the paper's top ratio beside its GPU's)."""
    bpp = BYTES_PER_PARAM[dtype]
    return [{"model": model, "context": int(c), "n": int(n),
             "ceiling": float(n * step_floor_s(w, roof, bpp) / float(prefill_floor_s(w, n, roof, bpp, c)))}
            for model, w in sorted(weights.items()) for c in sorted(set(contexts))]


def roofline_table(speedups: pl.DataFrame, weights: dict[str, WeightCount], roofs: dict[str, Roof]) -> pl.DataFrame:
    """Each measured (kernel source, context, N) beside its physical floors: the ceiling ratio when
    both kernels run at their floors, and the share of each floor the measurement reached
    (floor / measured: 1 means at the floor). `roofs` maps kernel_source -> Roof; sources without a
    roof or a weight count are left out (the caller says so)."""
    rows = []
    for r in speedups.iter_rows(named=True):
        roof, count = roofs.get(r["kernel_source"]), weights.get(r["model"])
        if roof is None or count is None or r["dtype"] not in BYTES_PER_PARAM:
            continue
        bpp = BYTES_PER_PARAM[r["dtype"]]
        step, pre = step_floor_s(count, roof, bpp), float(prefill_floor_s(count, r["n"], roof, bpp, r["context"]))
        rows.append({
            "kernel_source": r["kernel_source"], "model": r["model"], "dtype": r["dtype"], "device": r["device"],
            "roof": roof.device, "roof_source": roof.source, "baseline": r["baseline"], "context": r["context"],
            "n": r["n"], "speedup": r["speedup"], "ceiling": r["n"] * step / pre,
            "ar_step_ms": r["t_ar"] / r["n"] * 1000, "step_floor_ms": step * 1000,
            "ar_share_of_floor": r["n"] * step / r["t_ar"],
            "prefill_ms": r["t_prefill"] * 1000, "prefill_floor_ms": pre * 1000,
            "prefill_share_of_floor": pre / r["t_prefill"],
        })
    return pl.DataFrame(rows) if rows else pl.DataFrame()


@dataclass(frozen=True)
class PrefillFloor:
    """The fastest a prefill can run on a device (prefill_floor_s: the weights read
    once at the datasheet bandwidth, or the prefill's FLOPs at its peak): the floor no extrapolated price goes under."""

    weights: WeightCount
    roof: Roof
    bytes_per_param: float

    def seconds(self, n, c) -> np.ndarray:
        return np.asarray(prefill_floor_s(self.weights, n, self.roof, self.bytes_per_param, c), dtype=float)

    def to_record(self) -> dict:
        return {"weights": asdict(self.weights), "roof": asdict(self.roof), "bytes_per_param": self.bytes_per_param}

    @classmethod
    def from_record(cls, record: dict | None) -> PrefillFloor | None:
        if record is None:
            return None
        try:
            return cls(WeightCount(**record["weights"]), Roof(**record["roof"]), float(record["bytes_per_param"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParamsError(f"latency model record: a malformed prefill floor ({exc!r})") from None
# ---------------------------------------------------------------- the roofs of a kernel speedup table

def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def roofline_metrics(sidecar: dict | None, speedups: pl.DataFrame) -> dict | str:
    """This machine's roofline (median over the recorded sessions) and the copy-speedup ceiling it
    implies for the profiled dtype (analysis.latency.roofline.copy_speedup_ceiling), beside the ratio
    measured at the largest N. "not recorded" when no session measured a roofline."""
    roofs = [r["roofline"] for r in (sidecar or {}).get("runs", []) if isinstance(r.get("roofline"), dict)]
    if not roofs:
        return "not recorded"
    stream = _median([r["stream_gbps"] for r in roofs])
    gflops = {"float32": _median([r["matmul_f32_gflops"] for r in roofs]),
              "bfloat16": _median([r["matmul_bf16_gflops"] for r in roofs])}
    dtype = min(speedups["dtype"].to_list())  # one dtype per profile; the first by name if several
    if dtype not in BYTES_PER_PARAM:
        raise ParamsError(f"kernels fit: no bytes-per-parameter for dtype {dtype!r}; known: {sorted(BYTES_PER_PARAM)}")
    compute = gflops["float32" if dtype == "float32" else "bfloat16"]
    n_max = int(speedups["n"].max())
    measured = speedups.filter(pl.col("is_strongest") & (pl.col("n") == n_max) & (pl.col("dtype") == dtype))["speedup"]
    return {
        "stream_gbps": stream, "matmul_gflops_float32": gflops["float32"], "matmul_gflops_bfloat16": gflops["bfloat16"],
        "dtype": dtype, "bytes_per_param": BYTES_PER_PARAM[dtype], "ridge_flops_per_byte": compute / stream,
        "n_max": n_max, "ceiling": copy_speedup_ceiling(n_max, stream, compute, BYTES_PER_PARAM[dtype]),
        "measured_at_n_max": float(measured.max()) if measured.len() else None, "runs": len(roofs),
    }


def source_roofs(speedups: pl.DataFrame, names_by_source: dict[str, list[str]], fit_roof: dict | str
                 ) -> tuple[dict[str, Roof], list[str]]:
    """The roof each kernel source of a speedup table is set against: a GPU's datasheet (analysis/data/devices.json)
    by its recorded device name; the fitted source's CPU profile the roofline its sidecar measured (`fit_roof`, from
    `roofline_metrics`). Sources without one are named in the second value."""
    devices = read_devices()
    roofs, missing = {}, []
    for name in speedups["kernel_source"].unique(maintain_order=True).to_list():
        rows = speedups.filter(pl.col("kernel_source") == name)
        source, dtype = rows["source"][0], rows["dtype"][0]
        names = names_by_source[source]
        gpu = next((device_roof(n, devices) for n in names if rows["device"][0].startswith("cuda")), None)
        if gpu is not None:
            roofs[name] = gpu
        elif source == FIT_SOURCE and isinstance(fit_roof, dict):
            gflops = fit_roof["matmul_gflops_float32" if dtype == "float32" else "matmul_gflops_bfloat16"]
            roofs[name] = Roof(", ".join(names) or "this machine", fit_roof["stream_gbps"], gflops,
                               "measured by this run's profile (stream copy and matmul)")
        else:
            missing.append(name)
    return roofs, missing


def paper_models() -> list[str]:
    """The models of the paper's kernel claim (paper_claims.json `kernel_speedup.models`)."""
    return list(json.loads(PAPER_CLAIMS.read_text())["kernel_speedup"].get("models", []))


def paper_gpu_ceiling(speedups: pl.DataFrame, weights: dict[str, WeightCount]) -> dict:
    """The copy-speedup roofline ceiling on the paper's GPU (paper_claims.json `_gpu_reference`, its
    datasheet in devices.json) for the paper's models (`paper_models`, whose weight counts are `weights`)
    at the paper's top N, at each context the speedup table holds: what claim 1 sets beside the paper's
    top ratio."""
    paper = json.loads(PAPER_CLAIMS.read_text())
    spec, entry = paper["kernel_speedup"], paper["_gpu_reference"]["datasheet_entry"]
    roof = next((r for _, r in device_roofs(read_devices()) if r.device == entry), None)
    n = int(max(point[0] for point in spec["points"]))
    if roof is None:
        raise ParamsError(f"devices.json has no entry {entry!r} (paper_claims.json _gpu_reference.datasheet_entry)")
    contexts = speedups["context"].unique().to_list()
    return {"device": roof.device, "roof_source": roof.source, "n": n, "dtype": "bfloat16",
            "ceilings": device_ceilings(weights, contexts, n, roof)}
